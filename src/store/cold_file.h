// ColdFile: a log segment or snapshot file that holds stored values' bytes, as the store sees it
// for the disk tier: positional reads, and how far its contents are durable (fsynced). The
// persistence layer implements it over its Env; the store keeps shared handles, so a file that
// compaction removed stays readable until no cold value points into it. Thread-safe: ReadAt is
// a positional read (pread) and may be called from any thread at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <string>

#include "common/bytes.h"

namespace prefixd::store {

class ColdFile {
 public:
  static constexpr uint64_t kAllDurable = std::numeric_limits<uint64_t>::max();

  virtual ~ColdFile() = default;
  // Reads exactly `length` bytes at `offset` into a buffer of its own (`out` may be a slice of
  // a larger aligned one); false (with `error` set) when it cannot.
  virtual bool Read(uint64_t offset, uint64_t length, Bytes& out, std::string& error) const = 0;

  // Bytes before this offset are fsynced: a value that ends there may leave memory.
  uint64_t durable_end() const { return durable_end_.load(std::memory_order_acquire); }
  void MarkDurable(uint64_t end) {
    uint64_t seen = durable_end_.load(std::memory_order_relaxed);
    while (end > seen && !durable_end_.compare_exchange_weak(seen, end)) {
    }
  }

 private:
  std::atomic<uint64_t> durable_end_{0};
};

}  // namespace prefixd::store
