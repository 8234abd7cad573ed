#include "persist/logless_snapshots.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "common/clock.h"
#include "persist/recovery.h"
#include "persist/snapshot_writer.h"

namespace prefixd::persist {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

LoglessSnapshots::LoglessSnapshots(DurabilityOptions options, StoreSet stores)
    : options_(std::move(options)),
      env_(options_.env != nullptr ? options_.env : Env::Posix()),
      stores_(std::move(stores)) {}

LoglessSnapshots::~LoglessSnapshots() { saves_.JoinBackground(); }

Status LoglessSnapshots::Open() {
  if (Status made = env_->CreateDirs(options_.dir); !made.ok()) return made;
  // As Redis: the last save is the start until a snapshot is written here.
  saves_.Started();
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
  auto lock = LockDataDir(env_, options_.dir);
  if (!lock.ok()) return lock.status();
  Recovery recovery(options_, env_, stores_);
  PREFIXD_RETURN_IF_ERROR(recovery.Run());
  base_lsn_ = recovery.next_lsn();
  old_segments_ = std::move(recovery.segments());
  saves_.Loaded(recovery);
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
  auto lock = LockDataDir(env_, options_.dir);
  if (!lock.ok()) return lock.status();
  SnapshotWriter writer(env_, options_.dir, stores_);
  uint64_t changes_in_it = 0;
  Status written;
  {
    std::shared_ptr<void> writes_held = hold();
    changes_in_it = saves_.changes();
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
  saves_.Saved(writer.bytes(), changes_in_it);
  spdlog::info("Snapshot saved (appendonly off): {} records, {:.1f} MB, {:.3f} s", writer.count(),
               writer.bytes() / 1e6, SecondsSince(start));
  return {};
}

Status LoglessSnapshots::Save(const HoldWrites& hold) {
  std::unique_lock lock(save_mu_, std::try_to_lock);
  if (saves_.background_running() || !lock.owns_lock()) return Status::Aborted(kSaveInProgress);
  Status saved = WriteSnapshot(hold);
  saves_.Finished(saved);
  return saved;
}

Status LoglessSnapshots::BackgroundSave(HoldWrites hold) {
  return saves_.StartBackground([this, hold = std::move(hold)] {
    // A SAVE that began before this one is let finish (it holds no gate this thread waits on).
    std::lock_guard lock(save_mu_);
    Status saved = WriteSnapshot(hold);
    saves_.Finished(saved);
    return saved;
  });
}

PersistStats LoglessSnapshots::Stats() const {
  PersistStats s;
  saves_.Report(s);
  return s;
}

}  // namespace prefixd::persist
