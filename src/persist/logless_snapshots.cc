#include "persist/logless_snapshots.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "common/clock.h"
#include "persist/recovery.h"
#include "persist/snapshot_writer.h"

namespace prefixd::persist {
namespace {

constexpr const char* kInProgress = "Background save already in progress";

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Result<std::unique_ptr<DirLock>> LockDir(Env* env, const std::string& dir) {
  auto lock = env->Lock(dir + "/LOCK");
  if (lock.ok()) return lock;
  if (lock.status().code() == StatusCode::kUnavailable) {
    return Status::Unavailable("data directory " + dir + " is in use by another prefixd process");
  }
  return Status(lock.status().code(), "can't lock " + dir + ": " + lock.status().message());
}

}  // namespace

LoglessSnapshots::LoglessSnapshots(DurabilityOptions options, StoreSet stores)
    : options_(std::move(options)),
      env_(options_.env != nullptr ? options_.env : Env::Posix()),
      stores_(std::move(stores)) {}

LoglessSnapshots::~LoglessSnapshots() {
  if (bgsave_thread_.joinable()) bgsave_thread_.join();
}

Status LoglessSnapshots::Open() {
  if (Status made = env_->CreateDirs(options_.dir); !made.ok()) return made;
  // As Redis: the last save is the start until a snapshot is written here.
  last_save_time_ = NowMs() / 1000;
  auto names = env_->List(options_.dir);
  if (!names.ok()) {
    return Status::IoError("can't list " + options_.dir + ": " + names.status().message());
  }
  // A directory holding nothing of prefixd's is not locked: servers without the log that only
  // ever share an empty one (every test's ./data) start side by side, as Redis's do.
  if (std::none_of(names->begin(), names->end(), [](const std::string& name) {
        return name.ends_with(".pds") || (name.starts_with("log-") && name.ends_with(".seg"));
      })) {
    return {};
  }
  auto lock = LockDir(env_, options_.dir);
  if (!lock.ok()) return lock.status();
  Recovery recovery(options_, env_, stores_);
  PREFIXD_RETURN_IF_ERROR(recovery.Run());
  base_lsn_ = recovery.next_lsn();
  old_segments_ = std::move(recovery.segments());
  snapshot_bytes_ = recovery.snapshot_bytes();
  recovered_records_ = recovery.records();
  recovered_bytes_ = recovery.bytes();
  recovery_seconds_ = recovery.seconds();
  if (!old_segments_.empty()) {
    spdlog::warn(
        "appendonly is off: the log an earlier run left in '{}' was loaded; it is removed once a "
        "snapshot (SAVE, BGSAVE) holds what it held",
        options_.dir);
  }
  return {};
}

Status LoglessSnapshots::WriteSnapshot(const HoldWrites& hold) {
  auto start = std::chrono::steady_clock::now();
  // A server with the log may have started on the directory since: its files are its own.
  auto lock = LockDir(env_, options_.dir);
  if (!lock.ok()) return lock.status();
  SnapshotWriter writer(env_, options_.dir, stores_);
  uint64_t changes_in_it = 0;
  Status written;
  {
    std::shared_ptr<void> writes_held = hold();
    changes_in_it = changes_since_save_.load();
    written = writer.Write(base_lsn_, [] { return Status(); });
  }
  if (!written.ok()) return written;
  // The snapshot holds everything the old log did, and its base lsn is past all of it.
  for (const SegmentInfo& segment : old_segments_) {
    if (Status removed = env_->Remove(segment.path);
        !removed.ok() && removed.code() != StatusCode::kNotFound) {
      spdlog::warn("Can't remove the old log segment {}: {}", segment.path, removed.message());
    }
  }
  old_segments_.clear();
  snapshot_bytes_ = writer.bytes();
  changes_since_save_ -= std::min(changes_in_it, changes_since_save_.load());
  last_save_time_ = CoarseNowMs() / 1000;
  saves_ += 1;
  spdlog::info("Snapshot saved (appendonly off): {} records, {:.1f} MB, {:.3f} s", writer.count(),
               writer.bytes() / 1e6, SecondsSince(start));
  return {};
}

Status LoglessSnapshots::Save(const HoldWrites& hold) {
  std::unique_lock lock(save_mu_, std::try_to_lock);
  if (bgsave_running_.load() || !lock.owns_lock()) return Status::Aborted(kInProgress);
  Status saved = WriteSnapshot(hold);
  std::lock_guard error_lock(error_mu_);
  last_save_error_ = saved.message();
  return saved;
}

Status LoglessSnapshots::BackgroundSave(HoldWrites hold) {
  if (bgsave_running_.exchange(true)) return Status::Aborted(kInProgress);
  if (bgsave_thread_.joinable()) bgsave_thread_.join();
  bgsave_thread_ = std::thread([this, hold = std::move(hold)] {
    auto start = std::chrono::steady_clock::now();
    Status saved;
    {
      // A SAVE that began before this one is let finish (it holds no gate this thread waits on).
      std::lock_guard lock(save_mu_);
      saved = WriteSnapshot(hold);
      std::lock_guard error_lock(error_mu_);
      last_save_error_ = saved.message();
    }
    last_bgsave_ok_ = saved.ok();
    last_bgsave_seconds_ = static_cast<int64_t>(SecondsSince(start));
    if (!saved.ok()) spdlog::error("Background save failed: {}", saved.message());
    bgsave_running_ = false;
  });
  return {};
}

PersistStats LoglessSnapshots::Stats() const {
  PersistStats s;
  s.bgsave_in_progress = bgsave_running_.load();
  s.last_save_time = last_save_time_.load();
  s.last_bgsave_ok = last_bgsave_ok_.load();
  s.last_bgsave_seconds = last_bgsave_seconds_.load();
  s.changes_since_last_save = changes_since_save_.load();
  s.snapshot_bytes = snapshot_bytes_.load();
  s.rewrites = saves_.load();
  s.recovered_records = recovered_records_;
  s.recovered_bytes = recovered_bytes_;
  s.recovery_seconds = recovery_seconds_;
  std::lock_guard lock(error_mu_);
  s.last_save_error = last_save_error_;
  return s;
}

}  // namespace prefixd::persist
