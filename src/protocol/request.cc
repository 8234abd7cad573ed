#include "protocol/request.h"

namespace prefixd::protocol {

Bytes Request::TakeBytes(size_t i) const {
  const Slot& s = slots_[i];
  if (s.large) return large_[s.offset];
  // One allocation for counter and bytes: a small stored value (a state layer, a hash) costs
  // about its size plus 32 bytes, not a 64-byte-aligned block plus a separate counter.
  return Bytes::CopyCompact((*this)[i]);
}

void Request::Clear() {
  arena_.clear();
  slots_.clear();
  large_.clear();
  payload_bytes_ = 0;
  inline_ = false;
}

size_t Request::ReleaseIdleMemory() {
  size_t freed = 0;
  if (!slots_.empty()) return 0;  // arguments still in use
  if (arena_.capacity() > kIdleArenaCapacity) {
    freed += arena_.capacity();
    std::string().swap(arena_);
  }
  if (slots_.capacity() > kIdleSlotCapacity) {
    freed += slots_.capacity() * sizeof(Slot);
    std::vector<Slot>().swap(slots_);
  }
  if (large_.capacity() > kIdleSlotCapacity) {
    freed += large_.capacity() * sizeof(Bytes);
    std::vector<Bytes>().swap(large_);
  }
  return freed;
}

size_t Request::allocated_bytes() const {
  size_t bytes =
      arena_.capacity() + slots_.capacity() * sizeof(Slot) + large_.capacity() * sizeof(Bytes);
  for (const Bytes& b : large_) bytes += b.capacity();
  return bytes;
}

void Request::AddLarge(Bytes arg) {
  payload_bytes_ += arg.size();
  slots_.push_back(Slot{static_cast<uint32_t>(large_.size()), 1, 0});
  large_.push_back(std::move(arg));
}

void Request::AddFrom(const Request& other, size_t i) {
  const Slot& s = other.slots_[i];
  if (s.large) return AddLarge(other.large_[s.offset]);
  AddSmall(other[i]);
}

}  // namespace prefixd::protocol
