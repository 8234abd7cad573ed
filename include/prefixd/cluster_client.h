// prefixd::ClusterClient: a blocking client for a Redis Cluster of prefixd (or Redis) nodes. It
// owns the slot map, read with CLUSTER SLOTS, and one prefixd::Client per node, connected the
// first time a call needs that node. Use it from one thread at a time, like Client: it may be
// moved between threads, never shared without a lock.
//
// Routing: a call names its key; the key's slot is CRC16-XMODEM of the key (or of its hash tag,
// the text between the first '{' and the next '}', when that is not empty) mod 16384, and the
// call goes to the node the map names for that slot. Keys that must live on one node share a
// hash tag: KV.PREFIX.REGISTER <ns> creates <ns>_pk and <ns>_pv, which land with <ns> only when
// the namespace is named `{ns}` (so `{ns}_pk` hashes like `{ns}`); likewise a prefix-index
// namespace and everything a caller keys by it.
//
// Answers that send a call elsewhere, each followed by another try of the same call:
//   -MOVED <slot> <host>:<port>  the slot moved for good: the map is refreshed (CLUSTER SLOTS)
//                                and the slot set to the named node;
//   -ASK <slot> <host>:<port>    the slot is being migrated: ASKING, then the call, go to the
//                                named node once; the map is unchanged;
//   -TRYAGAIN                    a multi-key call during a migration: a short wait;
//   -CLUSTERDOWN                 the map is refreshed after a short wait;
//   a node that stops answering  (I/O error, timeout, closed connection): the map is refreshed
//                                from any other known node, and the node is reconnected when
//                                the map still names it.
// After ClusterOptions::max_retries further tries the last error is returned, its code kept and
// its text prefixed "cluster: slot N: gave up after K tries: ".
//
// WithKey runs its function again from the start on each try, so the function must be safe to
// repeat (a store that replaces, a read). ASKING covers exactly one command, as in Redis: a
// function that sends several commands for a slot in mid-migration gets the first through the
// ASK and may be redirected for the rest; single commands (Command and the wrappers below) are
// exact.
//
// Where things are: src/client/cluster_client.cc (the map, the nodes, the redirects).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "prefixd/client.h"
#include "prefixd/status.h"

namespace prefixd {

struct ClusterOptions {
  // How each node's connection is made.
  ClientOptions client;
  // Sent (AUTH) on every node connection when set; username empty: the default user.
  std::optional<std::string> username;
  std::optional<std::string> password;
  // Further tries of one call after a redirect or a lost node; then its last error.
  int max_retries = 5;
};

// True for the error replies that name another node or ask for another try: MOVED, ASK,
// TRYAGAIN, CLUSTERDOWN. Code that turns server errors into something else (a cache miss)
// should let these through, so that WithKey can follow them.
bool IsClusterRedirect(const Status& status);

namespace cluster_internal {
inline const Status& StatusOf(const Status& status) { return status; }
template <typename T>
const Status& StatusOf(const Result<T>& result) {
  return result.status();
}
template <typename T>
inline constexpr bool kIsResult = false;
template <typename T>
inline constexpr bool kIsResult<Result<T>> = true;
}  // namespace cluster_internal

class ClusterClient {
 public:
  // Connects to the first seed ("host:port", or "[v6 address]:port") that answers CLUSTER SLOTS
  // and reads the map from it. Fails with each seed's error when none does (a node with cluster
  // support disabled answers "ERR This instance has cluster support disabled").
  static Result<ClusterClient> Connect(std::span<const std::string> seeds,
                                       const ClusterOptions& options = {});
  static Result<ClusterClient> Connect(std::string_view seed, const ClusterOptions& options = {});

  ClusterClient(ClusterClient&&) noexcept;
  ClusterClient& operator=(ClusterClient&&) noexcept;
  ClusterClient(const ClusterClient&) = delete;
  ClusterClient& operator=(const ClusterClient&) = delete;
  ~ClusterClient();

  // The Redis Cluster slot of `key` (0..16383). Pure; any thread.
  static uint16_t SlotOf(std::string_view key);

  // Calls f(Client&) on the node serving `key`'s slot and returns its result, trying again on
  // another node as the header's first comment says. `f` returns Status or Result<T>; it must
  // not keep the Client& beyond the call.
  template <typename F>
  auto WithKey(std::string_view key, F&& f) -> std::invoke_result_t<F&, Client&>;

  // Any command whose keys all hash to `key`'s slot (the caller names the key: this client does
  // not parse commands).
  Result<Reply> Command(std::string_view key, const std::vector<std::string_view>& argv);

  // --- SSM.PREFIX.*, routed by the session id (Client's calls of the same names). ---
  Status Store(std::string_view sid, uint32_t layer, std::span<const uint8_t> blob);
  Status Store(std::string_view sid, uint32_t layer, std::string_view blob);
  Result<std::optional<Blob>> Fetch(std::string_view sid, uint32_t layer);
  Result<std::optional<size_t>> FetchInto(std::string_view sid, uint32_t layer,
                                          std::span<uint8_t> out,
                                          size_t chunk_bytes = kDefaultFetchChunkBytes,
                                          int depth = kDefaultFetchDepth);
  Status MStore(std::string_view sid, std::span<const LayerBlob> layers);
  Result<std::vector<std::optional<Blob>>> MFetch(std::string_view sid,
                                                  std::span<const uint32_t> layers);
  Result<std::vector<LayerInfo>> Layers(std::string_view sid);
  Status Drop(std::string_view sid);
  Status Drop(std::string_view sid, uint32_t layer);

  // Reads the map again (CLUSTER SLOTS) from the first known node that answers.
  Status RefreshSlots();
  // "host:port" of the node the map names for `key`'s slot, or empty when none does. No I/O.
  std::string NodeOf(std::string_view key) const;
  // Nodes known: the seeds and every node the map has named.
  size_t node_count() const;

 private:
  struct State;

  // One call's progress through its tries.
  struct Try {
    explicit Try(uint16_t s) : slot(s) {}
    uint16_t slot;
    int tries = 0;
    size_t node = 0;                 // the node of the current try
    std::optional<size_t> ask_node;  // after ASK: where the next try goes, preceded by ASKING
    bool final = false;              // the error needs no further try (no node serves the slot)
    Status gave_up;                  // set when the tries ran out
  };

  explicit ClusterClient(std::unique_ptr<State> state);

  // The node for this try, connected (and sent ASKING after an ASK).
  Result<Client*> BeginTry(Try& t);
  // Follows `status` (the try's outcome): true when the call should be tried again.
  bool EndTry(Try& t, const Status& status);

  std::unique_ptr<State> state_;
};

template <typename F>
auto ClusterClient::WithKey(std::string_view key, F&& f) -> std::invoke_result_t<F&, Client&> {
  using R = std::invoke_result_t<F&, Client&>;
  static_assert(std::is_same_v<R, Status> || cluster_internal::kIsResult<R>,
                "WithKey's function returns Status or Result<T>");
  Try t(SlotOf(key));
  for (;;) {
    Result<Client*> node = BeginTry(t);
    if (!node.ok()) {
      if (EndTry(t, node.status())) continue;
      return t.gave_up.ok() ? R(std::move(node).status()) : R(t.gave_up);
    }
    R result = std::invoke(f, **node);
    if (EndTry(t, cluster_internal::StatusOf(result))) continue;
    if (!t.gave_up.ok()) return R(t.gave_up);
    return result;
  }
}

}  // namespace prefixd
