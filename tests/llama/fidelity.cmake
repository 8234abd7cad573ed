# prefixd-hybrid against llama.cpp on the same synthetic weights (fidelity_test.py). Included
# into the top directory after the whole tree has been read (tests/llama/CMakeLists.txt defers
# it), because prefixd-hybrid is defined in benchmarks/hybrid/, after tests/.
if(NOT TARGET prefixd-hybrid)
  if(DEFINED ENV{CI})
    add_test(NAME llama_fidelity_no_prefixd_hybrid COMMAND ${CMAKE_COMMAND} -E false)
    set_tests_properties(llama_fidelity_no_prefixd_hybrid PROPERTIES LABELS llama)
  endif()
  return()
endif()

# mamba2-groups2: Mamba-2 with two groups, whose gated RMSNorm is per group in llama.cpp, in
# mamba_ssm and (since issue 32) in prefixd-hybrid.
foreach(case qwen35 mamba2 rwkv7 mamba2-groups2)
  add_test(NAME llama_fidelity_${case}
    COMMAND ${PREFIXD_LLAMA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/fidelity_test.py ${case}
            $<TARGET_FILE:prefixd-hybrid> $<TARGET_FILE:prefixd-llama-run>)
  set_tests_properties(llama_fidelity_${case} PROPERTIES LABELS llama TIMEOUT 120
    SKIP_RETURN_CODE 77 ENVIRONMENT "PREFIXD_LLAMA_GGUF_PY=${PREFIXD_LLAMA_GGUF_PY}")
endforeach()
