// ShmLeaseTable: the values one connection has leased through SHM.GET (docs/shm-transport.md).
// A lease is a reference to the value's bytes, so they are neither freed nor rewritten while it
// lives; it ends on SHM.RELEASE, on disconnect or when its time is up. The connection's io thread
// adds and releases; the active-expiry thread sweeps expired leases: hence the table's own lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "common/bytes.h"

namespace prefixd::commands {

class ShmLeaseTable {
 public:
  // A lease on `value` until `expires_ms` (Unix ms): its id (from 1), or 0 when the table already
  // holds `cap` leases.
  uint64_t Add(Bytes value, int64_t expires_ms, size_t cap);
  // Ends lease `id`; false when there is none (released, expired, or never given).
  bool Release(uint64_t id);
  // Ends every lease; returns how many there were.
  size_t Clear();
  // Ends the leases whose time is up by `now_ms`.
  void Sweep(int64_t now_ms);
  size_t count() const;
  uint64_t bytes() const;

 private:
  struct Lease {
    Bytes value;
    int64_t expires_ms;
  };
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Lease> leases_;
  uint64_t next_id_ = 0;
  uint64_t bytes_ = 0;
};

// A new table, known to SweepShmLeases and the totals below for as long as it lives.
std::shared_ptr<ShmLeaseTable> NewShmLeaseTable();
// Ends every live table's expired leases (the active-expiry cycle calls it).
void SweepShmLeases(int64_t now_ms);
// Leases held and the bytes they keep alive, over every connection (INFO).
size_t ShmLeaseCount();
uint64_t ShmLeasedBytes();

}  // namespace prefixd::commands
