# Fails when docs/commands.md differs from what prefixd-commands-doc renders.
execute_process(COMMAND ${GENERATOR} OUTPUT_VARIABLE rendered RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "prefixd-commands-doc failed: ${rc}")
endif()
file(READ ${EXPECTED} committed)
if(NOT rendered STREQUAL committed)
  message(FATAL_ERROR "docs/commands.md is out of date: run build/dev/prefixd-commands-doc > docs/commands.md")
endif()
