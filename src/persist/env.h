// Env: every file operation of the persistence layer (open, positional gather writes and reads,
// fdatasync, ftruncate, rename, remove, directory listing and fsync, the directory lock) behind
// one small interface, after LevelDB's Env. Env::Posix() is the real one; tests substitute one
// that injects faults (lost unsynced writes, torn and short writes, EIO/ENOSPC on the N-th
// call, renames undone without a directory fsync). Errors are Status values. Implementations
// are thread-safe; one File is used by one thread at a time.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "prefixd/status.h"

namespace prefixd::persist {

class File {
 public:
  virtual ~File() = default;
  // Writes every byte of `iov` at `offset`. On failure `*written` says how many reached the file
  // (a short write followed by an error leaves a prefix).
  virtual Status WriteAt(uint64_t offset, std::span<const iovec> iov, uint64_t* written) = 0;
  // Reads exactly `length` bytes at `offset`; an error when fewer exist.
  virtual Status ReadAt(uint64_t offset, void* out, uint64_t length) = 0;
  virtual Status Sync() = 0;  // fdatasync
  virtual Status Truncate(uint64_t size) = 0;
  virtual Result<uint64_t> Size() = 0;
};

enum class OpenMode {
  kRead,            // an existing file, read only
  kReadWrite,       // an existing file
  kCreateTruncate,  // created (or emptied) for writing
};

struct FileInfo {
  uint64_t size = 0;
  int64_t modified_unix_seconds = 0;
};

// Held while a server uses a directory; released when destroyed.
class DirLock {
 public:
  virtual ~DirLock() = default;
};

class Env {
 public:
  virtual ~Env() = default;

  virtual Result<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) = 0;
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // NotFound when there is no such file.
  virtual Status Remove(const std::string& path) = 0;
  // fsync of a directory, so an entry created, renamed or removed in it survives a power cut.
  virtual Status SyncDir(const std::string& dir) = 0;
  virtual Status CreateDirs(const std::string& dir) = 0;
  // The names (not paths) in `dir`.
  virtual Result<std::vector<std::string>> List(const std::string& dir) = 0;
  // NotFound when there is no such file.
  virtual Result<FileInfo> Stat(const std::string& path) = 0;
  // An exclusive lock on `path` (created if missing), or an error when another process has it.
  virtual Result<std::unique_ptr<DirLock>> Lock(const std::string& path) = 0;

  // The real file system; lives for the whole process.
  static Env* Posix();
};

// Writes `bytes` at `offset`, whole.
Status WriteAllAt(File& file, uint64_t offset, const void* bytes, uint64_t length);

// A data directory's lock (its LOCK file); Unavailable, saying so, while another prefixd process
// serves from it.
Result<std::unique_ptr<DirLock>> LockDataDir(Env* env, const std::string& dir);

}  // namespace prefixd::persist
