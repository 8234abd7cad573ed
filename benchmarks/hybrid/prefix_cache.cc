#include "prefix_cache.h"

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

#include "prefixd/cluster_client.h"
#include "prefixd/state_blob.h"
#include "prefixd_link.h"

namespace prefixd::hybrid {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The V-store tier for K/V: they are fp32, so only fp32 keeps every bit.
constexpr std::string_view kLosslessTier = "fp32";

constexpr char kManifestMagic[8] = {'P', 'X', 'H', 'Y', 'B', 'M', 'F', '1'};
constexpr uint32_t kManifestVersion = 1;
constexpr size_t kManifestHeader = 8 + 4 + 4 + 8 + 4 + 4;
constexpr size_t kManifestEntry = 4 + 4 + 8 + 8 + 8;

struct ManifestEntry {
  LayerKind kind = LayerKind::kLinear;
  uint64_t bytes = 0;
  LayerDigest digest{};
};

struct Manifest {
  uint64_t n_tokens = 0;
  KvTransport transport = KvTransport::kVStore;
  std::vector<ManifestEntry> layers;
};

template <typename T>
void Put(std::vector<uint8_t>& out, T value) {
  uint8_t bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // little-endian host (checked by the blob codec)
  out.insert(out.end(), bytes, bytes + sizeof(T));
}

template <typename T>
T Get(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

std::vector<uint8_t> EncodeManifest(const Manifest& m) {
  std::vector<uint8_t> out(kManifestMagic, kManifestMagic + 8);
  Put<uint32_t>(out, kManifestVersion);
  Put<uint32_t>(out, static_cast<uint32_t>(m.layers.size()));
  Put<uint64_t>(out, m.n_tokens);
  Put<uint32_t>(out, m.transport == KvTransport::kVStore ? 0 : 1);
  Put<uint32_t>(out, 0);
  for (const ManifestEntry& e : m.layers) {
    Put<uint32_t>(out, static_cast<uint32_t>(e.kind));
    Put<uint32_t>(out, 0);
    Put<uint64_t>(out, e.bytes);
    Put<uint64_t>(out, e.digest[0]);
    Put<uint64_t>(out, e.digest[1]);
  }
  return out;
}

// The manifest, or the reason it is unusable.
std::optional<Manifest> DecodeManifest(std::span<const uint8_t> blob, std::string* why) {
  if (blob.size() < kManifestHeader || std::memcmp(blob.data(), kManifestMagic, 8) != 0) {
    *why = "the manifest is malformed";
    return std::nullopt;
  }
  const uint8_t* p = blob.data() + 8;
  if (Get<uint32_t>(p) != kManifestVersion) {
    *why = "the manifest has an unknown version";
    return std::nullopt;
  }
  const uint32_t n_layers = Get<uint32_t>(p + 4);
  if (blob.size() != kManifestHeader + uint64_t{n_layers} * kManifestEntry) {
    *why = "the manifest has the wrong length";
    return std::nullopt;
  }
  Manifest m;
  m.n_tokens = Get<uint64_t>(p + 8);
  m.transport = Get<uint32_t>(p + 16) == 0 ? KvTransport::kVStore : KvTransport::kSsm;
  p = blob.data() + kManifestHeader;
  for (uint32_t i = 0; i < n_layers; ++i, p += kManifestEntry) {
    ManifestEntry e;
    const uint32_t kind = Get<uint32_t>(p);
    if (kind > static_cast<uint32_t>(LayerKind::kRwkv7)) {
      *why = "the manifest names an unknown layer kind";
      return std::nullopt;
    }
    e.kind = static_cast<LayerKind>(kind);
    e.bytes = Get<uint64_t>(p + 8);
    e.digest = {Get<uint64_t>(p + 16), Get<uint64_t>(p + 24)};
    m.layers.push_back(e);
  }
  return m;
}

std::span<const uint8_t> Bytes(const FloatBuffer& b) { return b.byte_span(); }

std::string PkSid(std::string_view ns) { return std::string(ns) + "_pk"; }
std::string PvSid(std::string_view ns) { return std::string(ns) + "_pv"; }

// A fetched array must have exactly this fp32 shape; copies it into `dst`.
bool TakeArray(const StateArrayView& a, std::span<const uint32_t> shape, FloatBuffer& dst) {
  if (a.dtype != DType::kFloat32 ||
      !std::equal(a.shape.begin(), a.shape.end(), shape.begin(), shape.end())) {
    return false;
  }
  if (a.bytes.size() != dst.bytes()) return false;
  std::memcpy(dst.data(), a.bytes.data(), a.bytes.size());
  return true;
}

// The leases a fetch holds until it has copied their bytes; what it still holds when it ends
// (a miss, an error) is released then.
class Leases {
 public:
  explicit Leases(ShmClient* shm) : shm_(shm) {}
  ~Leases() { (void)Release(); }
  Leases(const Leases&) = delete;
  Leases& operator=(const Leases&) = delete;

  // Counts `view` in the report, and holds its lease.
  void Hold(const ShmView& view, FetchReport& report) {
    if (view.zeros) {
      report.zero_bytes += view.size;
    } else if (view.lease == 0) {
      report.inline_bytes += view.size;
    } else {
      report.shared_bytes += view.size;
      ++report.shared_views;
      // The pieces of one call share its lease: each id once.
      if (std::find(ids_.begin(), ids_.end(), view.lease) == ids_.end()) ids_.push_back(view.lease);
    }
  }
  Status Release() {
    if (shm_ == nullptr || ids_.empty()) return Status::Ok();
    const std::vector<uint64_t> ids = std::move(ids_);
    ids_.clear();
    return shm_->Release(ids);
  }

 private:
  ShmClient* shm_;
  std::vector<uint64_t> ids_;
};

// V.SHMFETCH of rows [0, n_tokens) of `layer`, each piece copied from the server's arena into
// its place in `dst`; `got` as VFetchRange would answer (values written, or nullopt for an absent
// layer). The pieces' leases end before it returns, once their generations showed the bytes were
// not freed during the copy (a lease that ran out). A Status error is the shared call's own (the
// caller may do it again over the socket).
Status FetchRowsShared(ShmClient& shm, std::string_view sid, uint32_t layer, int64_t n_tokens,
                       FloatBuffer& dst, Leases& leases, FetchReport& report,
                       Result<std::optional<size_t>>* got) {
  std::vector<ShmView> pieces;
  PREFIXD_RETURN_IF_ERROR(
      shm.FetchRows(sid, layer, 0, static_cast<uint64_t>(n_tokens), pieces, /*native=*/false));
  if (pieces.empty()) {
    *got = std::optional<size_t>();
    return Status::Ok();
  }
  uint64_t total = 0;
  for (const ShmView& piece : pieces) {
    leases.Hold(piece, report);
    total += piece.size;
  }
  if (total != dst.bytes()) {
    // What V.FETCH would have said: that many values, not the state's.
    *got = std::optional<size_t>(total / sizeof(float));
    return leases.Release();
  }
  auto* out = reinterpret_cast<uint8_t*>(dst.data());
  for (const ShmView& piece : pieces) {
    if (piece.zeros) {
      std::memset(out, 0, piece.size);
    } else {
      std::memcpy(out, piece.data, piece.size);
    }
    out += piece.size;
  }
  for (const ShmView& piece : pieces) {
    if (!shm.Valid(piece)) {
      *got = Status::ServerError("rows were freed while they were copied (the lease ran out)");
      return leases.Release();
    }
  }
  *got = std::optional<size_t>(dst.size());
  return leases.Release();
}

}  // namespace

std::string_view KvTransportName(KvTransport transport) {
  return transport == KvTransport::kVStore ? "vstore" : "ssm";
}

std::string PrefixDigestName(const ModelConfig& config, std::string_view weights_identity,
                             std::span<const int32_t> prefix_tokens) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  const std::string canonical = config.Canonical();
  const uint64_t sizes[3] = {canonical.size(), weights_identity.size(), prefix_tokens.size()};
  XXH3_128bits_update(st, sizes, sizeof(sizes));
  XXH3_128bits_update(st, canonical.data(), canonical.size());
  XXH3_128bits_update(st, weights_identity.data(), weights_identity.size());
  XXH3_128bits_update(st, prefix_tokens.data(), prefix_tokens.size_bytes());
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  return "hyb" + DigestHex({h.high64, h.low64});
}

std::string PrefixNamespace(const ModelConfig& config, std::string_view weights_identity,
                            std::span<const int32_t> prefix_tokens) {
  std::string ns = "{";
  ns += PrefixDigestName(config, weights_identity, prefix_tokens);
  ns += '}';
  return ns;
}

HybridPrefixCache::HybridPrefixCache(const ModelConfig& config, PrefixCacheOptions options)
    : config_(config), options_(options) {}

Result<StoreReport> HybridPrefixCache::Store(Client& client, std::string_view ns,
                                             const SequenceState& state) const {
  const ModelConfig& c = config_;
  if (static_cast<int64_t>(state.layers().size()) != c.num_layers()) {
    return Status::InvalidArgument("state does not match the model config");
  }
  if (state.n_tokens() <= 0) return Status::InvalidArgument("nothing to store: empty prefix");
  const auto start = Clock::now();
  const uint32_t n = static_cast<uint32_t>(state.n_tokens());
  const uint32_t kv_heads = static_cast<uint32_t>(c.num_key_value_heads);
  const uint32_t head_dim = static_cast<uint32_t>(c.head_dim);

  Manifest manifest;
  manifest.n_tokens = n;
  manifest.transport = options_.kv;
  std::vector<std::vector<uint8_t>> blobs;
  std::vector<uint32_t> blob_layers;
  StoreReport report;
  if (options_.kv == KvTransport::kVStore && c.num_attention_layers() > 0) {
    PREFIXD_RETURN_IF_ERROR(
        client.KvPrefixRegister(ns, static_cast<uint32_t>(c.kv_dim()), kLosslessTier));
  }
  int64_t rank = 0;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const LayerState& layer = state.layers()[static_cast<size_t>(i)];
    manifest.layers.push_back({layer.kind, layer.bytes(), DigestLayer(layer)});
    report.bytes += manifest.layers.back().bytes;
    if (layer.kind != LayerKind::kFullAttention) {
      std::vector<StateArray> arrays;
      for (const StateArraySpec& a : RecurrentStateArrays(c, layer.kind)) {
        arrays.push_back({DType::kFloat32, a.shape, Bytes(SlotBuffer(layer, a.slot))});
      }
      PREFIXD_ASSIGN_OR_RETURN(std::vector<uint8_t> blob, EncodeStateBlob(arrays));
      blobs.push_back(std::move(blob));
      blob_layers.push_back(static_cast<uint32_t>(i));
      continue;
    }
    if (layer.k.size() != static_cast<size_t>(n) * c.kv_dim() || layer.v.size() != layer.k.size()) {
      return Status::Internal("attention layer " + std::to_string(i) + " does not hold n rows");
    }
    if (options_.kv == KvTransport::kSsm) {
      const StateArray arrays[2] = {{DType::kFloat32, {1, n, kv_heads, head_dim}, Bytes(layer.k)},
                                    {DType::kFloat32, {1, n, kv_heads, head_dim}, Bytes(layer.v)}};
      PREFIXD_ASSIGN_OR_RETURN(std::vector<uint8_t> blob, EncodeStateBlob(arrays));
      blobs.push_back(std::move(blob));
      blob_layers.push_back(static_cast<uint32_t>(i));
    } else {
      for (const auto& [sid, rows] :
           {std::pair{PkSid(ns), layer.k.span()}, std::pair{PvSid(ns), layer.v.span()}}) {
        PREFIXD_RETURN_IF_ERROR(client.VStoreBatch(sid, static_cast<uint32_t>(rank), 0, n, rows));
      }
    }
    ++rank;
  }
  blobs.push_back(EncodeManifest(manifest));
  blob_layers.push_back(manifest_layer());
  std::vector<LayerBlob> entries;
  for (size_t i = 0; i < blobs.size(); ++i) entries.push_back({blob_layers[i], blobs[i]});
  PREFIXD_RETURN_IF_ERROR(client.MStore(ns, entries));
  report.ms = MsSince(start);
  return report;
}

Result<FetchReport> HybridPrefixCache::Fetch(Client& client, std::string_view ns, int64_t n_tokens,
                                             SequenceState* state, ShmClient* shm) const {
  auto result = FetchImpl(client, shm, ns, n_tokens, state);
  if (!result.ok() || !result->hit) state->Clear();
  return result;
}

Result<FetchReport> HybridPrefixCache::FetchImpl(Client& client, ShmClient* shm,
                                                 std::string_view ns, int64_t n_tokens,
                                                 SequenceState* state) const {
  const ModelConfig& c = config_;
  FetchReport report;
  report.shared = shm != nullptr;
  auto miss = [&](std::string why) {
    report.hit = false;
    report.miss_reason = std::move(why);
    return report;
  };
  if (static_cast<int64_t>(state->layers().size()) != c.num_layers()) {
    return Status::InvalidArgument("state does not match the model config");
  }
  const bool kv_in_ssm = options_.kv == KvTransport::kSsm;
  std::vector<uint32_t> layers;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    if (c.layers[static_cast<size_t>(i)] != LayerKind::kFullAttention || kv_in_ssm) {
      layers.push_back(static_cast<uint32_t>(i));
    }
  }
  layers.push_back(manifest_layer());

  // The layer blobs: views into the server's arenas (or bytes it answered inline), or copies
  // read from the socket. `blobs[b]` is empty when layer b is absent.
  Leases leases(shm);
  std::vector<ShmView> views;
  std::vector<std::optional<Blob>> copies;
  std::vector<std::span<const uint8_t>> blobs;
  std::vector<bool> present;
  auto t = Clock::now();
  bool fetched = false;
  if (shm != nullptr) {
    Status st = shm->FetchLayers(ns, layers, views);
    if (st.ok()) {
      fetched = true;
      for (const ShmView& view : views) {
        present.push_back(view.data != nullptr);
        blobs.push_back(view.bytes());
        leases.Hold(view, report);
      }
    } else if (!IsRefusedSharedCall(st)) {
      return st;
    } else {
      ++report.socket_fallbacks;
    }
  }
  if (!fetched) {
    PREFIXD_ASSIGN_OR_RETURN(copies, client.MFetch(ns, layers));
    for (const std::optional<Blob>& blob : copies) {
      present.push_back(blob.has_value());
      blobs.push_back(blob.has_value() ? std::span<const uint8_t>(*blob)
                                       : std::span<const uint8_t>());
    }
  }
  report.fetch_ms += MsSince(t);

  t = Clock::now();
  if (!present.back()) return miss("no manifest: the prefix is not stored");
  std::string why;
  std::optional<Manifest> manifest = DecodeManifest(blobs.back(), &why);
  if (!manifest.has_value()) return miss(why);
  if (static_cast<int64_t>(manifest->layers.size()) != c.num_layers() ||
      manifest->n_tokens != static_cast<uint64_t>(n_tokens) || manifest->transport != options_.kv) {
    return miss("the manifest describes a different prefix, model or transport");
  }
  state->ResizeTokens(n_tokens);
  const uint32_t n = static_cast<uint32_t>(n_tokens);
  const uint32_t kv_heads = static_cast<uint32_t>(c.num_key_value_heads);
  const uint32_t head_dim = static_cast<uint32_t>(c.head_dim);
  for (size_t b = 0; b + 1 < blobs.size(); ++b) {
    const uint32_t i = layers[b];
    if (!present[b]) return miss("layer " + std::to_string(i) + " is absent");
    LayerState& layer = state->layers()[i];
    const std::vector<StateArraySpec> specs = RecurrentStateArrays(c, layer.kind);
    const size_t expected = layer.kind == LayerKind::kFullAttention ? 2 : specs.size();
    // The arrays point into the blob (the arena, on the shared path): TakeArray is the one copy.
    auto arrays = DecodeStateBlob(blobs[b]);
    if (!arrays.ok() || arrays->size() != expected) {
      return miss("layer " + std::to_string(i) + " is not a " + std::to_string(expected) +
                  "-array state blob");
    }
    bool ok = true;
    if (layer.kind != LayerKind::kFullAttention) {
      for (size_t a = 0; a < specs.size() && ok; ++a) {
        ok = TakeArray((*arrays)[a], specs[a].shape, SlotBuffer(layer, specs[a].slot));
      }
    } else {
      const uint32_t kv_shape[4] = {1, n, kv_heads, head_dim};
      ok = TakeArray((*arrays)[0], kv_shape, layer.k) && TakeArray((*arrays)[1], kv_shape, layer.v);
    }
    if (!ok) return miss("layer " + std::to_string(i) + " has the wrong shapes");
  }
  // A view whose generation moved on was freed (its lease ran out) while it was copied: what
  // was copied cannot be trusted.
  for (size_t b = 0; b < views.size(); ++b) {
    if (views[b].lease != 0 && !shm->Valid(views[b])) {
      return miss("layer " + std::to_string(layers[b]) + " was freed while it was copied");
    }
  }
  PREFIXD_RETURN_IF_ERROR(leases.Release());
  views.clear();
  copies.clear();
  report.hydrate_ms += MsSince(t);

  if (!kv_in_ssm) {
    // Rows land straight in the state's K and V buffers: nothing to hydrate but the check.
    uint32_t rank = 0;
    t = Clock::now();
    for (int64_t i = 0; i < c.num_layers(); ++i) {
      LayerState& layer = state->layers()[static_cast<size_t>(i)];
      if (layer.kind != LayerKind::kFullAttention) continue;
      for (auto [sid, dst] : {std::pair{PkSid(ns), &layer.k}, std::pair{PvSid(ns), &layer.v}}) {
        const std::string where = sid + " layer " + std::to_string(rank);
        Result<std::optional<size_t>> got = std::optional<size_t>();
        bool done = false;
        if (shm != nullptr) {
          Status st = FetchRowsShared(*shm, sid, rank, n_tokens, *dst, leases, report, &got);
          if (st.ok()) {
            done = true;
          } else if (!IsRefusedSharedCall(st)) {
            return st;
          } else {
            ++report.socket_fallbacks;
          }
        }
        if (!done) {
          got = client.VFetchRange(sid, rank, 0, static_cast<uint64_t>(n_tokens), dst->span());
        }
        if (!got.ok()) {
          // An error reply (no such session, ...) is a miss; an unknown command, a cluster
          // redirect or a broken connection is an error the caller should see (and follow).
          if (got.status().code() != StatusCode::kServerError || IsUnknownCommand(got.status()) ||
              IsClusterRedirect(got.status())) {
            return got.status();
          }
          return miss(where + ": " + got.status().message());
        }
        if (!got->has_value()) return miss(where + " is absent");
        if (**got != dst->size()) {
          return miss(where + " returned " + std::to_string(**got) + " values, expected " +
                      std::to_string(dst->size()));
        }
      }
      ++rank;
    }
    report.fetch_ms += MsSince(t);
  }

  t = Clock::now();
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const LayerState& layer = state->layers()[static_cast<size_t>(i)];
    const ManifestEntry& e = manifest->layers[static_cast<size_t>(i)];
    const uint64_t bytes = layer.bytes();
    if (e.kind != layer.kind || e.bytes != bytes) {
      return miss("layer " + std::to_string(i) + " does not match the manifest");
    }
    report.bytes += bytes;
    if (!options_.verify_digests) continue;
    const LayerDigest digest = DigestLayer(layer);
    if (digest != e.digest) {
      return miss("layer " + std::to_string(i) + " fails its digest check");
    }
    report.layer_digests.push_back(DigestHex(digest));
  }
  report.hydrate_ms += MsSince(t);
  report.hit = true;
  return report;
}

Status HybridPrefixCache::Drop(Client& client, std::string_view ns) const {
  PREFIXD_RETURN_IF_ERROR(client.Drop(ns));
  if (options_.kv == KvTransport::kVStore && config_.num_attention_layers() > 0) {
    const std::string_view namespaces[1] = {ns};
    auto dropped = client.KvPrefixDrop(namespaces);
    if (!dropped.ok()) return dropped.status();
  }
  return Status::Ok();
}

Result<bool> ServerHasVStore(Client& client) {
  for (std::string_view name : {"V.STOREBATCH", "V.FETCH", "KV.PREFIX.REGISTER"}) {
    PREFIXD_ASSIGN_OR_RETURN(Reply reply, client.Command({"COMMAND", "INFO", name}));
    if (reply.type != Reply::Type::kArray || reply.elements.empty() || reply.elements[0].is_nil()) {
      return false;
    }
  }
  return true;
}

}  // namespace prefixd::hybrid
