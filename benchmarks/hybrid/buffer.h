// FloatBuffer: a 64-byte-aligned, owned array of floats for weights, activations and layer state.
// A plain value type with no sharing: one thread at a time, like std::vector.
//
// Resize(n, /*zero=*/false) grows without clearing the new elements, for weights about to be
// generated or loaded; Reserve() makes room, resident, ahead of time.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <utility>

namespace prefixd::hybrid {

class FloatBuffer {
 public:
  FloatBuffer() = default;
  // `size` floats, zero-filled.
  explicit FloatBuffer(size_t size) { Resize(size, /*zero=*/true); }

  FloatBuffer(FloatBuffer&&) noexcept = default;
  FloatBuffer& operator=(FloatBuffer&&) noexcept = default;
  FloatBuffer(const FloatBuffer& other) { *this = other; }
  FloatBuffer& operator=(const FloatBuffer& other) {
    if (this != &other) {
      Resize(other.size_, /*zero=*/false);
      if (size_ > 0) std::memcpy(data_.get(), other.data_.get(), size_ * sizeof(float));
    }
    return *this;
  }

  // Changes the size, keeping the first min(old, new) elements. New elements are zero when
  // `zero`, unspecified otherwise. Capacity only grows (by at least 1.5× so appends amortise).
  void Resize(size_t size, bool zero = true) {
    if (size > capacity_) Reserve(std::max(size, capacity_ + capacity_ / 2));
    if (zero && size > size_) std::memset(data_.get() + size_, 0, (size - size_) * sizeof(float));
    size_ = size;
  }

  // Allocates room for `capacity` floats and touches all of it, so a later fetch or prefill into
  // the buffer never waits on page faults (a cost a server pays once, at startup). Buffers of
  // 4 MB and more sit on 2 MB boundaries and ask for transparent huge pages.
  void Reserve(size_t capacity) {
    if (capacity <= capacity_) return;
    const bool huge = capacity * sizeof(float) >= kHugeThreshold;
    const size_t align = huge ? kHugePage : 64;
    const size_t bytes = (capacity * sizeof(float) + align - 1) / align * align;
    auto* fresh = static_cast<float*>(std::aligned_alloc(align, bytes));
    if (fresh == nullptr) throw std::bad_alloc();
    if (huge) ::madvise(fresh, bytes, MADV_HUGEPAGE);  // advisory: failure only costs speed
    if (size_ > 0) std::memcpy(fresh, data_.get(), size_ * sizeof(float));
    std::memset(reinterpret_cast<char*>(fresh) + size_ * sizeof(float), 0,
                bytes - size_ * sizeof(float));
    data_.reset(fresh);
    capacity_ = capacity;
  }

  void Zero() {
    if (size_ > 0) std::memset(data_.get(), 0, size_ * sizeof(float));
  }

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  size_t bytes() const { return size_ * sizeof(float); }
  bool empty() const { return size_ == 0; }
  float& operator[](size_t i) { return data_[i]; }
  float operator[](size_t i) const { return data_[i]; }
  std::span<float> span() { return {data_.get(), size_}; }
  std::span<const float> span() const { return {data_.get(), size_}; }
  std::span<const uint8_t> byte_span() const {
    return {reinterpret_cast<const uint8_t*>(data_.get()), bytes()};
  }

 private:
  static constexpr size_t kHugePage = size_t{2} << 20;
  static constexpr size_t kHugeThreshold = size_t{4} << 20;

  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float[], Free> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace prefixd::hybrid
