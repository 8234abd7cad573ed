// ShmLeaseTable: what one connection has leased through the shared forms (SHM.GET and the piece
// fetches; docs/shm-transport.md). A lease is one answer's: a reference to every allocation its
// pieces lie in, so they are neither freed nor rewritten while it lives; it ends on SHM.RELEASE,
// on disconnect or when its time is up. The connection's io thread
// adds and releases; the active-expiry thread sweeps expired leases: hence the table's own lock.
// Every table also reports to one process-wide register of leased allocations, which eviction
// and memory accounting read from any thread (its own lock, always taken after a table's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/bytes.h"

namespace prefixd::commands {

// What a lease was taken through: database `db`'s key (string, SSM session, V-store session or
// KV.PREFIX namespace) `key`, as a 64-bit hash (a lease keeps no copy of a key's name). Two keys
// sharing a hash only make eviction pass over one of them while the other is leased.
uint64_t ShmLeaseTag(size_t db, std::string_view key);

class ShmLeaseTable {
 public:
  // One lease on every allocation `pieces` lie in (the pieces one answer lends, taken through
  // `tag`), until `expires_ms` (Unix ms): its id (from 1), or 0 when the table already holds
  // `cap` leases. Pieces of one allocation are held once: the cap counts answers, not pieces.
  uint64_t Add(std::span<const Bytes* const> pieces, uint64_t tag, int64_t expires_ms, size_t cap);
  // A lease of one value.
  uint64_t Add(const Bytes& value, uint64_t tag, int64_t expires_ms, size_t cap) {
    const Bytes* one[] = {&value};
    return Add(one, tag, expires_ms, cap);
  }
  // Ends lease `id`; false when there is none (released, expired, or never given).
  bool Release(uint64_t id);
  // Ends every lease; returns how many there were.
  size_t Clear();
  // Ends the leases whose time is up by `now_ms`.
  void Sweep(int64_t now_ms);
  size_t count() const;
  uint64_t bytes() const;

  ~ShmLeaseTable() { Clear(); }

 private:
  struct Lease {
    std::vector<Bytes> held;  // one handle per distinct allocation
    uint64_t bytes = 0;       // the pieces' lengths, summed (INFO's shm_leased_bytes)
    uint64_t tag = 0;
    int64_t expires_ms = 0;
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

// Whether a lease taken through `tag` shares an allocation that something besides leases still
// holds (the key's value, a session's layer or row chunk, a namespace's page chunk): then
// evicting that key would free nothing while the lease lives, and eviction passes over it.
bool ShmLeaseHoldsKey(uint64_t tag);
// Leased allocations nothing but leases holds any more (their key was deleted, overwritten,
// flushed, expired or evicted, or their rows rewritten, since the lease was taken), summed whole:
// memory the server really holds that no store counts. Engine::UsedMemory adds it, so maxmemory
// is enforced against it. The figure is kept from the last count, made again when a lease ends
// and at most a millisecond after the last one; ...Now counts at once (INFO, an eviction pass).
uint64_t ShmLeasedOrphanBytes();
uint64_t ShmLeasedOrphanBytesNow();

}  // namespace prefixd::commands
