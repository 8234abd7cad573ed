# Warnings for our own targets only (dependencies are included as SYSTEM).
function(prefixd_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
endfunction()
