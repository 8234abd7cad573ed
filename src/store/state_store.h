// StateStore: the sharded keyspace of recurrent-state blobs, keyed by (session id, layer).
// Every layer of a session lives in one shard, so multi-layer stores and fetches are atomic under
// that shard's lock. Thread-safe: any io thread may call any method; locks are held only to swap
// or copy a Bytes handle, never across I/O. Knows no RESP.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/bytes.h"

namespace prefixd::store {

struct LayerSize {
  uint32_t layer;
  uint64_t size;
};

struct StoreStats {
  uint64_t sessions = 0;
  uint64_t entries = 0;
  uint64_t payload_bytes = 0;
  // Estimated bookkeeping bytes beyond the payload (keys, map nodes, buffer padding).
  uint64_t overhead_bytes = 0;
};

class StateStore {
 public:
  explicit StateStore(size_t shard_count = 64);
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  void Put(std::string_view sid, uint32_t layer, Bytes value);
  // All layers become visible at once: a concurrent GetMany sees all of them or none.
  void PutMany(std::string_view sid, std::vector<std::pair<uint32_t, Bytes>> layers);

  std::optional<Bytes> Get(std::string_view sid, uint32_t layer) const;
  // A consistent snapshot of the requested layers (one shard lock for all of them).
  std::vector<std::optional<Bytes>> GetMany(std::string_view sid,
                                            std::span<const uint32_t> layers) const;

  // Returns the number of entries removed.
  size_t Drop(std::string_view sid, uint32_t layer);
  size_t DropSession(std::string_view sid);
  void Clear();

  std::vector<LayerSize> Layers(std::string_view sid) const;
  StoreStats Stats() const;

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const;
  };
  struct Session {
    std::map<uint32_t, Bytes> layers;
  };
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<std::string, Session, StringHash, std::equal_to<>> sessions;
  };

  Shard& ShardFor(std::string_view sid) const;
  // Accounting deltas; callers hold the shard lock, the counters are global atomics.
  void Account(std::string_view sid, const Bytes* removed, const Bytes* added);

  std::unique_ptr<Shard[]> shards_;
  size_t shard_count_;
  std::atomic<int64_t> sessions_{0};
  std::atomic<int64_t> entries_{0};
  std::atomic<int64_t> payload_bytes_{0};
  std::atomic<int64_t> overhead_bytes_{0};
};

}  // namespace prefixd::store
