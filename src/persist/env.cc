#include "persist/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace prefixd::persist {
namespace {

constexpr size_t kMaxIov = 512;  // well under IOV_MAX

Status Errno(std::string_view what, const std::string& path, int err = errno) {
  std::string message = std::string(what) + " " + path + ": " + std::strerror(err);
  if (err == ENOENT) return Status::NotFound(std::move(message));
  if (err == ENOSPC || err == EDQUOT) return Status::ResourceExhausted(std::move(message));
  return Status::IoError(std::move(message));
}

class PosixFile final : public File {
 public:
  PosixFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixFile() override { ::close(fd_); }

  Status WriteAt(uint64_t offset, std::span<const iovec> iov, uint64_t* written) override {
    std::vector<iovec> left(iov.begin(), iov.end());
    size_t index = 0;
    *written = 0;
    while (index < left.size()) {
      if (left[index].iov_len == 0) {
        ++index;
        continue;
      }
      const int count = static_cast<int>(std::min(left.size() - index, kMaxIov));
      ssize_t n = ::pwritev(fd_, left.data() + index, count, static_cast<off_t>(offset + *written));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Errno("write", path_);
      *written += static_cast<uint64_t>(n);
      auto rest = static_cast<size_t>(n);
      while (index < left.size() && rest >= left[index].iov_len) rest -= left[index++].iov_len;
      if (rest > 0) {
        left[index].iov_base = static_cast<char*>(left[index].iov_base) + rest;
        left[index].iov_len -= rest;
      }
    }
    return Status::Ok();
  }

  Status ReadAt(uint64_t offset, void* out, uint64_t length) override {
    auto* p = static_cast<uint8_t*>(out);
    while (length > 0) {
      ssize_t n = ::pread(fd_, p, length, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Errno("read", path_);
      if (n == 0) return Status::OutOfRange("read " + path_ + ": past the end of the file");
      p += n, offset += static_cast<uint64_t>(n), length -= static_cast<uint64_t>(n);
    }
    return Status::Ok();
  }

  Status Sync() override {
    if (::fdatasync(fd_) != 0) return Errno("fdatasync", path_);
    return Status::Ok();
  }

  Status Truncate(uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) return Errno("ftruncate", path_);
    return Status::Ok();
  }

  Result<uint64_t> Size() override {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return Errno("stat", path_);
    return static_cast<uint64_t>(st.st_size);
  }

 private:
  int fd_;
  std::string path_;
};

class PosixLock final : public DirLock {
 public:
  explicit PosixLock(int fd) : fd_(fd) {}
  ~PosixLock() override { ::close(fd_); }

 private:
  int fd_;
};

class PosixEnv final : public Env {
 public:
  Result<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) override {
    int flags = O_CLOEXEC;
    if (mode == OpenMode::kRead) flags |= O_RDONLY;
    if (mode == OpenMode::kReadWrite) flags |= O_RDWR;
    if (mode == OpenMode::kCreateTruncate) flags |= O_WRONLY | O_CREAT | O_TRUNC;
    int fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0) return Errno("open", path);
    return std::unique_ptr<File>(std::make_unique<PosixFile>(fd, path));
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return Errno("rename", from + " to " + to);
    return Status::Ok();
  }

  Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return Errno("remove", path);
    return Status::Ok();
  }

  Status SyncDir(const std::string& dir) override {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Errno("open", dir);
    Status status = ::fsync(fd) == 0 ? Status::Ok() : Errno("fsync", dir);
    ::close(fd);
    return status;
  }

  Status CreateDirs(const std::string& dir) override {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status::IoError("can't create " + dir + ": " + ec.message());
    return Status::Ok();
  }

  Result<std::vector<std::string>> List(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return Errno("list", dir);
    std::vector<std::string> names;
    while (const dirent* entry = ::readdir(d)) {
      std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(std::move(name));
    }
    ::closedir(d);
    return names;
  }

  Result<FileInfo> Stat(const std::string& path) override {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return Errno("stat", path);
    return FileInfo{static_cast<uint64_t>(st.st_size), static_cast<int64_t>(st.st_mtime)};
  }

  Result<std::unique_ptr<DirLock>> Lock(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Errno("open", path);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      return Status::Unavailable(path + " is locked by another process");
    }
    return std::unique_ptr<DirLock>(std::make_unique<PosixLock>(fd));
  }
};

}  // namespace

Env* Env::Posix() {
  static PosixEnv env;
  return &env;
}

Status WriteAllAt(File& file, uint64_t offset, const void* bytes, uint64_t length) {
  iovec one{const_cast<void*>(bytes), length};
  uint64_t written = 0;
  return file.WriteAt(offset, std::span<const iovec>(&one, 1), &written);
}

Result<std::unique_ptr<DirLock>> LockDataDir(Env* env, const std::string& dir) {
  auto lock = env->Lock(dir + "/LOCK");
  if (lock.ok()) return lock;
  if (lock.status().code() == StatusCode::kUnavailable) {
    return Status::Unavailable("data directory " + dir + " is in use by another prefixd process");
  }
  return Status(lock.status().code(), "can't lock " + dir + ": " + lock.status().message());
}

}  // namespace prefixd::persist
