// ColdFile: a log segment or snapshot file that holds stored values' bytes, as the store sees it
// for the disk tier: positional reads, and how far its contents are durable (fsynced). The
// persistence layer implements it over its Env; the store keeps shared handles, so a file that
// compaction removed stays readable until no cold value points into it. Thread-safe: every read
// is a positional read (pread), so any thread may call any method at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
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
  // Reads exactly out.size() bytes at `offset` into the caller's buffer (a reply's window).
  virtual bool ReadInto(uint64_t offset, std::span<uint8_t> out, std::string& error) const {
    Bytes read;
    if (!Read(offset, out.size(), read, error)) return false;
    if (!out.empty()) std::memcpy(out.data(), read.data(), out.size());
    return true;
  }
  // False (with `error` set) when the file ends before offset + length: a value that can be
  // seen to be unreadable before any of it is sent.
  virtual bool Holds(uint64_t offset, uint64_t length, std::string& error) const {
    (void)offset, (void)length, (void)error;
    return true;
  }
  // A read-only descriptor of the file for a connection that sends a value straight from it
  // (sendfile), valid while this object lives; -1 when reads must go through Read/ReadInto.
  virtual int descriptor() const { return -1; }

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

// Where a cold value's bytes sit: `length` bytes at `offset` of `file`.
struct ColdExtent {
  std::shared_ptr<const ColdFile> file;
  uint64_t offset = 0;
  uint64_t length = 0;
};

}  // namespace prefixd::store
