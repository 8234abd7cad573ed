// SaveHistory: what SAVE, BGSAVE, LASTSAVE and INFO persistence report about one data directory's
// snapshots (the last one's time and size, the writes since, how the last background save went,
// what the start loaded), and the one thread a background save runs on. Durability (with the
// log) and LoglessSnapshots (without) each keep one. Any thread may count changes and read it;
// the thread that writes a snapshot records it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "persist/log_writer.h"
#include "prefixd/status.h"

namespace prefixd::persist {

class Recovery;

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

// Redis's words for a save asked for while one runs.
inline constexpr const char* kSaveInProgress = "Background save already in progress";

class SaveHistory {
 public:
  SaveHistory() = default;
  ~SaveHistory() { JoinBackground(); }
  SaveHistory(const SaveHistory&) = delete;
  SaveHistory& operator=(const SaveHistory&) = delete;

  // At start: the last save is the start until a snapshot is written here (as Redis).
  void Started();
  // What the start loaded (the snapshot's size, the records and bytes replayed, the time).
  void Loaded(const Recovery& recovery);

  // Writes applied: Redis's rdb_changes_since_last_save counts them.
  void CountChanges(uint64_t changes) { changes_.fetch_add(changes, std::memory_order_relaxed); }
  // The count a snapshot about to be cut holds: what Saved takes off once it is written.
  uint64_t changes() const { return changes_.load(); }
  // A snapshot of `bytes` was written, holding the `changes_in_it` changes counted at its cut.
  void Saved(uint64_t bytes, uint64_t changes_in_it);
  // The outcome of a save, SAVE's or BGSAVE's: its error text, empty when it succeeded.
  void Finished(const Status& saved);

  // Runs `save` on the background-save thread; Aborted (kSaveInProgress) while one runs.
  Status StartBackground(std::function<Status()> save);
  bool background_running() const { return background_running_.load(); }
  void JoinBackground();

  // The save fields of `stats`; the log's are the caller's.
  void Report(PersistStats& stats) const;

 private:
  std::atomic<bool> background_running_{false};
  std::thread background_;
  std::atomic<int64_t> last_save_time_{0};
  std::atomic<bool> last_background_ok_{true};
  std::atomic<int64_t> last_background_seconds_{-1};
  std::atomic<uint64_t> changes_{0};
  std::atomic<uint64_t> snapshot_bytes_{0};
  std::atomic<uint64_t> saves_{0};
  mutable std::mutex error_mu_;
  std::string last_error_;
  // Written once by Loaded, before any other thread reads them.
  uint64_t recovered_records_ = 0;
  uint64_t recovered_bytes_ = 0;
  double recovery_seconds_ = 0;
};

}  // namespace prefixd::persist
