# Fails when a generated file (docs/commands.md, or etc/prefixd.conf with -DARGS=--conf) differs
# from what prefixd-commands-doc renders.
execute_process(COMMAND ${GENERATOR} ${ARGS} OUTPUT_VARIABLE rendered RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "prefixd-commands-doc failed: ${rc}")
endif()
file(READ ${EXPECTED} committed)
if(NOT rendered STREQUAL committed)
  message(FATAL_ERROR "${EXPECTED} is out of date: run build/dev/prefixd-commands-doc ${ARGS} > ${EXPECTED}")
endif()
