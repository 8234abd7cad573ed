// Small POSIX file helpers for the persistence layer: full writes, directory syncs, atomic
// replace. Each returns an error text, empty on success. Any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace prefixd::persist {

std::string WriteAll(int fd, const void* data, size_t length);
// fsync of a directory, so a created, renamed or removed entry survives a power cut.
std::string SyncDirectory(const std::string& dir);
std::string CreateDirectories(const std::string& dir);

}  // namespace prefixd::persist
