#include "store/prefix_index_slabs.h"

#include <cstdint>
#include <cstring>
#include <string_view>

#include "common/keyed_hash.h"

namespace prefixd::store {
namespace {

constexpr size_t kChunkBytes = size_t{2} << 20;
// The first chunk grows by an eighth, and by at least this many bytes.
constexpr size_t kFirstChunkStep = 1024;

// Chunks below this come from plain malloc (Bytes::CopyCompact of zeros) rather than
// Bytes::Allocate's aligned_alloc: the holes a freed 64-byte-aligned buffer leaves in the heap are
// a few bytes too small for the next aligned request of its size, so a namespace's small chunks
// would pile up beside them instead of filling them (measured: 64 MB of such holes after loading
// 10^4 namespaces). From here on Bytes::Allocate's pool of mappings serves them.
constexpr size_t kHeapChunkBelow = size_t{32} << 10;
constexpr char kZeros[kHeapChunkBelow] = {};

Bytes NewChunk(size_t bytes) {
  if (bytes < kHeapChunkBelow) {
    Bytes chunk = Bytes::CopyCompact(std::string_view(kZeros, bytes));
    // Records are read in place: their alignment must hold (malloc gives 16 bytes).
    if (reinterpret_cast<uintptr_t>(chunk.data()) % alignof(uint64_t) == 0) return chunk;
  }
  return Bytes::Allocate(bytes);
}

}  // namespace

Hash128 Hash128::Read(const uint8_t* p) {
  Hash128 h;
  std::memcpy(&h.lo, p, 8);
  std::memcpy(&h.hi, p + 8, 8);
  return h;
}

void Hash128::Write(uint8_t* p) const {
  std::memcpy(p, &lo, 8);
  std::memcpy(p + 8, &hi, 8);
}

std::string Hash128::Raw() const {
  std::string out(kHashBytes, '\0');
  Write(reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

size_t HashSlots::Home(const Hash128& h) const {
  // The client chose these bytes: a keyed hash of them, whose top bits pick the slot.
  uint8_t raw[kHashBytes];
  h.Write(raw);
  return static_cast<size_t>(KeyedHash(raw, kHashBytes) >> shift_);
}

void HashSlots::Clear() {
  std::vector<uint32_t>().swap(slots_);
  size_ = 0;
  shift_ = 64;
}

Slab::Slab(size_t slot_bytes) : slot_bytes_(slot_bytes) {
  size_t per_chunk = 1;
  while (slot_bytes_ > 0 && slot_bytes_ * per_chunk * 2 <= kChunkBytes) per_chunk *= 2;
  while ((size_t{1} << shift_) < per_chunk) shift_ += 1;
  mask_ = static_cast<uint32_t>(per_chunk - 1);
}

void Slab::Add(uint32_t id) {
  (void)id;                // always slots_: ids are added in order
  if (slot_bytes_ == 0) {  // nothing to hold (a namespace without attention layers)
    slots_ += 1;
    return;
  }
  const size_t per_chunk = size_t{mask_} + 1;
  const size_t step = std::max<size_t>(1, kFirstChunkStep / slot_bytes_);
  const size_t in_chunk = slots_ & mask_;
  if (chunks_.empty()) {
    GrowFirstChunk(std::min(per_chunk, step));
  } else if (in_chunk == 0 && slots_ >> shift_ == chunks_.size()) {
    chunks_.push_back({NewChunk(per_chunk * slot_bytes_)});  // later chunks start full
  } else if (chunks_.size() == 1 && in_chunk * slot_bytes_ == chunks_[0].bytes.size()) {
    GrowFirstChunk(std::min(per_chunk, in_chunk + std::max(in_chunk / 8, step)));
  }
  slots_ += 1;
}

void Slab::Reserve(size_t slots) {
  const size_t per_chunk = size_t{mask_} + 1;
  if (slot_bytes_ == 0 || chunks_.size() > 1) return;
  const size_t have = chunks_.empty() ? 0 : chunks_[0].bytes.size() / slot_bytes_;
  if (slots <= have || have == per_chunk) return;
  GrowFirstChunk(std::min(per_chunk, std::max(slots, have + have / 8)));
}

void Slab::GrowFirstChunk(size_t slots) {
  Bytes grown = NewChunk(slots * slot_bytes_);
  if (chunks_.empty()) {
    chunks_.push_back({std::move(grown)});
    return;
  }
  std::memcpy(grown.mutable_data(), chunks_[0].bytes.data(), size_t{slots_} * slot_bytes_);
  chunks_[0] = {std::move(grown)};
}

uint8_t* Slab::Rewrite(uint32_t id) {
  Chunk& chunk = chunks_[id >> shift_];
  // Copied only while a handed-out slice is still held: once the snapshot or DUMP that took it
  // is done, the chunk is written in place again.
  if (chunk.shared && !chunk.bytes.Unique()) {
    Bytes copy = NewChunk(chunk.bytes.size());
    std::memcpy(copy.mutable_data(), chunk.bytes.data(), chunk.bytes.size());
    chunk = {std::move(copy)};
  }
  chunk.shared = false;
  return Mutable(id);
}

Bytes Slab::Share(uint32_t id) const {
  const Chunk& chunk = chunks_[id >> shift_];
  chunk.shared = true;
  return chunk.bytes.Slice((id & mask_) * slot_bytes_, slot_bytes_);
}

size_t Slab::memory_bytes() const {
  // Asked around every command of the namespace (its memory before and after), so O(1): every
  // chunk after the first is made full size, so they all cost what the last one does.
  size_t total = chunks_.capacity() * sizeof(Chunk);
  if (!chunks_.empty()) {
    total +=
        chunks_.front().bytes.capacity() + (chunks_.size() - 1) * chunks_.back().bytes.capacity();
  }
  return total;
}

void Slab::Clear() {
  std::vector<Chunk>().swap(chunks_);
  slots_ = 0;
}

}  // namespace prefixd::store
