// LoglessSnapshots: a data directory's persistence under `appendonly no`: it loads the directory
// once at start (the snapshot, and any log an earlier `appendonly yes` run left after it), then
// writes a snapshot only when asked (SAVE, BGSAVE, SHUTDOWN SAVE), with every write held back
// meanwhile so that it is one point in time, as Redis's RDB file is. The directory's lock is held
// only while it is read or written, so servers without the log may share one as Redis's do.
// Thread-safe: SAVE runs on an io thread, BGSAVE on a thread of its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "persist/durability.h"
#include "persist/durability_options.h"
#include "persist/env.h"
#include "persist/log_writer.h"
#include "persist/save_history.h"
#include "persist/store_set.h"
#include "prefixd/status.h"

namespace prefixd::persist {

class LoglessSnapshots {
 public:
  // Holds every write to the stores back until the handle it returns is dropped (the command
  // layer's gates; this layer knows none of them).
  using HoldWrites = std::function<std::shared_ptr<void>()>;

  LoglessSnapshots(DurabilityOptions options, StoreSet stores);
  ~LoglessSnapshots();  // waits for a background save
  LoglessSnapshots(const LoglessSnapshots&) = delete;
  LoglessSnapshots& operator=(const LoglessSnapshots&) = delete;

  // Loads what the directory holds (Recovery, as a start with the log does). An error names the
  // damage, or says another prefixd process is serving from the directory.
  Status Open();

  // A snapshot on the calling thread. Aborted while another save runs.
  Status Save(const HoldWrites& hold);
  // A snapshot on a thread of its own; Aborted while another save runs.
  Status BackgroundSave(HoldWrites hold);

  // Writes applied since start: Redis's rdb_changes_since_last_save counts them.
  void CountChanges(uint64_t changes) { saves_.CountChanges(changes); }

  PersistStats Stats() const;

 private:
  Status WriteSnapshot(const HoldWrites& hold);

  DurabilityOptions options_;
  Env* env_;
  StoreSet stores_;
  // The snapshot's base lsn: past every record of a log left in the directory, so a later start
  // with the log replays none of them over the newer snapshot.
  uint64_t base_lsn_ = 1;
  // Log segments found at start, whose records the first snapshot holds; removed once it is
  // durable.
  std::vector<SegmentInfo> old_segments_;

  std::mutex save_mu_;  // one snapshot at a time
  SaveHistory saves_;
};

}  // namespace prefixd::persist
