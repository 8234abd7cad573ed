// MemEnv: an Env whose files live in memory, so fuzz targets can hand the persistence layer any
// bytes as files without touching the disk. Thread-safe (the log writer's threads use it too).
#pragma once

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "persist/env.h"
#include "persist/log_format.h"

namespace prefixd::persist {

class MemEnv : public Env {
 public:
  void Put(const std::string& path, std::string bytes) {
    std::lock_guard lock(mu_);
    files_[path] = std::make_shared<std::string>(std::move(bytes));
  }

  Result<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) override {
    std::lock_guard lock(mu_);
    auto it = files_.find(path);
    if (mode == OpenMode::kCreateTruncate) {
      files_[path] = std::make_shared<std::string>();
      it = files_.find(path);
    }
    if (it == files_.end()) return Status::NotFound("no file " + path);
    return std::unique_ptr<File>(std::make_unique<MemFile>(this, it->second));
  }
  Status Rename(const std::string& from, const std::string& to) override {
    std::lock_guard lock(mu_);
    auto it = files_.find(from);
    if (it == files_.end()) return Status::NotFound("no file " + from);
    files_[to] = it->second;
    files_.erase(from);
    return Status::Ok();
  }
  Status Remove(const std::string& path) override {
    std::lock_guard lock(mu_);
    return files_.erase(path) == 1 ? Status::Ok() : Status::NotFound("no file " + path);
  }
  Status SyncDir(const std::string&) override { return Status::Ok(); }
  Status CreateDirs(const std::string&) override { return Status::Ok(); }
  Result<std::vector<std::string>> List(const std::string& dir) override {
    std::lock_guard lock(mu_);
    std::vector<std::string> names;
    for (const auto& [path, bytes] : files_) {
      if (path.starts_with(dir + "/")) names.push_back(path.substr(dir.size() + 1));
    }
    return names;
  }
  Result<FileInfo> Stat(const std::string& path) override {
    std::lock_guard lock(mu_);
    auto it = files_.find(path);
    if (it == files_.end()) return Status::NotFound("no file " + path);
    return FileInfo{it->second->size(), 0};
  }
  Result<std::unique_ptr<DirLock>> Lock(const std::string&) override {
    return std::make_unique<DirLock>();
  }

 private:
  class MemFile : public File {
   public:
    MemFile(MemEnv* env, std::shared_ptr<std::string> bytes)
        : env_(env), bytes_(std::move(bytes)) {}
    Status WriteAt(uint64_t offset, std::span<const iovec> iov, uint64_t* written) override {
      std::lock_guard lock(env_->mu_);
      *written = 0;
      for (const iovec& v : iov) {
        if (bytes_->size() < offset + v.iov_len) bytes_->resize(offset + v.iov_len);
        std::memcpy(bytes_->data() + offset, v.iov_base, v.iov_len);
        offset += v.iov_len, *written += v.iov_len;
      }
      return Status::Ok();
    }
    Status ReadAt(uint64_t offset, void* out, uint64_t length) override {
      std::lock_guard lock(env_->mu_);
      if (offset > bytes_->size() || length > bytes_->size() - offset) {
        return Status::OutOfRange("read past the end");
      }
      std::memcpy(out, bytes_->data() + offset, length);
      return Status::Ok();
    }
    Status Sync() override { return Status::Ok(); }
    Status Truncate(uint64_t size) override {
      std::lock_guard lock(env_->mu_);
      bytes_->resize(size);
      return Status::Ok();
    }
    Result<uint64_t> Size() override {
      std::lock_guard lock(env_->mu_);
      return static_cast<uint64_t>(bytes_->size());
    }

   private:
    MemEnv* env_;
    std::shared_ptr<std::string> bytes_;
  };

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<std::string>> files_;
};

// Walks `file` (a file header, then records back to back) and rewrites each record's checksum
// with the file's seed, so a fuzzer's mutations reach the payload decoder instead of stopping at
// the checksum. A record whose length runs past the end is left as it is.
inline void SealRecordsInPlace(std::string& file) {
  if (file.size() < kFileHeaderSize) return;
  const FileHeader header = DecodeFileHeader(reinterpret_cast<const uint8_t*>(file.data()));
  const uint64_t seed = FileSeed(header);
  uint64_t at = kFileHeaderSize;
  while (at + kRecordHeaderSize <= file.size()) {
    auto* h = reinterpret_cast<uint8_t*>(file.data() + at);
    const uint64_t length = GetU64(h + 24);
    if (length > file.size() - at - kRecordHeaderSize) return;
    const std::string_view payload(file.data() + at + kRecordHeaderSize, length);
    PutU64(h, RecordChecksum(seed, h, std::span<const std::string_view>(&payload, 1)));
    at += kRecordHeaderSize + length;
  }
}

}  // namespace prefixd::persist
