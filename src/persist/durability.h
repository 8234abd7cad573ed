// Durability: the data directory of one server: recovery (snapshot, then log) into the store at
// start, the mutation log while serving, snapshots (SAVE, BGSAVE, automatic rewrite) and the
// log compaction they allow. Thread-safe; handlers log through it from any io thread.
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
#include "persist/env.h"
#include "persist/log_writer.h"
#include "persist/mutation.h"
#include "persist/record_reader.h"
#include "store/database.h"
#include "store/state_store.h"
#include "store/vector_store.h"

namespace prefixd::persist {

struct DurabilityOptions {
  std::string dir = "./data";
  FsyncPolicy policy = FsyncPolicy::kEverySec;
  uint64_t segment_bytes = uint64_t{256} << 20;
  // Start even when a record before the log's tail is corrupt, skipping it (and reporting it).
  bool skip_corrupt = false;
  // Rewrite (snapshot + cut the log) once the log exceeds both the minimum and the live data
  // grown by this percentage (0 disables).
  int64_t auto_rewrite_percentage = 100;
  uint64_t auto_rewrite_min_size = uint64_t{64} << 20;
  // Every file operation goes through it (null: the real file system).
  Env* env = nullptr;
  // Bytes one replayed change may make the stores take (0: the machine's memory, MemoryBudget).
  uint64_t memory_budget = 0;
  // How long a failed log write waits before it is retried.
  std::chrono::milliseconds log_retry_interval{1000};
  // Called during recovery after each applied record whose values now have a place in its file
  // (large strings, an SSM put, V-store rows), with the record's database: the caller may send
  // them to the disk tier at once, so a restart never holds much more than the memory budget.
  std::function<void(const Mutation& m, uint16_t db)> placed_while_recovering;
};

struct PersistStats {
  bool loading = false;
  bool bgsave_in_progress = false;
  int64_t last_save_time = 0;  // unix seconds
  bool last_bgsave_ok = true;
  std::string last_save_error;
  int64_t last_bgsave_seconds = -1;
  uint64_t changes_since_last_save = 0;
  uint64_t snapshot_bytes = 0;  // of the newest snapshot
  uint64_t log_base_bytes = 0;  // log size right after the last rewrite
  uint64_t rewrites = 0;
  LogStats log;
  // Recovery at start.
  uint64_t recovered_records = 0;
  uint64_t recovered_bytes = 0;
  double recovery_seconds = 0;
};

class Durability {
 public:
  // `vectors`, when given, is recovered, logged and snapshotted along with `store`.
  Durability(DurabilityOptions options, store::StateStore& store,
             store::VectorStore* vectors = nullptr);
  ~Durability();
  Durability(const Durability&) = delete;
  Durability& operator=(const Durability&) = delete;

  // The keyspace recovered along with the stores (types, expiries); set before Open().
  void set_keyspace(store::Keyspace* keys) { keys_ = keys; }
  // The numbered databases, when there are several: each record names its database in its
  // header, replay applies it there, and a snapshot writes every database in use. Database 0
  // must hold the stores and keyspace given above. Set before Open().
  void set_databases(store::Databases* databases) { databases_ = databases; }
  // The prefix index, recovered, logged and snapshotted along with the stores; before Open().
  void set_prefix_store(store::PrefixStore* prefixes) { prefixes_ = prefixes; }

  // Loads the snapshot and replays the log into the store, then opens the log for appends.
  // Returns an error text that names the file and offset of any damage it could not pass.
  std::string Open();

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

  // A snapshot in the calling thread; returns an error text or empty.
  std::string Save();
  // Starts a snapshot on a background thread; returns an error text (one already running).
  std::string BackgroundSave();
  void set_policy(FsyncPolicy p);

  PersistStats Stats() const;

 private:
  std::string Recover();
  std::string LoadSnapshot(const std::string& path, uint64_t& base_lsn);
  std::string ReplaySegments(uint64_t base_lsn, uint64_t& next_lsn, uint64_t& next_sequence,
                             std::vector<SegmentInfo>& segments);
  // Decodes, checks and applies one record; an error text says why it could not be.
  // `file`: the file being read, where an SSM put's values stay reachable (the disk tier).
  std::string Replay(const Record& record, Mutation& m,
                     const std::shared_ptr<store::ColdFile>& file);
  // A snapshot's cold SSM put: records where its values sit in the database its header names,
  // reading only its fields.
  std::string LoadColdPut(RecordReader& reader, const Record& record,
                          const std::shared_ptr<store::ColdFile>& file);
  // A snapshot's cold directory: places every cold layer it lists in the database its header
  // names and moves `reader` past the records it lists (`entries` of them); with no `file`,
  // checks it and leaves those records to be read whole.
  std::string LoadColdDirectory(RecordReader& reader, const Record& record,
                                const std::shared_ptr<store::ColdFile>& file, uint64_t& entries);
  // A snapshot's cold V-store rows: records where they sit without reading them.
  std::string LoadColdRows(RecordReader& reader, const Record& record,
                           const std::shared_ptr<store::ColdFile>& file);
  // A snapshot's V-store cold directory: creates every listed session and places its rows in
  // the database its header names, and moves `reader` past their records (`records` of them);
  // with no `file`, checks it and leaves those records to be read whole.
  std::string LoadVectorColdDirectory(RecordReader& reader, const Record& record,
                                      const std::shared_ptr<store::ColdFile>& file,
                                      uint64_t& records);
  // The keys of the V-store sessions LoadColdRows placed (and of registrations whose halves
  // both are) go to the cold index.
  void KeepColdVectorKeys();
  std::vector<std::pair<uint16_t, std::string>> cold_vector_sessions_;
  // `sid` of database `db` is a key of `type` in the disk tier.
  void KeepColdKey(uint16_t db, const std::string& sid, store::KeyType type);
  // One V-store session as a snapshot writes it (a create, then rows records per stored run).
  using VectorSessionWriter =
      std::function<void(const std::string& sid, const store::VectorSessionInfo& info,
                         const std::vector<store::LayerRead>& layers)>;
  void WriteVectorSnapshot(const store::VectorStore& vectors,
                           const VectorSessionWriter& write_session,
                           const std::function<void()>& sessions_written,
                           const std::function<void(const Mutation&)>& write);
  void WritePrefixSnapshot(const store::PrefixStore& prefixes,
                           const std::function<void(const Mutation&)>& write);
  // A snapshot's cold string (its record flagged cold): makes the key a cold string whose value
  // stays where it sits in the snapshot, reading only the record's fields.
  std::string LoadColdString(RecordReader& reader, const Record& record,
                             const std::shared_ptr<store::ColdFile>& file);
  // One string key as a snapshot writes it (a cold value is copied, its record flagged cold).
  using StringWriter = std::function<void(const std::string& key, const store::KeyInfo& info)>;
  // One SSM session as a snapshot writes it: its layers in memory or where they sit on disk.
  using SessionWriter =
      std::function<void(const std::string& sid, const std::vector<store::LayerPlace>& layers)>;
  // Every entry of one database as records: its SSM sessions to `write_session` (a snapshot
  // copies cold values and records their new places), then `sessions_written` (the cold ones
  // follow the hot ones), strings to `write_string`, everything else to `write`.
  void WriteDatabaseSnapshot(const store::StateStore& state, const store::VectorStore* vectors,
                             const store::Keyspace* keys, const store::PrefixStore* prefixes,
                             const SessionWriter& write_session,
                             const std::function<void()>& sessions_written,
                             const VectorSessionWriter& write_vector_session,
                             const std::function<void()>& vector_sessions_written,
                             const StringWriter& write_string,
                             const std::function<void(const Mutation&)>& write);
  // An error text when `db` is past the `databases` setting (or not 0 with a single database).
  std::string CheckDatabase(uint16_t db) const;
  // The stores of database `db`, which CheckDatabase accepted (created on first use).
  store::StateStore& StateOf(uint16_t db);
  store::Keyspace* KeysOf(uint16_t db);
  // Applies a checked record to the database its header names; an error text when it names one
  // past the `databases` setting.
  std::string ApplyToDatabase(const Mutation& m, uint16_t db, Outcome* outcome = nullptr);
  store::VectorStore* VectorsOf(uint16_t db);
  // The stored values' bytes over every database, memory and disk tier (automatic rewrite).
  uint64_t LiveBytes() const;
  // Truncates `path` to `size` and syncs it.
  Status CutFile(const std::string& path, uint64_t size);
  std::string WriteSnapshot();
  void MaintenanceLoop();

  DurabilityOptions options_;
  Env* env_;
  store::StateStore& store_;
  store::VectorStore* vectors_;
  store::Keyspace* keys_ = nullptr;
  store::Databases* databases_ = nullptr;
  store::PrefixStore* prefixes_ = nullptr;
  std::unique_ptr<LogWriter> log_;
  std::unique_ptr<DirLock> lock_;

  std::mutex save_mu_;  // one snapshot at a time
  std::atomic<bool> bgsave_running_{false};
  std::thread bgsave_thread_;
  std::atomic<int64_t> last_save_time_{0};
  std::atomic<bool> last_bgsave_ok_{true};
  std::atomic<int64_t> last_bgsave_seconds_{-1};
  std::atomic<uint64_t> changes_since_save_{0};
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
  std::atomic<uint64_t> snapshot_bytes_{0};
  std::atomic<uint64_t> log_base_bytes_{0};
  std::atomic<uint64_t> rewrites_{0};
  mutable std::mutex error_mu_;
  std::string last_save_error_;

  uint64_t recovered_records_ = 0;
  uint64_t recovered_bytes_ = 0;
  double recovery_seconds_ = 0;

  std::mutex maintenance_mu_;
  std::condition_variable maintenance_cv_;
  bool stopping_ = false;
  std::thread maintenance_thread_;
};

FsyncPolicy ParsePolicy(std::string_view name);

}  // namespace prefixd::persist
