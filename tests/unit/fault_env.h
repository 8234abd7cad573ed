// FaultEnv: an Env for tests that injects the faults a disk and a power cut cause, as a normal
// user: the N-th operation fails with an I/O error or "no space", writes come back short, and
// Crash() plays a power cut on the real files: each file keeps what was synced (plus, torn at a
// sector boundary, part of what was not), and entries created, renamed or removed in a
// directory that was not fsynced since are put back as they were. Syncs are only recorded (the
// files are on a disk that does not lose power in the test), which keeps thousands of runs fast.
// Thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "persist/env.h"

namespace prefixd::persist::testing {

class FaultEnv : public Env {
 public:
  enum class Fault { kIoError, kNoSpace };
  // What survives of the writes made since a file's last sync.
  enum class Tear { kNone, kSector };

  explicit FaultEnv(Env* base = Env::Posix()) : base_(base) {}

  // The `n`-th operation from now (1-based; 0: none) fails with `fault`; later ones succeed.
  void FailAt(uint64_t n, Fault fault) {
    std::lock_guard lock(mu_);
    fail_at_ = n == 0 ? 0 : operations_ + n;
    fault_ = fault;
  }
  // From the `n`-th operation from now on (1-based; 0: never), every operation fails: the
  // machine is gone. Crash() then plays what the disk holds.
  void DieAt(uint64_t n) {
    std::lock_guard lock(mu_);
    die_at_ = n == 0 ? 0 : operations_ + n;
  }
  // Each write reaches the file only up to `bytes` and then fails (0: whole writes).
  void ShortWrites(uint64_t bytes) { short_writes_ = bytes; }

  uint64_t operations() const {
    std::lock_guard lock(mu_);
    return operations_;
  }
  bool dead() const {
    std::lock_guard lock(mu_);
    return die_at_ != 0 && operations_ >= die_at_;
  }

  // The power cut. Call once nothing uses the env any more.
  void Crash(Tear tear) {
    std::lock_guard lock(mu_);
    // Contents first (by the paths they have now), then the directory entries put back.
    for (const auto& [path, durable] : durable_size_) {
      auto info = base_->Stat(path);
      if (!info.ok() || info->size <= durable) continue;
      uint64_t keep = durable;
      if (tear == Tear::kSector) {
        // Some sectors of the unsynced part made it, the rest did not.
        const uint64_t first_boundary = (durable / kSector + 1) * kSector;
        keep = std::min(info->size, first_boundary + kSector * ((info->size / kSector) % 3));
      }
      auto file = base_->Open(path, OpenMode::kReadWrite);
      if (file.ok()) (void)(*file)->Truncate(keep);
    }
    for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) Undo(*it);
    pending_.clear();
    durable_size_.clear();
  }

  Result<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) override {
    const bool existed = base_->Stat(path).ok();
    std::string before;
    if (mode == OpenMode::kCreateTruncate && existed) before = Slurp(path);
    PREFIXD_RETURN_IF_ERROR(Step("open " + path));
    auto file = base_->Open(path, mode);
    if (!file.ok()) return file.status();
    std::lock_guard lock(mu_);
    if (mode == OpenMode::kCreateTruncate) {
      if (!existed) pending_.push_back(Op{Op::kCreate, path, "", ""});
      if (existed) pending_.push_back(Op{Op::kContent, path, "", before});
      durable_size_[path] = 0;
    } else if (!durable_size_.contains(path)) {
      auto size = (*file)->Size();
      durable_size_[path] = size.ok() ? *size : 0;
    }
    return std::unique_ptr<File>(std::make_unique<FaultFile>(this, path, std::move(file).value()));
  }
  Status Rename(const std::string& from, const std::string& to) override {
    std::string replaced = base_->Stat(to).ok() ? Slurp(to) : std::string();
    const bool had_target = base_->Stat(to).ok();
    PREFIXD_RETURN_IF_ERROR(Step("rename " + from));
    PREFIXD_RETURN_IF_ERROR(base_->Rename(from, to));
    std::lock_guard lock(mu_);
    pending_.push_back(Op{had_target ? Op::kRenameOver : Op::kRename, to, from, replaced});
    if (durable_size_.contains(from)) {
      durable_size_[to] = durable_size_[from];
      durable_size_.erase(from);
    }
    return Status::Ok();
  }
  Status Remove(const std::string& path) override {
    std::string content = base_->Stat(path).ok() ? Slurp(path) : std::string();
    PREFIXD_RETURN_IF_ERROR(Step("remove " + path));
    PREFIXD_RETURN_IF_ERROR(base_->Remove(path));
    std::lock_guard lock(mu_);
    pending_.push_back(Op{Op::kRemove, path, "", content});
    durable_size_.erase(path);
    return Status::Ok();
  }
  Status SyncDir(const std::string& dir) override {
    PREFIXD_RETURN_IF_ERROR(Step("fsync " + dir));
    std::lock_guard lock(mu_);
    pending_.clear();  // one directory per test
    return Status::Ok();
  }
  Status CreateDirs(const std::string& dir) override {
    PREFIXD_RETURN_IF_ERROR(Step("mkdir " + dir));
    return base_->CreateDirs(dir);
  }
  Result<std::vector<std::string>> List(const std::string& dir) override {
    PREFIXD_RETURN_IF_ERROR(Step("list " + dir));
    return base_->List(dir);
  }
  Result<FileInfo> Stat(const std::string& path) override {
    PREFIXD_RETURN_IF_ERROR(Step("stat " + path));
    return base_->Stat(path);
  }
  Result<std::unique_ptr<DirLock>> Lock(const std::string& path) override {
    PREFIXD_RETURN_IF_ERROR(Step("lock " + path));
    return base_->Lock(path);
  }

 private:
  static constexpr uint64_t kSector = 512;

  struct Op {
    enum Kind { kCreate, kContent, kRename, kRenameOver, kRemove } kind;
    std::string path;
    std::string from;     // renames
    std::string content;  // what `path` held before (kContent, kRenameOver, kRemove)
  };

  class FaultFile : public File {
   public:
    FaultFile(FaultEnv* env, std::string path, std::unique_ptr<File> base)
        : env_(env), path_(std::move(path)), base_(std::move(base)) {}
    Status WriteAt(uint64_t offset, std::span<const iovec> iov, uint64_t* written) override {
      *written = 0;
      PREFIXD_RETURN_IF_ERROR(env_->Step("write " + path_));
      const uint64_t cap = env_->short_writes_.load();
      if (cap == 0) return base_->WriteAt(offset, iov, written);
      // A short write: a prefix lands, then the disk is full.
      std::vector<iovec> prefix;
      uint64_t left = cap;
      for (const iovec& v : iov) {
        if (left == 0) break;
        prefix.push_back(iovec{v.iov_base, std::min<uint64_t>(v.iov_len, left)});
        left -= prefix.back().iov_len;
      }
      PREFIXD_RETURN_IF_ERROR(base_->WriteAt(offset, prefix, written));
      uint64_t total = 0;
      for (const iovec& v : iov) total += v.iov_len;
      if (*written == total) return Status::Ok();
      return Status::ResourceExhausted("write " + path_ + ": No space left on device (short)");
    }
    Status ReadAt(uint64_t offset, void* out, uint64_t length) override {
      PREFIXD_RETURN_IF_ERROR(env_->Step("read " + path_));
      return base_->ReadAt(offset, out, length);
    }
    Status Sync() override {
      PREFIXD_RETURN_IF_ERROR(env_->Step("fdatasync " + path_));
      auto size = base_->Size();
      if (!size.ok()) return size.status();
      std::lock_guard lock(env_->mu_);
      env_->durable_size_[path_] = *size;
      return Status::Ok();
    }
    Status Truncate(uint64_t size) override {
      PREFIXD_RETURN_IF_ERROR(env_->Step("ftruncate " + path_));
      PREFIXD_RETURN_IF_ERROR(base_->Truncate(size));
      std::lock_guard lock(env_->mu_);
      auto it = env_->durable_size_.find(path_);
      if (it != env_->durable_size_.end()) it->second = std::min(it->second, size);
      return Status::Ok();
    }
    Result<uint64_t> Size() override { return base_->Size(); }

   private:
    FaultEnv* env_;
    std::string path_;
    std::unique_ptr<File> base_;
  };

  // Counts one operation and says whether it fails.
  Status Step(const std::string& what) {
    std::lock_guard lock(mu_);
    ++operations_;
    if (die_at_ != 0 && operations_ >= die_at_)
      return Status::IoError(what + ": the machine is gone");
    if (operations_ == fail_at_) {
      if (fault_ == Fault::kNoSpace) {
        return Status::ResourceExhausted(what + ": No space left on device (injected)");
      }
      return Status::IoError(what + ": Input/output error (injected)");
    }
    return Status::Ok();
  }

  std::string Slurp(const std::string& path) {
    auto file = base_->Open(path, OpenMode::kRead);
    if (!file.ok()) return {};
    auto size = (*file)->Size();
    std::string out(size.ok() ? *size : 0, '\0');
    if (!out.empty() && !(*file)->ReadAt(0, out.data(), out.size()).ok()) out.clear();
    return out;
  }
  void Put(const std::string& path, const std::string& content) {
    auto file = base_->Open(path, OpenMode::kCreateTruncate);
    if (file.ok()) (void)WriteAllAt(**file, 0, content.data(), content.size());
  }
  // Puts one directory entry back as it was before `op`. Caller holds mu_.
  void Undo(const Op& op) {
    switch (op.kind) {
      case Op::kCreate:
        (void)base_->Remove(op.path);
        break;
      case Op::kContent:
      case Op::kRemove:
        Put(op.path, op.content);
        break;
      case Op::kRename:
        (void)base_->Rename(op.path, op.from);
        break;
      case Op::kRenameOver:
        (void)base_->Rename(op.path, op.from);
        Put(op.path, op.content);
        break;
    }
  }

  Env* base_;
  mutable std::mutex mu_;
  uint64_t operations_ = 0;
  uint64_t fail_at_ = 0;
  uint64_t die_at_ = 0;
  Fault fault_ = Fault::kIoError;
  std::atomic<uint64_t> short_writes_{0};
  std::map<std::string, uint64_t> durable_size_;  // bytes of each file that survive a crash
  std::vector<Op> pending_;  // directory changes since the last directory fsync
};

}  // namespace prefixd::persist::testing
