// SmallChunks: one keyspace shard's heap for its small entry chunks (up to kLargest bytes), in
// 8-byte size classes carved from 4 KiB pages, so a chunk costs its request rounded to 8 where
// glibc adds an 8-byte header and rounds to 16. Allocate, Free and Trim are called under the
// owner's lock only (Free finds the owner from the page the chunk sits in); pages come from a
// process-wide pool that has its own lock. docs/cache-design.md, "Memory per entry".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace prefixd::store {

class SmallChunks {
 public:
  static constexpr size_t kPageBytes = 4096;
  // Above this a page would hold too few chunks (and waste too much of its tail): the caller
  // takes such a request to malloc.
  static constexpr size_t kLargest = 256;
  static constexpr size_t kSmallest = 24;

  // What a chunk of `request` bytes (at most kLargest) costs here.
  static constexpr size_t SlotBytes(size_t request) {
    const size_t slot = (request + 7) / 8 * 8;
    return slot < kSmallest ? kSmallest : slot;
  }

  // A page's header (defined with the code): its owner, its class and its free slots.
  struct Page;

  SmallChunks() = default;
  // Gives every page back; every chunk must have been freed by then.
  ~SmallChunks();
  SmallChunks(const SmallChunks&) = delete;
  SmallChunks& operator=(const SmallChunks&) = delete;

  // A chunk of SlotBytes(request) bytes, 8-byte aligned; throws std::bad_alloc when no page can
  // be had.
  void* Allocate(size_t request);
  // Frees a chunk that some SmallChunks allocated, under that owner's lock. A page left empty
  // goes back to the pool unless it is the last page of its class with room (the next
  // Allocate of that size would take a fresh page at once).
  static void Free(void* chunk);
  // Gives back the empty pages Free kept (after a flush).
  void Trim();

  // Pages held, and their bytes (what RSS holds for these chunks, slack included).
  size_t pages() const { return pages_; }
  size_t bytes_held() const { return pages_ * kPageBytes; }

 private:
  static constexpr size_t kClasses = kLargest / 8 + 1;  // indexed by slot bytes / 8

  void Open(Page* page);
  void Close(Page* page);
  void Release(Page* page);

  std::array<Page*, kClasses> open_{};  // per class: the pages with a free slot
  size_t pages_ = 0;
};

// What a heap request of `request` bytes costs with glibc's malloc: an 8-byte header, 16-byte
// steps, 32 bytes at least.
constexpr size_t MallocChunkBytes(size_t request) {
  const size_t chunk = (request + 8 + 15) / 16 * 16;
  return chunk < 32 ? 32 : chunk;
}

// Where a store puts a chunk of `request` bytes: its shard's SmallChunks up to kLargest, malloc
// above. What that costs, and the way there and back (the caller knows the request again when it
// frees: the chunk's own layout says it).
constexpr size_t StoreChunkBytes(size_t request) {
  return request <= SmallChunks::kLargest ? SmallChunks::SlotBytes(request)
                                          : MallocChunkBytes(request);
}
void* AllocateStoreChunk(SmallChunks& chunks, size_t request);
void FreeStoreChunk(void* chunk, size_t request);

}  // namespace prefixd::store
