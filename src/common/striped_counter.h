// StripedCounter: a statistic that many threads bump on every request without sharing a cache
// line; readers (INFO) sum the stripes. Any thread may Add, Sum or Reset.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace prefixd {

class StripedCounter {
 public:
  void Add(uint64_t n = 1) { cells_[Stripe()].value.fetch_add(n, std::memory_order_relaxed); }
  uint64_t Sum() const {
    uint64_t total = 0;
    for (const Cell& c : cells_) total += c.value.load(std::memory_order_relaxed);
    return total;
  }
  void Reset() {
    for (Cell& c : cells_) c.value.store(0, std::memory_order_relaxed);
  }

 private:
  static constexpr size_t kStripes = 16;
  struct alignas(64) Cell {
    std::atomic<uint64_t> value{0};
  };
  // Each thread gets its own stripe on first use, round robin.
  static size_t Stripe() {
    static std::atomic<size_t> next{0};
    thread_local size_t mine = next.fetch_add(1, std::memory_order_relaxed) % kStripes;
    return mine;
  }
  std::array<Cell, kStripes> cells_;
};

}  // namespace prefixd
