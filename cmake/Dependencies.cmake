# Every dependency comes from Debian's packages (scripts/install-deps.sh installs them).
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(OpenSSL REQUIRED)  # TLS: asio's SSL layer over Debian's libssl-dev
find_package(PkgConfig REQUIRED)
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
# sd_notify for `supervised systemd` (libsystemd-dev).
pkg_check_modules(SYSTEMD REQUIRED IMPORTED_TARGET libsystemd)

# Standalone asio is header-only and ships no CMake config.
find_path(ASIO_INCLUDE_DIR asio.hpp REQUIRED)
add_library(asio INTERFACE)
target_include_directories(asio SYSTEM INTERFACE ${ASIO_INCLUDE_DIR})
target_compile_definitions(asio INTERFACE ASIO_STANDALONE ASIO_NO_DEPRECATED)
target_link_libraries(asio INTERFACE Threads::Threads)

if(PREFIXD_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
