# The prompt cache (src/llama) against the real llama.cpp and a real prefixd-server, on the
# synthetic tiny models scripts/llama/make_gguf.py writes (Debian's python3 and numpy).
add_executable(prompt_cache_test ${CMAKE_CURRENT_LIST_DIR}/prompt_cache_test.cc)
target_link_libraries(prompt_cache_test PRIVATE prefixd_llama_tools prefixd_server_fixture
  GTest::gtest_main)
target_include_directories(prompt_cache_test PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tests)
target_compile_definitions(prompt_cache_test PRIVATE
  PREFIXD_MAKE_GGUF="${CMAKE_SOURCE_DIR}/scripts/llama/make_gguf.py")
add_dependencies(prompt_cache_test prefixd-server)
prefixd_test_flags(prompt_cache_test)
gtest_discover_tests(prompt_cache_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS llama
  ENVIRONMENT "PREFIXD_SERVER=$<TARGET_FILE:prefixd-server>;PREFIXD_LLAMA_GGUF_PY=${PREFIXD_LLAMA_GGUF_PY}")

# prefixd-llama end to end (tests/llama/cli_test.py): chat's three workloads and sweep, two
# processes against a real server. Debian's python3 with python3-redis runs it.
find_program(PREFIXD_LLAMA_CLI_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
foreach(what chat sweep)
  set(families qwen35 mamba2 rwkv7 qwen3 granitehybrid)
  if(what STREQUAL "chat")
    set(families qwen35 mamba2 qwen3)
  endif()
  foreach(family ${families})
    add_test(NAME llama_cli_${what}_${family}
      COMMAND ${PREFIXD_LLAMA_CLI_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/cli_test.py
              $<TARGET_FILE:prefixd-llama> ${CMAKE_SOURCE_DIR}/scripts/llama/make_gguf.py
              ${family} ${what})
    set_tests_properties(llama_cli_${what}_${family} PROPERTIES LABELS llama TIMEOUT 300
      SKIP_RETURN_CODE 77
      ENVIRONMENT "PREFIXD_SERVER=$<TARGET_FILE:prefixd-server>;PREFIXD_LLAMA_GGUF_PY=${PREFIXD_LLAMA_GGUF_PY}")
  endforeach()
endforeach()

# The seed corpus of tests/fuzz/llama_state_fuzz.cc, written by hand with this (fuzz_seeds.cc).
add_executable(prefixd-llama-fuzz-seeds ${CMAKE_CURRENT_LIST_DIR}/fuzz_seeds.cc)
target_link_libraries(prefixd-llama-fuzz-seeds PRIVATE prefixd_llama_tools)
target_include_directories(prefixd-llama-fuzz-seeds PRIVATE ${CMAKE_SOURCE_DIR}/src)
prefixd_warnings(prefixd-llama-fuzz-seeds)
