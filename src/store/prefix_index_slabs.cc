#include "store/prefix_index_slabs.h"

#include <cstring>
#include <random>

namespace prefixd::store {
namespace {

constexpr size_t kChunkBytes = size_t{2} << 20;
// The first chunk grows by an eighth, and by at least this many bytes.
constexpr size_t kFirstChunkStep = 1024;

uint64_t ProcessSeed() {
  static const uint64_t seed = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd();
  }();
  return seed;
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

HashSlots::HashSlots() : seed_(ProcessSeed()) {}

size_t HashSlots::Home(const Hash128& h) const {
  // Fibonacci hashing of the mixed halves: the top bits of the product pick the slot.
  uint64_t x = (h.lo ^ seed_) + ((h.hi << 29) | (h.hi >> 35));
  x ^= x >> 31;
  return static_cast<size_t>((x * 0x9E3779B97F4A7C15ull) >> shift_);
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
    chunks_.push_back({Bytes::Allocate(per_chunk * slot_bytes_)});  // later chunks start full
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
  Bytes grown = Bytes::Allocate(slots * slot_bytes_);
  if (chunks_.empty()) {
    chunks_.push_back({std::move(grown)});
    return;
  }
  std::memcpy(grown.mutable_data(), chunks_[0].bytes.data(), size_t{slots_} * slot_bytes_);
  chunks_[0] = {std::move(grown)};
}

uint8_t* Slab::Rewrite(uint32_t id) {
  Chunk& chunk = chunks_[id >> shift_];
  if (chunk.shared) chunk = {Bytes::CopyOf(chunk.bytes.view())};
  return Mutable(id);
}

Bytes Slab::Share(uint32_t id) const {
  const Chunk& chunk = chunks_[id >> shift_];
  chunk.shared = true;
  return chunk.bytes.Slice((id & mask_) * slot_bytes_, slot_bytes_);
}

size_t Slab::memory_bytes() const {
  size_t total = chunks_.capacity() * sizeof(Chunk);
  for (const Chunk& chunk : chunks_) total += chunk.bytes.capacity();
  return total;
}

void Slab::Clear() {
  std::vector<Chunk>().swap(chunks_);
  slots_ = 0;
}

}  // namespace prefixd::store
