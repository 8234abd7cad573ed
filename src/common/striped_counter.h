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
  // The first kStripes - 1 threads that count (in any counter) own a stripe each and bump it
  // with a plain load and store: a locked add costs a request several times more, and nobody
  // else writes that stripe. Later threads share the last stripe with a locked add.
  void Add(uint64_t n = 1) {
    const Slot slot = MySlot();
    std::atomic<uint64_t>& cell = cells_[slot.stripe].value;
    if (slot.owned) {
      cell.store(cell.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    } else {
      cell.fetch_add(n, std::memory_order_relaxed);
    }
  }
  uint64_t Sum() const {
    // Read before the stripes: they are then at least where the reset that set it saw them.
    const uint64_t zero = zero_.load(std::memory_order_acquire);
    return Total() - zero;
  }
  // Starts the count again from here. The stripes keep their owners' running totals (a reset
  // that wrote them would race with an owner's store and could be undone by it); the reset
  // remembers where zero is instead.
  void Reset() { zero_.store(Total(), std::memory_order_release); }

 private:
  static constexpr size_t kStripes = 16;
  struct alignas(64) Cell {
    std::atomic<uint64_t> value{0};
  };
  struct Slot {
    size_t stripe;
    bool owned;
  };
  static Slot MySlot() {
    static std::atomic<size_t> next{0};
    thread_local const Slot mine = [] {
      const size_t n = next.fetch_add(1, std::memory_order_relaxed);
      return n < kStripes - 1 ? Slot{n, true} : Slot{kStripes - 1, false};
    }();
    return mine;
  }
  uint64_t Total() const {
    uint64_t total = 0;
    for (const Cell& c : cells_) total += c.value.load(std::memory_order_relaxed);
    return total;
  }
  std::array<Cell, kStripes> cells_;
  std::atomic<uint64_t> zero_{0};
};

}  // namespace prefixd
