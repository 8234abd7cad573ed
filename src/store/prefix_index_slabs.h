// The prefix index's packed storage (docs/prefix-index.md §3): Hash128, HashSlots (an
// open-addressing table from a 128-bit hash to a u32 record id) and Slab (fixed-size slots named
// by u32, carved from a few large chunks: the index's block records and its K/V pages).
// Not thread-safe: each belongs to one PrefixIndex and is touched under that namespace's lock.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/bytes.h"

namespace prefixd::store {

// A 128-bit chained hash as the client computes it; raw 16 bytes little-endian on the wire.
struct Hash128 {
  uint64_t lo = 0;
  uint64_t hi = 0;

  static Hash128 Read(const uint8_t* sixteen_bytes);
  void Write(uint8_t* sixteen_bytes) const;
  std::string Raw() const;
  bool IsRoot() const { return lo == 0 && hi == 0; }
  friend bool operator==(const Hash128&, const Hash128&) = default;
};
inline constexpr size_t kHashBytes = 16;

// Record ids by hash, 4 bytes a slot, linear probing with backward-shift deletion (no
// tombstones), at most 80 % full. The table keeps no hashes: `hash_of(id)` reads the record's.
// Slots are chosen by a keyed hash of the 16 bytes (common/keyed_hash.h), so clients, who choose
// the hashes, cannot pile them into one run of slots.
class HashSlots {
 public:
  static constexpr uint32_t kEmpty = 0xffffffffu;

  template <typename HashOf>
  uint32_t Find(const Hash128& h, const HashOf& hash_of) const {
    if (size_ == 0) return kEmpty;
    for (size_t i = Home(h);; i = Next(i)) {
      const uint32_t id = slots_[i];
      if (id == kEmpty || hash_of(id) == h) return id;
    }
  }

  // `h` must not be present.
  template <typename HashOf>
  void Insert(const Hash128& h, uint32_t id, const HashOf& hash_of) {
    if ((size_ + 1) * 5 > slots_.size() * 4)
      Resize(std::max<size_t>(8, slots_.size() * 2), hash_of);
    size_t i = Home(h);
    while (slots_[i] != kEmpty) i = Next(i);
    slots_[i] = id;
    size_ += 1;
  }

  // Room for `entries` in all before the next growth (one allocation for a batch).
  template <typename HashOf>
  void Reserve(size_t entries, const HashOf& hash_of) {
    size_t capacity = std::max<size_t>(8, slots_.size());
    while (entries * 5 > capacity * 4) capacity *= 2;
    if (capacity != slots_.size()) Resize(capacity, hash_of);
  }

  // Call while the record still carries `h`.
  template <typename HashOf>
  bool Erase(const Hash128& h, const HashOf& hash_of) {
    if (size_ == 0) return false;
    size_t hole = Home(h);
    for (;; hole = Next(hole)) {
      if (slots_[hole] == kEmpty) return false;
      if (hash_of(slots_[hole]) == h) break;
    }
    // Pull back every later entry of the run that may sit at the hole (its home is not in the
    // cyclic range (hole, j]), so lookups never stop early at the hole.
    for (size_t j = Next(hole); slots_[j] != kEmpty; j = Next(j)) {
      const size_t home = Home(hash_of(slots_[j]));
      const bool movable = hole < j ? (home <= hole || home > j) : (home <= hole && home > j);
      if (!movable) continue;
      slots_[hole] = slots_[j];
      hole = j;
    }
    slots_[hole] = kEmpty;
    size_ -= 1;
    if (slots_.size() > 8 && size_ * 8 < slots_.size()) Resize(slots_.size() / 2, hash_of);
    return true;
  }

  size_t size() const { return size_; }
  void Clear();
  size_t memory_bytes() const { return slots_.capacity() * sizeof(uint32_t); }

 private:
  size_t Home(const Hash128& h) const;
  size_t Next(size_t i) const { return (i + 1) & (slots_.size() - 1); }

  template <typename HashOf>
  void Resize(size_t capacity, const HashOf& hash_of) {
    std::vector<uint32_t> old(capacity, kEmpty);
    old.swap(slots_);
    shift_ = 64;
    for (size_t c = capacity; c > 1; c /= 2) shift_ -= 1;
    for (uint32_t id : old) {
      if (id == kEmpty) continue;
      size_t i = Home(hash_of(id));
      while (slots_[i] != kEmpty) i = Next(i);
      slots_[i] = id;
    }
  }

  std::vector<uint32_t> slots_;  // a power of two long, or empty
  size_t size_ = 0;
  unsigned shift_ = 64;  // 64 − log2(slots)
};

// Slots of `slot_bytes` named 0, 1, 2, ... in chunks of at most 2 MiB (a power of two slots a
// chunk, at least one), so a slot costs its bytes and nothing per slot. The first chunk starts
// small and grows by an eighth (copied) until full, so a small namespace wastes little; later
// chunks are allocated full. Slots never move while their chunk lives, except when the first chunk
// grows; Share() hands out a reference that stays valid whatever happens later.
class Slab {
 public:
  explicit Slab(size_t slot_bytes);

  // Makes slot `id` usable: ids are added in order, so `id` is slots() (the next one).
  void Add(uint32_t id);
  // Room for `slots` in all before the next growth: a batch grows the first chunk once, to its
  // size, instead of an eighth at a time.
  void Reserve(size_t slots);
  uint32_t slots() const { return slots_; }
  size_t slot_bytes() const { return slot_bytes_; }

  // Slots of 0 bytes have no storage: Data() and Mutable() are not to be called then.
  const uint8_t* Data(uint32_t id) const {
    return chunks_[id >> shift_].bytes.data() + (id & mask_) * slot_bytes_;
  }
  uint8_t* Mutable(uint32_t id) {
    return chunks_[id >> shift_].bytes.mutable_data() + (id & mask_) * slot_bytes_;
  }
  // Before a freed slot gets new contents: a chunk that Share() handed out is copied first, so
  // what the holders read never changes under them.
  uint8_t* Rewrite(uint32_t id);
  // The slot's bytes as a reference of their own (snapshots, DUMP), valid after later changes.
  Bytes Share(uint32_t id) const;

  // Bytes allocated for the chunks and their handles.
  size_t memory_bytes() const;
  void Clear();

 private:
  void GrowFirstChunk(size_t slots);

  size_t slot_bytes_;
  unsigned shift_ = 0;  // log2(slots a full chunk holds)
  uint32_t mask_ = 0;
  uint32_t slots_ = 0;
  struct Chunk {
    Bytes bytes;
    mutable bool shared = false;  // Share() handed out a slice of it
  };
  std::vector<Chunk> chunks_;
};

}  // namespace prefixd::store
