// StateStore: the sharded keyspace of recurrent-state blobs, keyed by (session id, layer).
// Every layer of a session lives in one shard, so multi-layer stores and fetches are atomic under
// that shard's lock. Thread-safe: any io thread may call any method; locks are held only to swap
// or copy a Bytes handle, never across I/O. Knows no RESP.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
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

  // `under_lock`, when given, runs while the change is applied under the shard lock: the
  // durability log appends its record there, so log order matches the order of changes.
  using Hook = std::function<void()>;

  void Put(std::string_view sid, uint32_t layer, Bytes value, const Hook& under_lock = {});
  // All layers become visible at once: a concurrent GetMany sees all of them or none.
  void PutMany(std::string_view sid, std::vector<std::pair<uint32_t, Bytes>> layers,
               const Hook& under_lock = {});

  std::optional<Bytes> Get(std::string_view sid, uint32_t layer) const;
  // A consistent snapshot of the requested layers (one shard lock for all of them).
  std::vector<std::optional<Bytes>> GetMany(std::string_view sid,
                                            std::span<const uint32_t> layers) const;

  // Return the number of entries removed. The hook runs even when nothing was there, so the
  // log records the request as the client made it.
  size_t Drop(std::string_view sid, uint32_t layer, const Hook& under_lock = {});
  size_t DropSession(std::string_view sid, const Hook& under_lock = {});
  // Clears one shard at a time. A caller that needs the clear ordered against every other
  // change (FLUSHALL and its log record) must keep writers out itself.
  void Clear();

  // Calls `visit` for each session with handles to its layers, copied one shard at a time under
  // that shard's lock and visited after it is released (snapshots hold no lock while writing).
  void ForEachSession(
      const std::function<void(const std::string& sid,
                               const std::vector<std::pair<uint32_t, Bytes>>& layers)>& visit)
      const;

  std::vector<LayerSize> Layers(std::string_view sid) const;
  bool Contains(std::string_view sid) const;
  // Payload plus bookkeeping bytes of one session (MEMORY USAGE); 0 when it does not exist.
  uint64_t SessionBytes(std::string_view sid) const;
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
  void Account(const Bytes* removed, const Bytes* added);
  void ForgetSession(std::string_view sid);

  std::unique_ptr<Shard[]> shards_;
  size_t shard_count_;
  std::atomic<int64_t> sessions_{0};
  std::atomic<int64_t> entries_{0};
  std::atomic<int64_t> payload_bytes_{0};
  std::atomic<int64_t> overhead_bytes_{0};
};

}  // namespace prefixd::store
