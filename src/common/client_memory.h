// Client memory for the budget: the bytes client connections hold that no store counts (input
// buffers, arguments being read, reply bytes copied for sending), summed over every connection,
// so maxmemory's check counts them as Redis counts client buffers in used_memory. A value sent
// by reference is the store's and is not counted twice. Each connection's thread adds its own
// changes; any thread reads.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace prefixd::memory {

inline std::atomic<int64_t> client_bytes_counted{0};

inline void AddClientBytes(int64_t delta) {
  client_bytes_counted.fetch_add(delta, std::memory_order_relaxed);
}

inline uint64_t ClientBytes() {
  return static_cast<uint64_t>(
      std::max<int64_t>(0, client_bytes_counted.load(std::memory_order_relaxed)));
}

}  // namespace prefixd::memory
