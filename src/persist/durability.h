// Durability: the data directory of one server: it opens it (Recovery loads the snapshot and the
// log into the stores), keeps the mutation log while serving (EXEC's group commit included), and
// decides when a snapshot is taken (SAVE, BGSAVE's thread, the automatic rewrite) and the log
// cut it allows (SnapshotWriter writes it). Thread-safe; handlers log through it from any io
// thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "persist/durability_options.h"
#include "persist/env.h"
#include "persist/log_writer.h"
#include "persist/mutation.h"
#include "persist/record_reader.h"
#include "persist/save_history.h"
#include "persist/store_set.h"
#include "prefixd/status.h"
#include "store/database.h"
#include "store/state_store.h"
#include "store/vector_store.h"

namespace prefixd::persist {

class Durability {
 public:
  // `stores`: everything recovered, logged and snapshotted (persist/store_set.h).
  Durability(DurabilityOptions options, StoreSet stores);
  ~Durability();
  Durability(const Durability&) = delete;
  Durability& operator=(const Durability&) = delete;

  // Loads the snapshot and replays the log into the store, then opens the log for appends.
  // An error names the file and offset of any damage it could not pass.
  Status Open();

  // Appends a record encoded (outside any lock) with EncodeRecord; call it inside the store's
  // under_lock hook so log order matches the order of changes. Returns its lsn.
  // `db`: the database it changes (its header says so). `placed`: see LogWriter::Append (the
  // disk tier learns where a value's bytes sit). `changes`: what the record adds to
  // `rdb_changes_since_last_save` (Redis counts each key of an MSET).
  uint64_t Append(EncodedRecord&& record, uint16_t db = 0, Placed&& placed = {},
                  uint64_t changes = 1);
  uint64_t Append(RecordType type, std::vector<Bytes> payload, uint16_t db = 0,
                  Placed placed = {}) {
    return Append(StagePieces(type, std::move(payload)), db, std::move(placed));
  }

  // An EXEC's records as one unit in the log (LogWriter::AppendGroup). From construction to End()
  // (or destruction) this thread's Append calls only collect their records (returning lsn 0);
  // End() queues them as one group (a single record needs none) and returns the last lsn, the one
  // EXEC's reply waits for. The caller must keep every other writer off meanwhile (EXEC holds
  // the whole exec gate), so that log order stays the order of changes. One per thread at a time.
  class Group {
   public:
    explicit Group(Durability* durability);
    ~Group() { End(); }
    Group(const Group&) = delete;
    Group& operator=(const Group&) = delete;
    uint64_t End();

   private:
    friend class Durability;
    Durability* durability_;  // null: nothing to group (no persistence), or ended
    std::vector<LogWriter::GroupMember> members_;
    uint64_t ticket_ = 0;       // in groups_.open until queued
    bool sync_at_end_ = false;  // Sync() was asked for meanwhile
  };

  // See LogWriter::WhenDurable.
  bool WhenDurable(uint64_t lsn, std::function<void()> done) {
    return log_->WhenDurable(lsn, std::move(done));
  }
  // See LogWriter::DurableNow.
  bool DurableNow(uint64_t lsn) { return log_->DurableNow(lsn); }
  bool IsDurable(uint64_t lsn) const { return log_->IsDurable(lsn); }
  // False while the log cannot be written: writes must be refused.
  bool healthy() const { return log_ == nullptr || log_->healthy(); }
  std::string last_error() const;

  // Blocks until every record appended so far is written and fsynced, whatever the policy
  // (inside a Group: also the group's records, once End() queues them).
  void Sync();

  // A snapshot in the calling thread.
  Status Save();
  // Starts a snapshot on a background thread; an error when one is already running.
  Status BackgroundSave();
  void set_policy(FsyncPolicy p);

  PersistStats Stats() const;

 private:
  // Takes a snapshot (SnapshotWriter) and cuts the log before it.
  Status WriteSnapshot();
  void MaintenanceLoop();

  DurabilityOptions options_;
  Env* env_;
  StoreSet stores_;
  std::unique_ptr<LogWriter> log_;
  std::unique_ptr<DirLock> lock_;

  std::mutex save_mu_;  // one snapshot at a time
  // The group this thread collects records in, if any; it applies to its own Durability only.
  static thread_local Group* collecting_;
  // This thread's open group of this Durability, or null.
  Group* CollectingHere() const {
    return collecting_ != nullptr && collecting_->durability_ == this ? collecting_ : nullptr;
  }
  // The groups being collected, by ticket (in start order). A snapshot may have read part of an
  // open group's changes: before it is renamed into place it waits for every group open while it
  // read the stores to be queued, then syncs the log, so a crash never keeps half an EXEC.
  struct GroupTickets {
    uint64_t next = 1;
    std::vector<uint64_t> open;
  };
  GroupTickets GroupsNow();
  // Waits (bounded) until no group other than this thread's with a ticket below `before` is
  // open; true when none was open in [started.open, before).
  bool WaitForGroups(const GroupTickets& started, uint64_t before);
  std::mutex groups_mu_;
  std::condition_variable groups_cv_;
  GroupTickets groups_;
  std::atomic<uint64_t> log_base_bytes_{0};
  SaveHistory saves_;

  std::mutex maintenance_mu_;
  std::condition_variable maintenance_cv_;
  bool stopping_ = false;
  std::thread maintenance_thread_;
};

FsyncPolicy ParsePolicy(std::string_view name);

}  // namespace prefixd::persist
