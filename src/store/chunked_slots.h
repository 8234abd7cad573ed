// ChunkedSlots: an array of T named by a 32-bit index and grown one chunk of 2^kBits slots at a
// time, so it holds at most one partly used chunk at any size and growth never moves a slot (a
// vector grown by doubling may hold twice the slots it needs). The eviction index's nodes and
// the keyspace's handle → entry table use it. Not thread-safe: its owner's lock guards it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace prefixd::store {

template <class T, uint32_t kBits>
class ChunkedSlots {
 public:
  static constexpr uint32_t kPerChunk = uint32_t{1} << kBits;

  T& operator[](uint32_t i) { return chunks_[i >> kBits][i & (kPerChunk - 1)]; }
  const T& operator[](uint32_t i) const { return chunks_[i >> kBits][i & (kPerChunk - 1)]; }

  // Slots from size() on for one more chunk, value-initialised.
  void Grow() { chunks_.push_back(std::make_unique<T[]>(kPerChunk)); }
  // Room for slot `i`: chunks are added until it exists.
  void MakeRoomFor(uint32_t i) {
    while (i >= size()) Grow();
  }
  // Slots that exist (a whole number of chunks).
  size_t size() const { return chunks_.size() << kBits; }
  // The chunks and the table naming them.
  size_t MemoryBytes() const {
    return chunks_.capacity() * sizeof(chunks_[0]) + size() * sizeof(T);
  }
  void Clear() { chunks_.clear(); }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
};

}  // namespace prefixd::store
