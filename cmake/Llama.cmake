# llama.cpp for src/llama (prefixd's prompt cache for llama.cpp programs) and its tests.
#
# Where it comes from, in this order:
#   1. -DPREFIXD_LLAMA_DIR=<prefix>: a user's own llama.cpp, built or installed (CUDA builds
#      included): <prefix>/include/llama.h and ggml.h, <prefix>/lib (or bin) with libllama.so,
#      libggml.so and libggml-base.so;
#   2. find_package(llama): an installed llama.cpp with its CMake package;
#   3. the pinned release that scripts/fetch-llama.sh puts in .deps/llama.cpp.
# Headers and libraries must be one release. At configure time a probe compiled against the
# headers and linked with the libraries runs and reports the libraries' ggml version and commit;
# the pinned copy must report the version its RELEASE file names. Both are compiled into
# prefixd_llama, which refuses to run against a library that reports anything else (the library
# on the loader's path can differ from the one built against).
#
# Defines the target prefixd::llama_cpp and PREFIXD_LLAMA_FOUND, PREFIXD_LLAMA_LIB_DIR (where the
# libraries and their dynamically loaded CPU backends are), PREFIXD_LLAMA_GGML_VERSION,
# PREFIXD_LLAMA_GGML_COMMIT, PREFIXD_LLAMA_SOURCE (which of the three), PREFIXD_LLAMA_GGUF_PY
# (llama.cpp's gguf-py, for writing test models; empty when not known).

set(PREFIXD_LLAMA "AUTO" CACHE STRING "Build the llama.cpp prompt cache: AUTO, ON, OFF")
set(PREFIXD_LLAMA_DIR "" CACHE PATH "A llama.cpp build or install prefix to use")
set(PREFIXD_LLAMA_FOUND OFF)
if(PREFIXD_LLAMA STREQUAL "OFF")
  return()
endif()

set(prefixd_llama_pinned "${CMAKE_SOURCE_DIR}/.deps/llama.cpp")
set(PREFIXD_LLAMA_GGUF_PY "")
unset(prefixd_llama_include)
unset(prefixd_llama_libs)

function(prefixd_llama_find_libs dir out)
  set(libs "")
  foreach(name llama ggml ggml-base)
    find_library(lib_${name} NAMES ${name} PATHS ${dir}/lib ${dir}/lib64 ${dir}/bin ${dir}
                 NO_DEFAULT_PATH NO_CACHE)
    if(NOT lib_${name})
      set(${out} "" PARENT_SCOPE)
      return()
    endif()
    list(APPEND libs ${lib_${name}})
  endforeach()
  set(${out} "${libs}" PARENT_SCOPE)
endfunction()

if(PREFIXD_LLAMA_DIR)
  prefixd_llama_find_libs("${PREFIXD_LLAMA_DIR}" prefixd_llama_libs)
  find_path(prefixd_llama_include llama.h PATHS ${PREFIXD_LLAMA_DIR}/include NO_DEFAULT_PATH
            NO_CACHE)
  if(NOT prefixd_llama_libs OR NOT prefixd_llama_include)
    message(FATAL_ERROR "PREFIXD_LLAMA_DIR=${PREFIXD_LLAMA_DIR} holds no llama.cpp: expected "
                        "include/llama.h and lib/libllama.so, libggml.so, libggml-base.so")
  endif()
  set(PREFIXD_LLAMA_SOURCE "PREFIXD_LLAMA_DIR")
  if(EXISTS "${PREFIXD_LLAMA_DIR}/gguf-py")
    set(PREFIXD_LLAMA_GGUF_PY "${PREFIXD_LLAMA_DIR}/gguf-py")
  endif()
else()
  find_package(llama CONFIG QUIET)
  if(llama_FOUND AND TARGET llama)
    get_target_property(prefixd_llama_include llama INTERFACE_INCLUDE_DIRECTORIES)
    set(prefixd_llama_libs llama)
    set(PREFIXD_LLAMA_SOURCE "find_package(llama)")
  elseif(EXISTS "${prefixd_llama_pinned}/RELEASE")
    prefixd_llama_find_libs("${prefixd_llama_pinned}" prefixd_llama_libs)
    set(prefixd_llama_include "${prefixd_llama_pinned}/include")
    set(PREFIXD_LLAMA_SOURCE "pinned")
    set(PREFIXD_LLAMA_GGUF_PY "${prefixd_llama_pinned}/gguf-py")
  endif()
endif()

if(NOT prefixd_llama_libs)
  if(PREFIXD_LLAMA STREQUAL "ON")
    message(FATAL_ERROR "PREFIXD_LLAMA=ON but no llama.cpp was found: run scripts/fetch-llama.sh "
                        "or set PREFIXD_LLAMA_DIR")
  endif()
  message(STATUS "llama.cpp: not found (scripts/fetch-llama.sh fetches the pinned release); "
                 "src/llama skipped")
  return()
endif()

# The probe: the headers' declarations against the libraries' code.
set(prefixd_llama_probe_dir "${CMAKE_BINARY_DIR}/llama-probe")
try_run(prefixd_llama_probe_ran prefixd_llama_probe_compiled
  SOURCES "${CMAKE_SOURCE_DIR}/cmake/llama/probe.cc"
  CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${prefixd_llama_include}"
  LINK_LIBRARIES ${prefixd_llama_libs}
  COMPILE_OUTPUT_VARIABLE prefixd_llama_probe_build
  RUN_OUTPUT_VARIABLE prefixd_llama_probe_out)
if(NOT prefixd_llama_probe_compiled OR NOT prefixd_llama_probe_ran EQUAL 0)
  message(FATAL_ERROR "llama.cpp (${PREFIXD_LLAMA_SOURCE}): its headers and libraries do not "
                      "build and run together:\n${prefixd_llama_probe_build}\n"
                      "${prefixd_llama_probe_out}")
endif()
string(STRIP "${prefixd_llama_probe_out}" prefixd_llama_probe_out)
string(REPLACE " " ";" prefixd_llama_probe_out "${prefixd_llama_probe_out}")
list(GET prefixd_llama_probe_out 0 PREFIXD_LLAMA_GGML_VERSION)
list(GET prefixd_llama_probe_out 1 PREFIXD_LLAMA_GGML_COMMIT)
list(GET prefixd_llama_probe_out 2 prefixd_llama_lib_file)

if(PREFIXD_LLAMA_SOURCE STREQUAL "pinned")
  file(READ "${prefixd_llama_pinned}/RELEASE" prefixd_llama_release)
  if(NOT prefixd_llama_release MATCHES "ggml=${PREFIXD_LLAMA_GGML_VERSION}")
    message(FATAL_ERROR "The pinned llama.cpp in ${prefixd_llama_pinned} says "
      "'${prefixd_llama_release}' but its libraries report ggml ${PREFIXD_LLAMA_GGML_VERSION}: "
      "remove the folder and run scripts/fetch-llama.sh again")
  endif()
endif()

get_filename_component(PREFIXD_LLAMA_LIB_DIR "${prefixd_llama_lib_file}" DIRECTORY)
add_library(prefixd_llama_cpp INTERFACE)
add_library(prefixd::llama_cpp ALIAS prefixd_llama_cpp)
target_include_directories(prefixd_llama_cpp SYSTEM INTERFACE ${prefixd_llama_include})
target_link_libraries(prefixd_llama_cpp INTERFACE ${prefixd_llama_libs} ${CMAKE_DL_LIBS})
# The libraries are found at run time where they were at build time (and the CPU backends
# beside them, which ggml loads by path).
target_link_options(prefixd_llama_cpp INTERFACE "LINKER:-rpath,${PREFIXD_LLAMA_LIB_DIR}")
target_compile_definitions(prefixd_llama_cpp INTERFACE
  PREFIXD_LLAMA_GGML_VERSION="${PREFIXD_LLAMA_GGML_VERSION}"
  PREFIXD_LLAMA_GGML_COMMIT="${PREFIXD_LLAMA_GGML_COMMIT}"
  PREFIXD_LLAMA_LIB_DIR="${PREFIXD_LLAMA_LIB_DIR}")
set(PREFIXD_LLAMA_FOUND ON)
message(STATUS "llama.cpp (${PREFIXD_LLAMA_SOURCE}): ggml ${PREFIXD_LLAMA_GGML_VERSION} "
               "(${PREFIXD_LLAMA_GGML_COMMIT}) in ${PREFIXD_LLAMA_LIB_DIR}")
