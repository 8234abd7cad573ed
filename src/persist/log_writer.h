// LogWriter: the append-only log of mutations, in checksummed segments. Appends are queued by
// handlers (under the store's shard lock, so log order matches apply order) and written with
// gather writes, one writer at a time: under everysec/no by the caller about to wait for its
// records (WhenDurable, as Redis writes its AOF buffer before replying), otherwise, and for
// every retry after a failure, by the log thread; fsync follows the appendfsync policy, with one
// fsync shared by every record in a batch (group commit). Thread-safe: Append/WhenDurable from
// any thread.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/bytes.h"
#include "persist/env.h"
#include "persist/log_format.h"
#include "store/cold_file.h"

namespace prefixd::persist {

enum class FsyncPolicy { kAlways, kEverySec, kNo };

struct SegmentInfo {
  uint64_t sequence = 0;
  std::string path;
  uint64_t first_lsn = 0;  // base lsn from its header
  uint64_t last_lsn = 0;   // highest lsn in it (0 when it holds none)
  uint64_t bytes = 0;
};

struct LogStats {
  uint64_t bytes = 0;  // all live segments together
  uint64_t segments = 0;
  uint64_t records_appended = 0;  // since start
  uint64_t written_lsn = 0;
  uint64_t synced_lsn = 0;
  uint64_t pending_records = 0;
  uint64_t caller_writes = 0;  // batches written by the caller that waited for them (everysec/no)
  bool write_ok = true;
  std::string last_error;
  int64_t last_error_time = 0;
};

// A log segment or snapshot opened for the disk tier's reads (store::ColdFile over an Env
// file), or an IoError when it cannot be opened.
Result<std::shared_ptr<store::ColdFile>> OpenColdFile(Env* env, const std::string& path);

// Told, on the thread that wrote the record (the log thread, or a caller of WhenDurable), where
// its payload was written once it is in the file (its bytes are durable once
// `file->durable_end()` passes them). It must only take store locks.
using Placed =
    std::function<void(const std::shared_ptr<const store::ColdFile>& file, uint64_t payload_at)>;

class LogWriter {
 public:
  // Continues a log in `dir`: `existing` segments (oldest first) stay for compaction; new records
  // go to a fresh segment numbered `next_sequence`, starting at `next_lsn`.
  LogWriter(std::string dir, FsyncPolicy policy, uint64_t segment_bytes, uint64_t next_lsn,
            uint64_t next_sequence, std::vector<SegmentInfo> existing, Env* env = Env::Posix());
  // Writes and syncs everything queued, then stops the threads.
  ~LogWriter();
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;

  // Opens the first segment; an IoError when it cannot be created.
  Status Start();

  // Queues a record and returns its lsn. Cheap: no I/O on the caller's thread, no allocation
  // beyond the queue's. `db`: the database the record changes (its header's bytes 14-15).
  // Takes the record and `placed` by reference, moving each once, into the queue.
  uint64_t Append(EncodedRecord&& record, uint16_t db = 0, Placed&& placed = {});
  uint64_t Append(RecordType type, std::vector<Bytes> payload, uint16_t db = 0,
                  Placed placed = {}) {
    return Append(StagePieces(type, std::move(payload)), db, std::move(placed));
  }

  // One EXEC's records, queued as one unit: a kExecGroup record naming how many follow and their
  // size, then the records, on consecutive lsns that no other record comes between, in one
  // segment (a rotation, by size or for a snapshot, falls before the group, never inside it).
  // Returns the last record's lsn. Each keeps its own `placed`.
  struct GroupMember {
    EncodedRecord record;
    uint16_t db = 0;
    Placed placed;
  };
  uint64_t AppendGroup(std::vector<GroupMember> members);

  // Calls `done` once every record up to `lsn` is as durable as the policy promises (written
  // for everysec/no, synced for always). Returns true instead, without calling it, when that is
  // already so. Under everysec/no a caller that finds no other writer at work writes the queue
  // itself first (then it usually returns true); a failed write is left to the log thread.
  // `done` runs on whichever thread wrote the record: it must only hand work off.
  bool WhenDurable(uint64_t lsn, std::function<void()> done);
  // Whether every record up to `lsn` is as durable as the policy promises, after writing the
  // queue on this thread as WhenDurable does; nothing is arranged when it is not.
  bool DurableNow(uint64_t lsn);
  // Whether every record up to `lsn` is as durable as the policy promises; writes nothing.
  bool IsDurable(uint64_t lsn) const { return DurableLsn() >= lsn; }

  // Blocks until every record appended so far is written and synced (SAVE, shutdown), or the
  // log is failing (then it returns without waiting for the failed records).
  void Sync();

  // Starts a new segment at the next lsn and returns that lsn once it exists (or after 10 s if
  // the log cannot be written): every older segment then holds only records below it, and
  // RemoveSegmentsBefore(it) may delete them after a snapshot.
  uint64_t RotateForSnapshot();
  void RemoveSegmentsBefore(uint64_t lsn);

  bool healthy() const { return write_ok_.load(std::memory_order_relaxed); }
  void set_policy(FsyncPolicy p) { policy_.store(p); }
  // How long a failed write waits before it is retried (default one second). Before Start().
  void set_retry_interval(std::chrono::milliseconds interval) { retry_interval_ = interval; }
  FsyncPolicy policy() const { return policy_.load(); }
  LogStats Stats() const;

 private:
  struct Pending {
    uint64_t lsn = 0;      // 0: a bare rotation marker
    EncodedRecord record;  // the header is sealed into its head's room when it is written
    uint64_t payload_length = 0;
    uint16_t db = 0;
    bool rotate_before = false;
    uint64_t rotate_base = 0;  // a bare rotation marker: the base lsn of the new segment
    Placed placed;
    // A kExecGroup record: the bytes of the whole group, itself included (it starts a new segment
    // when they do not fit). A member of a group: 0, and never starts a segment by size.
    uint64_t group_bytes = 0;
    bool in_group = false;
  };

  void WriterLoop();
  // Under everysec/no the log thread leaves fresh records a moment to the callers that wait for
  // them; it waits until then. Caller holds `lock` (on mu_).
  void AwaitWork(std::unique_lock<std::mutex>& lock);
  // WhenDurable's caller writes the queue when no one else is writing, the log is healthy, and
  // the batch is small and stays in the current segment.
  void WriteOnCaller();
  // The last lsn as durable as the policy promises: written (everysec/no) or synced (always).
  uint64_t DurableLsn() const;
  // Writes carry_ in order and keeps what did not reach the file; true when all of it did.
  // Caller holds writer_mu_.
  bool WriteCarried();
  // Wakes the log thread at once, even from the pause AwaitWork leaves to callers.
  void WakeWriter();
  void SyncerLoop();
  // Writes `batch` in order; returns how many records reached the file. On an error the file is
  // cut back to the end of the last whole record.
  size_t WriteBatch(std::vector<Pending>& batch);
  // Writes the record's header, checksum included, into the room before its payload.
  void Seal(Pending& p) const;
  Status OpenSegment(uint64_t first_lsn);
  // Syncs and closes the current segment. Caller holds file_mu_.
  void CloseSegment();
  // fdatasync of the current segment if it holds unsynced records; false on failure.
  bool SyncCurrent();
  void MarkHealthy();
  void NotifyDurable();
  // Wakes what waits on progress_cv_ (Sync, RotateForSnapshot) after the writer moved on.
  void NotifyProgress();
  void RecordError(const std::string& what);
  // records_appended_ += n, as a plain store: only Append and AppendGroup write it, both under
  // mu_, so it needs no locked add. Caller holds mu_.
  void CountAppendedLocked(uint64_t n) {
    records_appended_.store(records_appended_.load(std::memory_order_relaxed) + n,
                            std::memory_order_relaxed);
  }

  Env* const env_;
  const std::string dir_;
  std::atomic<FsyncPolicy> policy_;
  const uint64_t segment_bytes_;
  std::chrono::milliseconds retry_interval_{1000};

  // How long the log thread leaves records to the callers that wait for them (everysec/no)
  // before it writes them itself: the bound for a record that no caller waits for.
  static constexpr std::chrono::milliseconds kCallerGrace{10};
  // A queue this long wakes the log thread whatever the policy (a bound on its memory).
  static constexpr size_t kWakeAtRecords = 4096;
  // Larger batches (big values) are written by the log thread, in parallel with the io threads
  // serving other clients, rather than by a caller's io thread while its clients wait.
  static constexpr uint64_t kCallerWriteMaxBytes = uint64_t{256} << 10;

  // Held by whoever writes: the log thread, or a caller in WriteOnCaller (which only tries it).
  // Taken before mu_ and file_mu_.
  std::mutex writer_mu_;
  // Records taken from the queue that failed to reach the file; retried (by the log thread only)
  // before anything newer, so order holds. Not acknowledged yet, and new writes are refused
  // meanwhile: nothing acknowledged is lost. Guarded by writer_mu_.
  std::vector<Pending> carry_;
  // WriteBatch's gather list and record ends, kept for their capacity. Guarded by writer_mu_.
  struct Whole {
    uint64_t end_offset;
    uint64_t lsn;
    size_t index;  // in the batch
  };
  std::vector<iovec> iov_;
  std::vector<Whole> wholes_;

  mutable std::mutex mu_;                // queue_, next_lsn_, stop_, the wake flags below
  std::condition_variable cv_;           // wakes the writer
  std::condition_variable syncer_cv_;    // wakes the syncer (only to stop)
  std::condition_variable progress_cv_;  // written_lsn_, rotations_done_ or write_ok_ moved
  std::vector<Pending> queue_;
  uint64_t next_lsn_;
  uint64_t rotations_requested_ = 0;
  bool stop_ = false;
  uint64_t queued_bytes_ = 0;   // payload bytes in queue_
  bool writer_asleep_ = false;  // the log thread waits for a first record (Append wakes it)
  bool wake_now_ = false;       // someone waits on the log thread: no pause for callers

  mutable std::mutex file_mu_;                 // fd_, segments_, current segment bookkeeping
  std::atomic<bool> sync_in_progress_{false};  // an fsync holds file_mu_ (callers stay off)
  std::unique_ptr<File> file_;                 // the current segment
  std::shared_ptr<store::ColdFile> reader_;    // the current segment, for the disk tier's reads
  uint64_t seed_ = 0;                          // checksum seed of the current segment
  uint64_t next_sequence_;
  std::vector<SegmentInfo> segments_;  // the last one is current once started
  uint64_t current_offset_ = 0;

  std::atomic<uint64_t> written_lsn_{0};
  std::atomic<uint64_t> synced_lsn_{0};
  std::atomic<uint64_t> records_appended_{0};  // written under mu_ only (CountAppendedLocked)
  std::atomic<uint64_t> rotations_done_{0};
  std::atomic<uint64_t> caller_writes_{0};
  std::atomic<bool> write_ok_{true};
  std::atomic<bool> idle_and_written_{true};  // the writer holds no failed records
  mutable std::mutex error_mu_;
  std::string last_error_;
  int64_t last_error_time_ = 0;

  std::mutex waiters_mu_;
  std::multimap<uint64_t, std::function<void()>> waiters_;

  std::thread writer_;
  std::thread syncer_;
};

const char* PolicyName(FsyncPolicy p);

}  // namespace prefixd::persist
