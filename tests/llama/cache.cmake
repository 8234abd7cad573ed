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
