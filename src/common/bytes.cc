#include "common/bytes.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace prefixd {
namespace {

constexpr size_t kAlignment = 64;

struct FreeDeleter {
  void operator()(const uint8_t* p) const { std::free(const_cast<uint8_t*>(p)); }
};

}  // namespace

Bytes Bytes::Allocate(size_t size) {
  // aligned_alloc wants a multiple of the alignment; a zero-size value still gets one block so
  // that data() is never null.
  size_t rounded = std::max(kAlignment, (size + kAlignment - 1) / kAlignment * kAlignment);
  auto* raw = static_cast<uint8_t*>(std::aligned_alloc(kAlignment, rounded));
  if (raw == nullptr) throw std::bad_alloc();
  Bytes b;
  b.owner_ = std::shared_ptr<const uint8_t>(raw, FreeDeleter{});
  b.data_ = raw;
  b.size_ = size;
  b.capacity_ = rounded;
  return b;
}

Bytes Bytes::CopyOf(std::string_view data) {
  Bytes b = Allocate(data.size());
  if (!data.empty()) std::memcpy(b.mutable_data(), data.data(), data.size());
  return b;
}

Bytes Bytes::Slice(size_t offset, size_t length) const {
  Bytes b = *this;
  offset = std::min(offset, size_);
  b.data_ = data_ + offset;
  b.size_ = std::min(length, size_ - offset);
  // Storage shared with other handles is not attributed to this one.
  b.capacity_ = b.size_;
  return b;
}

}  // namespace prefixd
