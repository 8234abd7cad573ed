// HybridPrefixCache: stores and fetches the whole prefix state of a hybrid or recurrent model
// (Gated DeltaNet and attention layers, or Mamba-2 or RWKV-7 layers) in prefixd, for any C++
// inference server that holds its state as a SequenceState. Stateless apart from its settings: one
// instance may serve many threads, each with its own prefixd::Client.
//
// Layout in the server, for a namespace `ns` (PrefixNamespace):
//   SSM.PREFIX  ns, layer i (a recurrent layer): v1 state blob, the arrays of
//                 RecurrentStateArrays (model.h), all fp32:
//                 GDN      conv [1, K−1, conv_dim], recurrent [1, Hv, Dv, Dk];
//                 Mamba-2  conv [1, K−1, conv_dim], ssm [1, H, P, N];
//                 RWKV-7   time-mix shift [1, 1, hidden], wkv [1, H, N, N] (value-major),
//                          channel-mix shift [1, 1, hidden];
//   V-store     KV.PREFIX.REGISTER ns <kv_dim> fp32 → sessions ns_pk / ns_pv (one node of a
//                 cluster: ns is a hash tag, PrefixNamespace), where layer r (the
//                 rank of the attention layer among attention layers) holds n_tokens fp32 rows
//                 of kv_dim: K after k_norm + RoPE, and V;
//               or, with KvTransport::kSsm, SSM.PREFIX ns, layer i: a v1 blob with
//                 K [1, n, Hkv, D] and V [1, n, Hkv, D] fp32;
//   SSM.PREFIX  ns, layer num_layers: the manifest (below), written last, in the same MSTORE as
//                 the GDN layers, so its presence means every part was stored.
// Manifest, little-endian: "PXHYBMF1", u32 version 1, u32 num_layers, u64 n_tokens,
//   u32 transport (0 V-store, 1 SSM), u32 0, then per layer u32 kind (0 GDN, 1 attention,
//   2 Mamba-2, 3 RWKV-7), u32 0,
//   u64 payload bytes, u64 digest high, u64 digest low (XXH3-128 as DigestLayer).
//
// Same-host fetches: given a ShmClient (a PrefixdLink over the unix socket, where SHM.HELLO was
// accepted), Fetch reads the recurrent layers with SSM.PREFIX.SHMFETCH and the attention rows with
// V.SHMFETCH, and copies each piece from the server's arena straight into the state's buffers (one
// copy, no intermediate buffer), checks that the leased bytes kept their generation through the
// copy, and releases the leases (one per shared call, released per V-store layer: shm-max-leases
// counts calls, so a prefix of any length holds one at a time).
// A shared call the server refuses (a lease cap, ...) is done again over the socket.
//
// A fetch is all or nothing: a missing manifest or layer, a length or shape mismatch, or a digest
// that does not match (the V-store zero-fills rows it never stored) is a miss, and the state is
// left empty for a cold prefill. Half a state is never used.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "config.h"
#include "model.h"
#include "prefixd/client.h"
#include "prefixd/shm.h"
#include "prefixd/status.h"

namespace prefixd::hybrid {

enum class KvTransport : uint8_t { kVStore, kSsm };

// "vstore" / "ssm".
std::string_view KvTransportName(KvTransport transport);

struct PrefixCacheOptions {
  KvTransport kv = KvTransport::kVStore;
  // Check every fetched layer against the manifest's digest (recommended: it is what catches
  // V-store rows that were never stored; costs one hashing pass over the state).
  bool verify_digests = true;
};

struct StoreReport {
  uint64_t bytes = 0;  // state payload
  double ms = 0;       // wall time of all commands
};

struct FetchReport {
  bool hit = false;
  std::string miss_reason;                 // why not, when !hit
  uint64_t bytes = 0;                      // state payload hydrated
  double fetch_ms = 0;                     // on the wire: MFETCH and V.FETCH
  double hydrate_ms = 0;                   // decoding, copying into the state, digest checks
  std::vector<std::string> layer_digests;  // per layer, DigestHex, when hit and verified
  // The same-host path (a ShmClient was given): what came through it.
  bool shared = false;            // the fetch went through the ShmClient
  uint64_t shared_bytes = 0;      // read in place from the server's arenas, under a lease
  uint64_t shared_views = 0;      // leased views (one per layer blob or row piece)
  uint64_t inline_bytes = 0;      // answered as bytes by a shared command (below the pool's size)
  uint64_t zero_bytes = 0;        // runs of zero rows, which nothing carried
  uint64_t socket_fallbacks = 0;  // shared calls the server refused, done again over the socket
};

// "hyb" + 32 hex digits of XXH3-128 over (config.Canonical(), weights identity, the tokens).
std::string PrefixDigestName(const ModelConfig& config, std::string_view weights_identity,
                             std::span<const int32_t> prefix_tokens);
// "{" + PrefixDigestName + "}": the braces are a Redis Cluster hash tag, so that `<ns>_pk` and
// `<ns>_pv` hash to ns's slot and live on its node (docs/cluster.md).
std::string PrefixNamespace(const ModelConfig& config, std::string_view weights_identity,
                            std::span<const int32_t> prefix_tokens);

class HybridPrefixCache {
 public:
  HybridPrefixCache(const ModelConfig& config, PrefixCacheOptions options);

  // Stores `state` (the state after exactly the prefix) under `ns`, replacing what was there.
  Result<StoreReport> Store(Client& client, std::string_view ns, const SequenceState& state) const;

  // Fetches the prefix of `n_tokens` tokens into `state` (any previous content is replaced). On a
  // miss or partial hit the report says why and `state` is cleared. A Status error means the
  // server could not be asked (connection, unknown command, a cluster redirect to follow); the
  // state is cleared then too. With `shm` (over the same server's unix socket) the bytes are read
  // through the shared arenas; `client` still answers what has no shared form.
  Result<FetchReport> Fetch(Client& client, std::string_view ns, int64_t n_tokens,
                            SequenceState* state, ShmClient* shm = nullptr) const;

  // Removes everything stored under `ns`.
  Status Drop(Client& client, std::string_view ns) const;

  uint32_t manifest_layer() const { return static_cast<uint32_t>(config_.num_layers()); }

 private:
  Result<FetchReport> FetchImpl(Client& client, ShmClient* shm, std::string_view ns,
                                int64_t n_tokens, SequenceState* state) const;

  ModelConfig config_;
  PrefixCacheOptions options_;
};

// True when the server at `client` knows the V-store commands this cache needs.
Result<bool> ServerHasVStore(Client& client);

}  // namespace prefixd::hybrid
