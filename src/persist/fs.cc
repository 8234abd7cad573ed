#include "persist/fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace prefixd::persist {

std::string WriteAll(int fd, const void* data, size_t length) {
  auto* p = static_cast<const char*>(data);
  while (length > 0) {
    ssize_t n = ::write(fd, p, length);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::string("write: ") + std::strerror(errno);
    p += n, length -= static_cast<size_t>(n);
  }
  return {};
}

std::string SyncDirectory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return "open " + dir + ": " + std::strerror(errno);
  std::string err;
  if (::fsync(fd) != 0) err = "fsync " + dir + ": " + std::strerror(errno);
  ::close(fd);
  return err;
}

std::string CreateDirectories(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "can't create " + dir + ": " + ec.message();
  return {};
}

}  // namespace prefixd::persist
