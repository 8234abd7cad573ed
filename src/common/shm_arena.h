// Shared arenas: the memfd-backed memory the large-buffer pool (common/bytes.cc) carves regions
// from when `shm-arenas` is on, so a stored value can be read in place by a process on the same
// machine (docs/shm-transport.md). Any thread may call these; arenas are created under a lock and
// never unmapped, so a located place stays valid for the life of the process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace prefixd::shm {

// Turns arenas on for every later pooled allocation. Call once at start-up, before values are
// stored; returns an error text (memfd refused by the kernel, ...) or empty. `huge_pages`: ask
// for shmem huge pages on each arena (the `huge-pages` setting), or forbid them.
std::string EnableArenas(bool huge_pages);
bool ArenasEnabled();

// The pool's side. A fresh region of `size` bytes (a multiple of 4 KiB): an empty range of that
// size handed back before, or the next one in the current arena (a new arena when it is full).
// Null when the kernel refuses memory for a new arena.
uint8_t* TakeRegion(size_t size);
// Whether `p` lies in an arena (then the region came from TakeRegion).
bool InArena(const void* p);
// Frees a region's pages (a hole punched in its arena) and keeps its range for reuse by size.
void ReleaseRegion(uint8_t* p, size_t size);
// A region handed out gets a new generation (never 0) in the table word of each of its pages;
// a freed one gets 0 there, so a client's lease check fails from then on.
void StampNewGeneration(uint8_t* p, size_t size);
void ClearGeneration(uint8_t* p, size_t size);

// Where `length` bytes at `p` lie: the arena, the offset in its file, and the generation of
// the page `p` is on. Nullopt when they are not (all) in one arena.
struct Place {
  uint32_t arena = 0;
  uint64_t offset = 0;
  uint64_t generation = 0;
};
std::optional<Place> Locate(const void* p, size_t length);

// The arenas made so far (ids 0 to ArenaCount()-1), each's file size, and a descriptor of it
// that can only be read (owned here; dup it before handing it over).
uint32_t ArenaCount();
uint64_t ArenaSize(uint32_t id);
int ReadOnlyFd(uint32_t id);

// The generation table: one 64-bit word per kPageBytes of an arena, at its start, this many
// bytes long for an arena of `arena_bytes` (a multiple of the huge page size).
constexpr uint64_t kPageBytes = 4096;
constexpr uint64_t TableBytes(uint64_t arena_bytes) {
  const uint64_t words = arena_bytes / kPageBytes * 8;
  return (words + (uint64_t{2} << 20) - 1) / (uint64_t{2} << 20) * (uint64_t{2} << 20);
}

}  // namespace prefixd::shm
