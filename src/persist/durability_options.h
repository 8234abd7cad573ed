// DurabilityOptions: how one data directory is kept: where, the fsync policy, segment size,
// automatic rewrite, what recovery may skip and the file system it goes through. Plain data,
// read by Durability, Recovery and SnapshotWriter; set before Durability::Open().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "persist/env.h"
#include "persist/log_writer.h"
#include "persist/mutation.h"

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

}  // namespace prefixd::persist
