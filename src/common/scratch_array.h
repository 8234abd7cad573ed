// ScratchArray: a command's short-lived array of n elements, held on the stack when n is at most
// N and on the heap otherwise. A multi-key command (MSET of ten keys) needs several such arrays,
// and a heap allocation and free for each cost it more than its keyspace lookups. One thread.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <vector>

namespace prefixd {

template <typename T, size_t N>
class ScratchArray {
 public:
  // n value-initialised elements.
  explicit ScratchArray(size_t n) : size_(n) {
    if (n > N) heap_.resize(n);
  }
  ScratchArray(const ScratchArray&) = delete;
  ScratchArray& operator=(const ScratchArray&) = delete;

  std::span<T> span() { return size_ <= N ? std::span<T>(inline_.data(), size_) : heap_; }
  T& operator[](size_t i) { return span()[i]; }
  size_t size() const { return size_; }

 private:
  std::array<T, N> inline_{};
  std::vector<T> heap_;
  size_t size_;
};

}  // namespace prefixd
