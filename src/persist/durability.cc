#include "persist/durability.h"

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

FsyncPolicy ParsePolicy(std::string_view name) {
  if (name == "always") return FsyncPolicy::kAlways;
  if (name == "no") return FsyncPolicy::kNo;
  return FsyncPolicy::kEverySec;
}

Durability::Durability(DurabilityOptions options, StoreSet stores)
    : options_(std::move(options)),
      env_(options_.env != nullptr ? options_.env : Env::Posix()),
      stores_(std::move(stores)) {}

Durability::~Durability() {
  {
    std::lock_guard lock(maintenance_mu_);
    stopping_ = true;
  }
  maintenance_cv_.notify_all();
  if (maintenance_thread_.joinable()) maintenance_thread_.join();
  saves_.JoinBackground();
  log_.reset();  // writes and syncs what is queued
}

Status Durability::Open() {
  if (Status made = env_->CreateDirs(options_.dir); !made.ok()) return made;
  auto lock = LockDataDir(env_, options_.dir);
  if (!lock.ok()) return lock.status();
  lock_ = std::move(lock).value();
  // As Redis: the last save is the start until a snapshot is written here, whatever was loaded.
  saves_.Started();
  Recovery recovery(options_, env_, stores_);
  PREFIXD_RETURN_IF_ERROR(recovery.Run());
  saves_.Loaded(recovery);
  log_ = std::make_unique<LogWriter>(options_.dir, options_.policy, options_.segment_bytes,
                                     recovery.next_lsn(), recovery.next_sequence(),
                                     std::move(recovery.segments()), env_);
  log_->set_retry_interval(options_.log_retry_interval);
  PREFIXD_RETURN_IF_ERROR(log_->Start());
  log_base_bytes_ = log_->Stats().bytes;
  maintenance_thread_ = std::thread([this] { MaintenanceLoop(); });
  return {};
}

thread_local Durability::Group* Durability::collecting_ = nullptr;

uint64_t Durability::Append(EncodedRecord&& record, uint16_t db, Placed&& placed,
                            uint64_t changes) {
  saves_.CountChanges(changes);
  if (Group* group = CollectingHere(); group != nullptr) {
    group->members_.push_back(LogWriter::GroupMember{std::move(record), db, std::move(placed)});
    return 0;
  }
  return log_->Append(std::move(record), db, std::move(placed));
}

Durability::Group::Group(Durability* durability) : durability_(durability) {
  if (durability_ == nullptr || durability_->log_ == nullptr || collecting_ != nullptr) {
    durability_ = nullptr;
    return;
  }
  collecting_ = this;
  std::lock_guard lock(durability_->groups_mu_);
  ticket_ = durability_->groups_.next++;
  durability_->groups_.open.push_back(ticket_);
}

uint64_t Durability::Group::End() {
  if (durability_ == nullptr) return 0;
  collecting_ = nullptr;
  Durability& d = *std::exchange(durability_, nullptr);
  uint64_t lsn = 0;
  if (members_.size() == 1) {  // one record is whole by itself
    LogWriter::GroupMember& only = members_.front();
    lsn = d.log_->Append(std::move(only.record), only.db, std::move(only.placed));
  } else if (!members_.empty()) {
    lsn = d.log_->AppendGroup(std::move(members_));
  }
  if (sync_at_end_) d.log_->Sync();
  {
    std::lock_guard lock(d.groups_mu_);
    std::erase(d.groups_.open, ticket_);
  }
  d.groups_cv_.notify_all();
  return lsn;
}

Durability::GroupTickets Durability::GroupsNow() {
  std::lock_guard lock(groups_mu_);
  return groups_;
}

bool Durability::WaitForGroups(const GroupTickets& started, uint64_t before) {
  const uint64_t own = CollectingHere() != nullptr ? CollectingHere()->ticket_ : 0;
  const auto others_open = [&] {
    return std::any_of(groups_.open.begin(), groups_.open.end(),
                       [&](uint64_t t) { return t < before && t != own; });
  };
  std::unique_lock lock(groups_mu_);
  // An EXEC runs its queue in milliseconds; one that takes longer (huge values) leaves this
  // snapshot the gap docs/architecture.md names rather than holding it up without end.
  if (!groups_cv_.wait_for(lock, std::chrono::seconds(5), [&] { return !others_open(); })) {
    spdlog::warn("A snapshot did not wait longer for a transaction still running");
  }
  return started.open.empty() && started.next == before;
}

Status Durability::WriteSnapshot() {
  auto start = std::chrono::steady_clock::now();
  // Records from here on go to new segments; the snapshot holds at least everything before.
  const uint64_t base_lsn = log_->RotateForSnapshot();
  const GroupTickets groups_at_start = GroupsNow();
  const uint64_t changes_at_start = saves_.changes();
  SnapshotWriter writer(env_, options_.dir, stores_);
  PREFIXD_RETURN_IF_ERROR(writer.Write(base_lsn, [&]() -> Status {
    // An EXEC that ran while the stores were read may be in the snapshot in part: its group is
    // in the log, synced, before the snapshot takes effect.
    if (!WaitForGroups(groups_at_start, GroupsNow().next)) {
      log_->Sync();
      if (!log_->healthy()) return Status::IoError("the log cannot be written: " + last_error());
    }
    return {};
  }));
  // The log is cut only now that the snapshot is durable.
  log_->Sync();
  log_->RemoveSegmentsBefore(base_lsn);
  log_base_bytes_ = log_->Stats().bytes;
  saves_.Saved(writer.bytes(), changes_at_start);
  spdlog::info("Snapshot saved: {} sessions, {:.1f} MB, {:.3f} s; log cut before lsn {}",
               writer.count(), writer.bytes() / 1e6, SecondsSince(start), base_lsn);
  return {};
}

void Durability::Sync() {
  if (!log_) return;
  log_->Sync();
  // Inside EXEC (KV.PREFIX.COMMIT queued after writes): the group's records are not queued yet;
  // they are synced as soon as they are, before EXEC replies.
  if (Group* group = CollectingHere(); group != nullptr) group->sync_at_end_ = true;
}

Status Durability::Save() {
  // Inside EXEC (its group open) a save never waits for another one, which may be waiting for
  // this EXEC's group.
  std::unique_lock lock(save_mu_, std::defer_lock);
  if (CollectingHere() == nullptr) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return Status::Aborted(kSaveInProgress);
  }
  Status saved = WriteSnapshot();
  saves_.Finished(saved);
  return saved;
}

Status Durability::BackgroundSave() {
  return saves_.StartBackground([this] { return Save(); });
}

void Durability::MaintenanceLoop() {
  std::unique_lock lock(maintenance_mu_);
  while (!stopping_) {
    maintenance_cv_.wait_for(lock, std::chrono::seconds(1));
    if (stopping_ || options_.auto_rewrite_percentage <= 0 || saves_.background_running()) {
      continue;
    }
    uint64_t log_bytes = log_->Stats().bytes;
    const uint64_t live = stores_.LiveBytes();
    // Measured against the live data, not the log size at start: a log that restarts keep
    // growing must still be rewritten once most of it is overwritten history.
    uint64_t base = live;
    uint64_t threshold =
        base + base * static_cast<uint64_t>(options_.auto_rewrite_percentage) / 100;
    if (log_bytes > options_.auto_rewrite_min_size && log_bytes > threshold) {
      spdlog::info("Log is {:.1f} MB for {:.1f} MB of live data: rewriting", log_bytes / 1e6,
                   live / 1e6);
      (void)BackgroundSave();  // one already running is as good
    }
  }
}

void Durability::set_policy(FsyncPolicy p) {
  if (log_) log_->set_policy(p);
}

std::string Durability::last_error() const {
  return log_ ? log_->Stats().last_error : std::string();
}

PersistStats Durability::Stats() const {
  PersistStats s;
  saves_.Report(s);
  s.log_base_bytes = log_base_bytes_.load();
  if (log_) s.log = log_->Stats();
  return s;
}

}  // namespace prefixd::persist
