#include "chat.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "chat_baselines.h"
#include "prefix_cache.h"
#include "prefixd/state_blob.h"
#include "report.h"

namespace prefixd::hybrid {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::vector<uint32_t> AsU32(std::span<const int32_t> tokens) {
  return {tokens.begin(), tokens.end()};
}

// `n` floats of `buf` from float `from`, as bytes to write.
std::span<uint8_t> WritableBytes(FloatBuffer& buf, size_t from, size_t n) {
  return {reinterpret_cast<uint8_t*>(buf.data() + from), n * sizeof(float)};
}

// Copies the pieces of a shared call, joined, into `to`, one place after the other, each filled
// exactly. False (nothing promised about `to`) when the pieces' total is not the places'.
bool CopyPieces(std::span<const ShmView> pieces, std::initializer_list<std::span<uint8_t>> to) {
  size_t total = 0, room = 0;
  for (const ShmView& p : pieces) total += p.size;
  for (std::span<uint8_t> place : to) room += place.size();
  if (total != room) return false;
  auto place = to.begin();
  size_t at = 0;  // bytes written into *place
  for (const ShmView& p : pieces) {
    size_t done = 0;
    while (done < p.size) {
      while (at == place->size()) ++place, at = 0;
      const size_t n = std::min(p.size - done, place->size() - at);
      std::memcpy(place->data() + at, p.data + done, n);
      done += n;
      at += n;
    }
  }
  return true;
}

// The SHM lease of the pieces one shared call answered (one per call: the pieces share it),
// counted in `path` and released when the copy is done, or when the hydration gives up.
class PieceLeases {
 public:
  PieceLeases(ShmClient& shm, std::span<const ShmView> pieces, ChatFetchPath& path) : shm_(shm) {
    ++path.shared_calls;
    for (const ShmView& p : pieces) {
      if (p.lease == 0) {
        path.inline_bytes += p.size;
        continue;
      }
      path.shared_bytes += p.size;
      ++path.shared_views;
      // The pieces of one call share its lease: each id once.
      if (std::find(ids_.begin(), ids_.end(), p.lease) == ids_.end()) ids_.push_back(p.lease);
    }
  }
  ~PieceLeases() { (void)Release(); }
  PieceLeases(const PieceLeases&) = delete;
  PieceLeases& operator=(const PieceLeases&) = delete;

  Status Release() {
    const std::vector<uint64_t> ids = std::move(ids_);
    ids_.clear();
    return shm_.Release(ids);
  }

 private:
  ShmClient& shm_;
  std::vector<uint64_t> ids_;
};

// The layers of the namespace: attention layers by rank (ATTN) and the others (RECURRENT).
struct LayerMap {
  std::vector<size_t> attention, recurrent;
  explicit LayerMap(const ModelConfig& c) {
    for (size_t i = 0; i < c.layers.size(); ++i) {
      (c.layers[i] == LayerKind::kFullAttention ? attention : recurrent).push_back(i);
    }
  }
};

// A prompt as the namespace sees it: the tokens as u32 and their chained block hashes.
struct Chain {
  std::vector<uint32_t> u32;
  std::vector<PrefixHash> blocks;
};

// One conversation against one namespace: the prefix index's client side.
class ChatSession {
 public:
  // `block`: the namespace's tokens per block; `kv_only`: the negative control's hydration.
  ChatSession(Backend& backend, PrefixdLink& link, std::string ns, const ChatOptions& options,
              uint32_t block, bool kv_only)
      : backend_(backend),
        config_(backend.config()),
        link_(link),
        ns_(std::move(ns)),
        options_(options),
        block_(block),
        kv_only_(kv_only),
        layers_(config_) {}

  Status Open() {
    PREFIXD_RETURN_IF_ERROR(Call([&](Client& c) { return c.Command({"DEL", ns_}); }).status());
    PrefixShape shape;
    shape.block_size = block_;
    shape.attention_layers = static_cast<uint32_t>(layers_.attention.size());
    shape.kv_dim = static_cast<uint32_t>(config_.kv_dim());
    shape.recurrent_layers = static_cast<uint32_t>(layers_.recurrent.size());
    shape.vquant = "fp32";  // lossless: the bit-exact check needs it
    return Call([&](Client& c) { return c.PrefixNamespaceCreate(ns_, shape); });
  }

  // What a warm start did, up to the first reply token.
  struct Warm {
    int64_t matched = 0;
    uint64_t fetched_bytes = 0;
    double ttft_ms = 0, restore_ms = 0, prefill_ms = 0;
    std::vector<int64_t> cuts;  // the pieces the state was computed in, ending at the prompt's end
    size_t stored_blocks = 0;   // blocks of the chain now in the namespace
    int32_t first = 0;          // the first reply token
  };

  Chain ChainOf(const std::vector<int32_t>& prompt) const {
    Chain chain{AsU32(prompt), {}};
    chain.blocks = PrefixBlockHashes(chain.u32, block_);
    return chain;
  }

  // What this session's fetches took and carried (the transport is the caller's to fill in).
  const ChatFetchPath& path() const { return path_; }

  // Matches the longest cached prefix, hydrates it and prefills the rest, pausing (untimed) to
  // store a checkpoint at each of `checkpoint_at` strictly inside the prefilled part. At least
  // one token is prefilled (its logits give the first reply token), so the chain offered stops
  // before the last token.
  Result<Warm> WarmStart(const std::vector<int32_t>& prompt, const Chain& chain,
                         const std::vector<int64_t>& checkpoint_at) {
    const int64_t len = static_cast<int64_t>(prompt.size());
    std::vector<float> logits(static_cast<size_t>(config_.vocab_size));
    Warm warm;
    const auto start = Clock::now();
    double paused_ms = 0;
    const size_t offered = static_cast<size_t>((len - 1) / block_);
    std::vector<PrefixCandidate> candidates;
    for (int64_t l : stored_lengths_) {
      if (l < len) candidates.push_back({static_cast<uint64_t>(l), Position(chain, l)});
    }
    PREFIXD_ASSIGN_OR_RETURN(PrefixMatchResult m, Call([&](Client& c) {
                               return c.PrefixMatch(ns_, std::span(chain.blocks).first(offered),
                                                    candidates);
                             }));
    warm.matched = static_cast<int64_t>(m.length);
    backend_.Reset(len + options_.reply_tokens + 1);
    if (warm.matched > 0) {
      PREFIXD_ASSIGN_OR_RETURN(warm.fetched_bytes,
                               kv_only_ ? HydrateKvOnly(m, chain.blocks) : Hydrate(m));
      warm.cuts = history_.at(m.position);
    }
    PREFIXD_RETURN_IF_ERROR(backend_.PushState());
    warm.restore_ms = MsSince(start);
    warm.stored_blocks = std::min<size_t>(m.matched_blocks, offered);
    int64_t at = warm.matched;
    for (int64_t point : checkpoint_at) {
      if (point <= at || point >= len) continue;
      PREFIXD_RETURN_IF_ERROR(backend_.Forward(std::span(prompt).subspan(at, point - at), {}));
      const auto pause = Clock::now();
      PREFIXD_RETURN_IF_ERROR(StoreCheckpoint(chain, point, &warm.stored_blocks));
      warm.cuts.push_back(point);
      history_[Position(chain, point)] = warm.cuts;
      paused_ms += MsSince(pause);
      at = point;
    }
    PREFIXD_RETURN_IF_ERROR(backend_.Forward(std::span(prompt).subspan(at), logits));
    warm.first = Argmax(logits);
    warm.ttft_ms = MsSince(start) - paused_ms;
    warm.prefill_ms = warm.ttft_ms - warm.restore_ms;
    warm.cuts.push_back(len);
    return warm;
  }

  // Stores the checkpoint at the prompt's end from the state the model holds now (after exactly
  // the prompt), for later turns.
  Status StoreEnd(const Chain& chain, Warm& warm) {
    const int64_t len = static_cast<int64_t>(chain.u32.size());
    PREFIXD_RETURN_IF_ERROR(StoreCheckpoint(chain, len, &warm.stored_blocks));
    history_[Position(chain, len)] = warm.cuts;
    return {};
  }

  // One turn of `prompt`; `checkpoint_at`: positions inside it (besides its end) where the
  // client stores a checkpoint on the way (the end of a shared system prompt). `at_prompt_end`,
  // if set, sees the state after exactly the prompt.
  Result<ChatRow> Turn(int turn, const std::vector<int32_t>& prompt,
                       const std::vector<int64_t>& checkpoint_at, std::vector<int32_t>* reply,
                       const std::function<Status(const SequenceState&)>& at_prompt_end = {}) {
    const int64_t len = static_cast<int64_t>(prompt.size());
    const Chain chain = ChainOf(prompt);
    ChatRow row;
    row.turn = turn;
    row.prompt_tokens = len;
    std::vector<float> logits(static_cast<size_t>(config_.vocab_size));

    PREFIXD_ASSIGN_OR_RETURN(Warm warm, WarmStart(prompt, chain, checkpoint_at));
    row.warm_ttft_ms = warm.ttft_ms;
    row.restore_ms = warm.restore_ms;
    row.prefill_ms = warm.prefill_ms;
    row.fetched_bytes = warm.fetched_bytes;
    row.matched_tokens = warm.matched;
    row.prefilled_tokens = len - warm.matched;

    // Untimed: the state the model now holds, stored for later turns.
    PREFIXD_RETURN_IF_ERROR(backend_.PullState());
    const std::vector<std::string> warm_digests = DigestState(backend_.host_state());
    PREFIXD_RETURN_IF_ERROR(StoreEnd(chain, warm));
    if (at_prompt_end) PREFIXD_RETURN_IF_ERROR(at_prompt_end(backend_.host_state()));
    PREFIXD_ASSIGN_OR_RETURN(std::vector<int32_t> warm_tokens,
                             GreedyContinue(backend_, warm.first, options_.reply_tokens));

    // Cold: the whole prompt from an empty state, fed in the same pieces as the warm history
    // (the prompt's checkpoints' cuts), which is what makes bit-exactness a fair demand
    // (model.h: prefill(a + b) and prefill(a), prefill(b) agree only up to rounding).
    backend_.Reset(len + options_.reply_tokens + 1);
    const auto cold_start = Clock::now();
    int64_t from = 0;
    for (int64_t cut : warm.cuts) {
      const bool last = cut == len;
      PREFIXD_RETURN_IF_ERROR(
          backend_.Forward(std::span(prompt).subspan(from, cut - from),
                           last ? std::span<float>(logits) : std::span<float>()));
      from = cut;
    }
    const int32_t cold_first = Argmax(logits);
    row.cold_ttft_ms = MsSince(cold_start);
    PREFIXD_RETURN_IF_ERROR(backend_.PullState());
    const std::vector<std::string> cold_digests = DigestState(backend_.host_state());
    PREFIXD_ASSIGN_OR_RETURN(std::vector<int32_t> cold_tokens,
                             GreedyContinue(backend_, cold_first, options_.reply_tokens));
    row.states_bitexact = warm_digests == cold_digests;
    row.total_tokens = static_cast<int>(cold_tokens.size());
    for (size_t i = 0; i < cold_tokens.size() && i < warm_tokens.size(); ++i) {
      row.agreeing_tokens += cold_tokens[i] == warm_tokens[i];
    }
    row.warm_digests = warm_digests;
    row.warm_tokens = warm_tokens;
    *reply = cold_tokens;  // the conversation continues with the correct reply
    return row;
  }

  // The same prompt under the aligned policy (this session's block is the alignment): a state is
  // stored only at the block boundaries its prefill passes or ends on, so the match can only
  // stop on one. Returns the warm start; nothing is compared (the prefix index's turn does that).
  Result<Warm> AlignedTurn(const std::vector<int32_t>& prompt) {
    const int64_t len = static_cast<int64_t>(prompt.size());
    const Chain chain = ChainOf(prompt);
    PREFIXD_ASSIGN_OR_RETURN(Warm warm,
                             WarmStart(prompt, chain, AlignedCheckpoints(0, len, block_)));
    if (len % block_ == 0) PREFIXD_RETURN_IF_ERROR(StoreEnd(chain, warm));
    return warm;
  }

 private:
  PrefixHash Position(const Chain& chain, int64_t l) const {
    return PrefixPositionHash(chain.u32, static_cast<uint64_t>(l), block_, chain.blocks);
  }

  // Attention rows of the lease into the state, then the recurrent blobs. Returns bytes moved.
  Result<uint64_t> Hydrate(const PrefixMatchResult& m) {
    SequenceState& state = backend_.host_state();
    const int64_t n = static_cast<int64_t>(m.length);
    const size_t rows = static_cast<size_t>(n) * static_cast<size_t>(config_.kv_dim());
    state.ResizeTokens(n);
    uint64_t bytes = 0;
    std::vector<float> buf;
    for (size_t r = 0; r < layers_.attention.size(); ++r) {
      LayerState& layer = state.layers()[layers_.attention[r]];
      PREFIXD_ASSIGN_OR_RETURN(
          bool shared,
          LeaseRowsShared(m.lease, static_cast<uint32_t>(r), 0, m.length,
                          WritableBytes(layer.k, 0, rows), WritableBytes(layer.v, 0, rows)));
      bytes += 2 * rows * sizeof(float);
      if (shared) continue;
      buf.resize(2 * rows);
      PREFIXD_ASSIGN_OR_RETURN(size_t got, Call([&](Client& c) {
                                 return c.PrefixLeaseFetchAttention(
                                     ns_, m.lease, static_cast<uint32_t>(r), 0, m.length, buf);
                               }));
      if (got != buf.size()) return Status::Internal("short attention fetch");
      std::memcpy(layer.k.data(), buf.data(), rows * sizeof(float));
      std::memcpy(layer.v.data(), buf.data() + rows, rows * sizeof(float));
    }
    PREFIXD_ASSIGN_OR_RETURN(bool shared, LeaseStateShared(m.lease, &bytes));
    if (!shared) {
      PREFIXD_ASSIGN_OR_RETURN(std::vector<Blob> blobs, Call([&](Client& c) {
                                 return c.PrefixLeaseFetchState(ns_, m.lease, {},
                                                                /*release=*/true);
                               }));
      PREFIXD_RETURN_IF_ERROR(CheckRecurrentCount(blobs.size()));
      for (size_t q = 0; q < blobs.size(); ++q) {
        PREFIXD_RETURN_IF_ERROR(LoadRecurrent(state.layers()[layers_.recurrent[q]], blobs[q]));
        bytes += blobs[q].size();
      }
    }
    state.set_n_tokens(n);
    return bytes;
  }

  Status CheckRecurrentCount(size_t got) const {
    if (got == layers_.recurrent.size()) return {};
    return Status::Internal("the checkpoint has " + std::to_string(got) +
                            " recurrent layers, the model " +
                            std::to_string(layers_.recurrent.size()));
  }

  // A shared call's error: false (do it again over the socket, counted) when the server refused
  // it but the socket would serve it (the lease cap), else the error.
  Result<bool> SharedRefused(const Status& st) {
    if (!IsRefusedSharedCall(st)) return st;
    ++path_.socket_fallbacks;
    return false;
  }

  // Copies the pieces a shared call answered into `to` and releases their leases, once their
  // generations show that no byte was freed during the copy (a lease that ran out: an error, as
  // the prefix lease may be gone by then).
  Status TakePieces(ShmClient& shm, std::span<const ShmView> pieces,
                    std::initializer_list<std::span<uint8_t>> to, std::string_view what) {
    PieceLeases leases(shm, pieces, path_);
    if (!CopyPieces(pieces, to)) {
      return Status::Internal(std::string(what) + " answered another length than the state's");
    }
    for (const ShmView& p : pieces) {
      if (!shm.Valid(p)) {
        return Status::Internal(std::string(what) + " was freed while it was copied");
      }
    }
    return leases.Release();
  }

  // Rows [start, end) of attention layer `rank` of the leased prefix through the shared path
  // (KV.PREFIX.SHMLFETCH ... ATTN): its K rows into `k` and its V rows into `v`. False when there
  // is no shared path or the server refused the call: the caller reads over the socket.
  Result<bool> LeaseRowsShared(uint64_t lease, uint32_t rank, uint64_t start, uint64_t end,
                               std::span<uint8_t> k, std::span<uint8_t> v) {
    ShmClient* shm = link_.shm();
    if (shm == nullptr) return false;
    std::vector<ShmView> pieces;
    const Status st = shm->FetchLeaseRows(ns_, lease, rank, pieces, /*native=*/false, start, end);
    if (!st.ok()) return SharedRefused(st);
    PREFIXD_RETURN_IF_ERROR(TakePieces(*shm, pieces, {k, v}, "KV.PREFIX.SHMLFETCH ATTN"));
    return true;
  }

  // Attention layer `rank`'s rows of the whole blocks `hashes` through the shared path
  // (KV.PREFIX.SHMBFETCH): their K rows into `k` and their V rows into `v`. False when there is
  // no shared path or the server refused the call.
  Result<bool> BlocksShared(std::span<const PrefixHash> hashes, uint32_t rank, std::span<uint8_t> k,
                            std::span<uint8_t> v) {
    ShmClient* shm = link_.shm();
    if (shm == nullptr) return false;
    std::string raw;
    for (const PrefixHash& h : hashes)
      raw.append(reinterpret_cast<const char*>(h.data()), h.size());
    std::vector<ShmView> pieces;
    const Status st = shm->FetchBlocks(ns_, raw, rank, pieces);
    if (st.code() == StatusCode::kNotFound) return Status::Internal("a matched block is missing");
    if (!st.ok()) return SharedRefused(st);
    PREFIXD_RETURN_IF_ERROR(TakePieces(*shm, pieces, {k, v}, "KV.PREFIX.SHMBFETCH"));
    return true;
  }

  // Every recurrent layer of the leased checkpoint through the shared path
  // (KV.PREFIX.SHMLFETCH ... STATE RELEASE): each blob parsed where it lies in the arena and its
  // arrays copied into the state. False when there is no shared path or the server refused the
  // call (the prefix lease is then kept, for the socket).
  Result<bool> LeaseStateShared(uint64_t lease, uint64_t* bytes) {
    ShmClient* shm = link_.shm();
    if (shm == nullptr) return false;
    std::vector<ShmView> views;
    const Status st = shm->FetchLeaseState(ns_, lease, {}, views, /*release=*/true);
    if (!st.ok()) return SharedRefused(st);
    PieceLeases leases(*shm, views, path_);
    PREFIXD_RETURN_IF_ERROR(CheckRecurrentCount(views.size()));
    SequenceState& state = backend_.host_state();
    for (size_t q = 0; q < views.size(); ++q) {
      PREFIXD_RETURN_IF_ERROR(
          LoadRecurrent(state.layers()[layers_.recurrent[q]], views[q].bytes()));
      *bytes += views[q].size;
    }
    for (const ShmView& v : views) {
      if (!shm->Valid(v)) {
        return Status::Internal("KV.PREFIX.SHMLFETCH STATE was freed while it was copied");
      }
    }
    PREFIXD_RETURN_IF_ERROR(leases.Release());
    return true;
  }

  // The negative control: the same blocks (KV.PREFIX.BFETCH) and tail (through the lease) for
  // the same L, but the recurrent layers start from zero.
  Result<uint64_t> HydrateKvOnly(const PrefixMatchResult& m,
                                 const std::vector<PrefixHash>& blocks) {
    SequenceState& state = backend_.host_state();
    const int64_t n = static_cast<int64_t>(m.length);
    const size_t dim = static_cast<size_t>(config_.kv_dim());
    const size_t full = static_cast<size_t>(n / block_);
    const size_t head = full * block_, tail = static_cast<size_t>(n) - head;
    state.ResizeTokens(n);
    uint64_t bytes = 0;
    for (size_t r = 0; r < layers_.attention.size(); ++r) {
      LayerState& layer = state.layers()[layers_.attention[r]];
      const uint32_t rank = static_cast<uint32_t>(r);
      bool shared = false;
      if (full > 0) {
        PREFIXD_ASSIGN_OR_RETURN(shared, BlocksShared(std::span(blocks).first(full), rank,
                                                      WritableBytes(layer.k, 0, head * dim),
                                                      WritableBytes(layer.v, 0, head * dim)));
        bytes += 2 * head * dim * sizeof(float);
      }
      if (full > 0 && !shared) {
        std::vector<float> buf(2 * head * dim);
        PREFIXD_ASSIGN_OR_RETURN(std::optional<size_t> got, Call([&](Client& c) {
                                   return c.PrefixFetchBlocks(ns_, std::span(blocks).first(full),
                                                              static_cast<uint32_t>(r), buf);
                                 }));
        if (!got) return Status::Internal("a matched block is missing");
        std::memcpy(layer.k.data(), buf.data(), head * dim * sizeof(float));
        std::memcpy(layer.v.data(), buf.data() + head * dim, head * dim * sizeof(float));
      }
      shared = false;
      if (tail > 0) {
        PREFIXD_ASSIGN_OR_RETURN(shared,
                                 LeaseRowsShared(m.lease, rank, head, static_cast<uint64_t>(n),
                                                 WritableBytes(layer.k, head * dim, tail * dim),
                                                 WritableBytes(layer.v, head * dim, tail * dim)));
        bytes += 2 * tail * dim * sizeof(float);
      }
      if (tail > 0 && !shared) {
        std::vector<float> buf(2 * tail * dim);
        PREFIXD_RETURN_IF_ERROR(Call([&](Client& c) {
                                  return c.PrefixLeaseFetchAttention(ns_, m.lease,
                                                                     static_cast<uint32_t>(r), head,
                                                                     static_cast<uint64_t>(n), buf);
                                }).status());
        std::memcpy(layer.k.data() + head * dim, buf.data(), tail * dim * sizeof(float));
        std::memcpy(layer.v.data() + head * dim, buf.data() + tail * dim,
                    tail * dim * sizeof(float));
      }
    }
    PREFIXD_RETURN_IF_ERROR(
        Call([&](Client& c) { return c.PrefixRelease(ns_, m.lease); }).status());
    state.set_n_tokens(n);
    return bytes;
  }

  Status LoadRecurrent(LayerState& layer, std::span<const uint8_t> blob) {
    PREFIXD_ASSIGN_OR_RETURN(std::vector<StateArrayView> arrays, DecodeStateBlob(blob));
    const std::vector<StateArraySpec> specs = RecurrentStateArrays(config_, layer.kind);
    if (arrays.size() != specs.size()) return Status::Corruption("state blob: array count");
    for (size_t i = 0; i < specs.size(); ++i) {
      FloatBuffer& dst = SlotBuffer(layer, specs[i].slot);
      if (arrays[i].dtype != DType::kFloat32 || arrays[i].shape != specs[i].shape ||
          arrays[i].bytes.size() != dst.bytes()) {
        return Status::Corruption("state blob: array " + std::to_string(i) + " has another shape");
      }
      std::memcpy(dst.data(), arrays[i].bytes.data(), arrays[i].bytes.size());
    }
    return {};
  }

  // Stores the blocks up to ⌊at/bs⌋ not stored yet and the checkpoint at `at` from the state the
  // model holds now (exactly `at` tokens).
  Status StoreCheckpoint(const Chain& chain, int64_t at, size_t* stored_blocks) {
    const std::vector<PrefixHash>& blocks = chain.blocks;
    PREFIXD_RETURN_IF_ERROR(backend_.PullState());
    const SequenceState& state = backend_.host_state();
    const uint32_t bs = block_;
    const size_t dim = static_cast<size_t>(config_.kv_dim());
    const size_t depth = static_cast<size_t>(at / bs);
    // Rows [a, b) of every attention layer, K then V, as one buffer per layer.
    auto rows = [&](size_t a, size_t b, std::vector<std::vector<float>>& bufs,
                    std::vector<LayerBlob>& out) {
      for (size_t r = 0; r < layers_.attention.size(); ++r) {
        const LayerState& layer = state.layers()[layers_.attention[r]];
        std::vector<float>& buf = bufs.emplace_back(2 * (b - a) * dim);
        std::memcpy(buf.data(), layer.k.data() + a * dim, (b - a) * dim * sizeof(float));
        std::memcpy(buf.data() + (b - a) * dim, layer.v.data() + a * dim,
                    (b - a) * dim * sizeof(float));
      }
      for (size_t r = 0; r < bufs.size(); ++r) {
        out.push_back(
            {static_cast<uint32_t>(r),
             {reinterpret_cast<const uint8_t*>(bufs[r].data()), bufs[r].size() * sizeof(float)}});
      }
    };
    if (depth > *stored_blocks) {
      std::vector<std::vector<float>> bufs;
      std::vector<LayerBlob> layers;
      rows(*stored_blocks * bs, depth * bs, bufs, layers);
      const PrefixHash parent = *stored_blocks == 0 ? kPrefixRoot : blocks[*stored_blocks - 1];
      const std::span<const PrefixHash> fresh =
          std::span(blocks).subspan(*stored_blocks, depth - *stored_blocks);
      PREFIXD_RETURN_IF_ERROR(Call([&](Client& c) {
                                return c.PrefixStoreBlocks(ns_, parent, fresh, layers);
                              }).status());
      *stored_blocks = depth;
    }
    std::vector<std::vector<uint8_t>> blobs;
    std::vector<LayerBlob> states;
    for (size_t q = 0; q < layers_.recurrent.size(); ++q) {
      const LayerState& layer = state.layers()[layers_.recurrent[q]];
      std::vector<StateArray> arrays;
      for (const StateArraySpec& a : RecurrentStateArrays(config_, layer.kind)) {
        arrays.push_back({DType::kFloat32, a.shape, SlotBuffer(layer, a.slot).byte_span()});
      }
      PREFIXD_ASSIGN_OR_RETURN(std::vector<uint8_t> blob, EncodeStateBlob(arrays));
      blobs.push_back(std::move(blob));
    }
    for (size_t q = 0; q < blobs.size(); ++q)
      states.push_back({static_cast<uint32_t>(q), blobs[q]});
    std::vector<std::vector<float>> tail_bufs;
    std::vector<LayerBlob> tail;
    if (static_cast<size_t>(at) > depth * bs)
      rows(depth * bs, static_cast<size_t>(at), tail_bufs, tail);
    const PrefixHash anchor = depth == 0 ? kPrefixRoot : blocks[depth - 1];
    const PrefixHash position = Position(chain, at);
    PREFIXD_RETURN_IF_ERROR(Call([&](Client& c) {
      return c.PrefixStoreCheckpoint(ns_, anchor, static_cast<uint64_t>(at), position,
                                     {states, tail, RowFormat::kF32});
    }));
    stored_lengths_.insert(at);
    return {};
  }

  // One call on the node serving the namespace: every key of a chat is ns_ (a hash tag).
  template <typename F>
  auto Call(F&& f) -> std::invoke_result_t<F&, Client&> {
    return link_.WithKey(ns_, std::forward<F>(f));
  }

  Backend& backend_;
  const ModelConfig& config_;
  PrefixdLink& link_;
  std::string ns_;
  const ChatOptions& options_;
  const uint32_t block_;
  const bool kv_only_;
  LayerMap layers_;
  ChatFetchPath path_;
  // Every checkpoint this client stored: its length (an AT candidate for later prompts) and, by
  // position, the pieces its state was computed in (for the cold comparison).
  std::set<int64_t> stored_lengths_;
  std::map<PrefixHash, std::vector<int64_t>> history_;
};

// The bandwidth a fetch from the server gets, in GB/s (10^9 B/s): a blob of `bytes` stored under
// `key` (on the namespace's node), fetched whole into one buffer, best of `repeats`, then dropped.
Result<double> MeasureServerGbps(PrefixdLink& link, const std::string& key, size_t bytes,
                                 int repeats) {
  std::vector<uint8_t> blob(bytes, 0x5a), sink(bytes);
  auto call = [&](auto&& f) { return link.WithKey(key, f); };
  PREFIXD_RETURN_IF_ERROR(call([&](Client& c) { return c.Store(key, 0, blob); }));
  double best_ms = 0;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    PREFIXD_ASSIGN_OR_RETURN(std::optional<size_t> got,
                             call([&](Client& c) { return c.FetchRange(key, 0, 0, bytes, sink); }));
    const double ms = MsSince(start);
    if (!got || *got != bytes) return Status::Internal("short loopback fetch");
    if (i == 0 || ms < best_ms) best_ms = ms;
  }
  PREFIXD_RETURN_IF_ERROR(call([&](Client& c) { return c.Drop(key); }));
  return best_ms > 0 ? static_cast<double>(bytes) / (best_ms * 1e6) : 0;
}

}  // namespace

Result<ChatReport> RunChatWorkload(Backend& backend, std::string_view weights_identity,
                                   PrefixdLink& link, const ChatOptions& o) {
  if (o.workload != "multiturn" && o.workload != "fanout" && o.workload != "branch") {
    return Status::InvalidArgument("--workload must be multiturn, fanout or branch");
  }
  if (o.restore != "full" && o.restore != "kv-only") {
    return Status::InvalidArgument("--restore must be full or kv-only");
  }
  if (o.turns < 2) return Status::InvalidArgument("--turns must be at least 2");
  if (o.block < 1 || o.block > 4096) return Status::InvalidArgument("--block must be 1..4096");
  if (o.align_block < 1 || o.align_block > 4096) {
    return Status::InvalidArgument("--align-block must be 1..4096");
  }
  if (o.loopback_mb < 1 || o.loopback_mb > 4096) {
    return Status::InvalidArgument("--loopback-mb must be 1..4096");
  }
  if (o.system_tokens < 1 || o.message_tokens < 2 || o.reply_tokens < 1) {
    return Status::InvalidArgument(
        "--system-tokens, --message-tokens and --reply-tokens must "
        "be at least 1, 2 and 1");
  }
  const ModelConfig& config = backend.config();
  // "{hyb…:chat:b<block>}" (a hash tag: every key of the chat on one node).
  const std::string model_tag = PrefixDigestName(config, weights_identity, {});
  auto chat_ns = [&](const std::string& what) {
    return std::string("{").append(model_tag).append(":chat:").append(what).append("}");
  };
  const std::string ns = chat_ns("b" + std::to_string(o.block));
  ChatSession session(backend, link, ns, o, o.block, o.restore == "kv-only");
  PREFIXD_RETURN_IF_ERROR(session.Open());
  ChatReport report;
  report.options = o;
  PREFIXD_ASSIGN_OR_RETURN(
      report.server_gbps,
      MeasureServerGbps(link, ns + ":loopback", static_cast<size_t>(o.loopback_mb) << 20, 3));
  // --compare: the aligned policy in a namespace of its own, blocks of align_block tokens (as
  // vLLM sizes the attention block to the state's page), and the exact-key client's entries.
  ChatSession aligned(
      backend, link,
      chat_ns("b" + std::to_string(o.block) + ":align" + std::to_string(o.align_block)), o,
      o.align_block, false);
  if (o.compare) PREFIXD_RETURN_IF_ERROR(aligned.Open());
  ExactKeyBaseline exact(config, std::string(weights_identity));
  const int64_t vocab = config.vocab_size;
  const std::vector<int32_t> system = PseudoRandomTokens(o.system_tokens, vocab, o.seed);
  auto message = [&](int turn) {
    return PseudoRandomTokens(o.message_tokens, vocab, o.seed * 1000003 + turn);
  };
  const int64_t system_end = o.system_tokens;
  // fanout and branch keep a checkpoint at the end of the shared system prompt.
  const std::vector<int64_t> points =
      o.workload == "multiturn" ? std::vector<int64_t>{} : std::vector<int64_t>{system_end};

  std::vector<int32_t> prompt = system, reply;
  std::vector<int64_t> turn_starts;  // where each turn's message begins
  for (int turn = 1; turn <= o.turns; ++turn) {
    int64_t edit = -1;
    if (o.workload == "fanout") {
      prompt = system;
      const auto q = message(turn);
      prompt.insert(prompt.end(), q.begin(), q.end());
    } else if (o.workload == "branch" && turn == o.turns) {
      // Edit a token in the middle of an earlier turn's message: the match must stop at or
      // before it, on the checkpoint of the turn before (or the system prompt's).
      const int64_t edited_turn = std::max<int64_t>(1, o.turns / 2);
      edit = turn_starts[static_cast<size_t>(edited_turn - 1)] + o.message_tokens / 2;
      prompt[static_cast<size_t>(edit)] =
          (prompt[static_cast<size_t>(edit)] + 1) % static_cast<int32_t>(vocab);
    } else {
      prompt.insert(prompt.end(), reply.begin(), reply.end());
      turn_starts.push_back(static_cast<int64_t>(prompt.size()));
      const auto m = message(turn);
      prompt.insert(prompt.end(), m.begin(), m.end());
    }
    ExactKeyBaseline::Lookup exact_found;
    if (o.compare) {
      PREFIXD_ASSIGN_OR_RETURN(exact_found, exact.Find(link, prompt, &backend.host_state()));
    }
    PREFIXD_ASSIGN_OR_RETURN(
        ChatRow row, session.Turn(turn, prompt, points, &reply, [&](const SequenceState& state) {
          return o.compare ? exact.Remember(link, prompt, state) : Status{};
        }));
    row.edit_position = edit;
    if (o.compare) {
      row.compared = true;
      row.exact_matched_tokens = exact_found.matched_tokens;
      row.exact_lookup_ms = exact_found.ms;
      row.exact_ttft_ms = exact_found.ms + (exact_found.hit ? 0 : row.cold_ttft_ms);
      PREFIXD_ASSIGN_OR_RETURN(ChatSession::Warm a, aligned.AlignedTurn(prompt));
      row.aligned_matched_tokens = a.matched;
      row.aligned_fetched_bytes = a.fetched_bytes;
      row.aligned_ttft_ms = a.ttft_ms;
    }
    std::fprintf(
        stderr,
        "turn %2d  prompt %6lld  matched %6lld  prefilled %6lld  cold %9.1f ms  warm "
        "%8.1f ms  %6.1fx  bit-exact %s  tokens %d/%d\n",
        turn, static_cast<long long>(row.prompt_tokens), static_cast<long long>(row.matched_tokens),
        static_cast<long long>(row.prefilled_tokens), row.cold_ttft_ms, row.warm_ttft_ms,
        row.speedup(), row.states_bitexact ? "yes" : "NO", row.agreeing_tokens, row.total_tokens);
    if (o.compare) {
      std::fprintf(stderr,
                   "         exact key: matched %6lld  TTFT %8.1f ms   aligned %u: matched %6lld  "
                   "TTFT %8.1f ms\n",
                   static_cast<long long>(row.exact_matched_tokens), row.exact_ttft_ms,
                   o.align_block, static_cast<long long>(row.aligned_matched_tokens),
                   row.aligned_ttft_ms);
    }
    report.rows.push_back(row);
  }
  if (o.compare) PREFIXD_RETURN_IF_ERROR(exact.ForgetAll(link));
  report.path = session.path();
  const ChatFetchPath& a = aligned.path();
  report.path.shared_calls += a.shared_calls;
  report.path.shared_bytes += a.shared_bytes;
  report.path.shared_views += a.shared_views;
  report.path.inline_bytes += a.inline_bytes;
  report.path.socket_fallbacks += a.socket_fallbacks;
  report.path.transport = LinkTransportName(link.transport());
  report.path.shm_refused = link.shm_refused();
  std::fprintf(stderr, "%s\n", ChatPathLine(report.path).c_str());
  return report;
}

std::string ChatVerdict(const std::vector<ChatRow>& rows) {
  for (const ChatRow& r : rows) {
    if (r.turn == 1) continue;
    const std::string at = "turn " + std::to_string(r.turn) + ": ";
    if (r.matched_tokens <= 0) return at + "matched nothing";
    if (r.edit_position >= 0 && r.matched_tokens > r.edit_position) {
      return at + "matched past the edit at " + std::to_string(r.edit_position);
    }
    if (!r.states_bitexact) return at + "the state is not bit-exact";
    if (r.agreeing_tokens != r.total_tokens) return at + "tokens disagree";
  }
  return {};
}

std::string ChatPathLine(const ChatFetchPath& path) {
  std::string line = "fetches via " + path.transport;
  if (path.transport == "shm") {
    line += ": " + std::to_string(path.shared_calls) + " shared calls, " +
            Fixed(static_cast<double>(path.shared_bytes) / 1e6, 2) + " MB read in place from " +
            std::to_string(path.shared_views) + " leased views, " +
            Fixed(static_cast<double>(path.inline_bytes) / 1e6, 2) + " MB answered inline, " +
            std::to_string(path.socket_fallbacks) + " refused calls done over the socket";
  } else if (!path.shm_refused.empty()) {
    line += " (the shared path was refused: " + path.shm_refused + ")";
  }
  return line;
}

std::string ChatCsv(const std::vector<ChatRow>& rows) {
  std::ostringstream out;
  out << "turn,prompt_tokens,matched_tokens,prefilled_tokens,cold_ttft_ms,warm_ttft_ms,speedup,"
         "states_bitexact,token_agreement\n";
  for (const ChatRow& r : rows) {
    out << r.turn << ',' << r.prompt_tokens << ',' << r.matched_tokens << ',' << r.prefilled_tokens
        << ',' << Fixed(r.cold_ttft_ms, 3) << ',' << Fixed(r.warm_ttft_ms, 3) << ','
        << Fixed(r.speedup(), 2) << ',' << (r.states_bitexact ? "true" : "false") << ','
        << r.agreeing_tokens << '/' << r.total_tokens << '\n';
  }
  return out.str();
}

std::string ChatSvgChart(const std::vector<ChatRow>& rows, std::string_view title) {
  const double width = 760, height = 440;
  const double left = 80, right = 30, top = 64, bottom = 76;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  std::ostringstream svg;
  svg << SvgOpen(width, height, title);
  double most = 0;
  for (const ChatRow& r : rows) most = std::max({most, r.cold_ttft_ms, r.warm_ttft_ms});
  // The y axis runs to a round number of milliseconds: 1, 2 or 5 times a power of ten.
  const double decade = std::pow(10.0, std::floor(std::log10(std::max(most, 1e-3))));
  double y_max = decade;
  for (double step : {1.0, 2.0, 5.0, 10.0}) {
    y_max = step * decade;
    if (y_max >= most) break;
  }
  auto py = [&](double ms) { return top + plot_h - ms / y_max * plot_h; };
  svg << "<g stroke=\"#ddd\">\n";
  for (int i = 0; i <= 4; ++i) {
    svg << "<line x1=\"" << left << "\" y1=\"" << py(y_max * i / 4) << "\" x2=\"" << left + plot_w
        << "\" y2=\"" << py(y_max * i / 4) << "\"/>\n";
  }
  svg << "</g>\n";
  for (int i = 0; i <= 4; ++i) {
    svg << "<text x=\"" << left - 8 << "\" y=\"" << py(y_max * i / 4) + 4
        << "\" text-anchor=\"end\">" << y_max * i / 4 << " ms</text>\n";
  }
  svg << "<text transform=\"translate(20," << top + plot_h / 2
      << ") rotate(-90)\" text-anchor=\"middle\">time to first token</text>\n";
  // Legend.
  svg << "<rect x=\"" << left << "\" y=\"36\" width=\"12\" height=\"12\" fill=\"#999\"/>"
      << "<text x=\"" << left + 18 << "\" y=\"46\">cold prefill of the whole prompt</text>\n"
      << "<rect x=\"" << left + 260 << "\" y=\"36\" width=\"12\" height=\"12\" fill=\"#1f77b4\"/>"
      << "<text x=\"" << left + 278
      << "\" y=\"46\">warm: match, fetch, hydrate, prefill the rest</text>\n";
  const double slot = rows.empty() ? plot_w : plot_w / static_cast<double>(rows.size());
  const double bar = std::min(40.0, slot / 3);
  for (size_t i = 0; i < rows.size(); ++i) {
    const ChatRow& r = rows[i];
    const double mid = left + slot * (static_cast<double>(i) + 0.5);
    auto bar_of = [&](const char* kind, const char* color, double x, double ms) {
      svg << "<rect class=\"" << kind << "\" x=\"" << x << "\" y=\"" << py(ms) << "\" width=\""
          << bar << "\" height=\"" << top + plot_h - py(ms) << "\" fill=\"" << color
          << "\"><title>turn " << r.turn << ' ' << kind << ": " << ms << " ms</title></rect>\n";
    };
    bar_of("cold", "#999", mid - bar - 2, r.cold_ttft_ms);
    bar_of("warm", "#1f77b4", mid + 2, r.warm_ttft_ms);
    svg << "<text x=\"" << mid << "\" y=\"" << top + plot_h + 18
        << "\" text-anchor=\"middle\">turn " << r.turn << "</text>\n"
        << "<text x=\"" << mid << "\" y=\"" << top + plot_h + 34
        << "\" text-anchor=\"middle\" fill=\"#555\">" << r.matched_tokens << " of "
        << r.prompt_tokens << " matched</text>\n";
  }
  svg << "<line x1=\"" << left << "\" y1=\"" << top + plot_h << "\" x2=\"" << left + plot_w
      << "\" y2=\"" << top + plot_h << "\" stroke=\"#333\"/>\n</svg>\n";
  return svg.str();
}

std::string ChatMarkdown(const ChatReport& report, std::string_view title) {
  const std::vector<ChatRow>& rows = report.rows;
  const double gbps = report.server_gbps;
  std::ostringstream out;
  out << "**" << title << "**\n\n"
      << "| turn | prompt | matched | prefilled | cold TTFT | warm TTFT | speedup | bit-exact "
         "| tokens |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const ChatRow& r : rows) {
    out << "| " << r.turn << " | " << r.prompt_tokens << " | " << r.matched_tokens << " | "
        << r.prefilled_tokens << " | " << Fixed(r.cold_ttft_ms, 1) << " ms | "
        << Fixed(r.warm_ttft_ms, 1) << " ms | " << Fixed(r.speedup(), 1) << "x | "
        << (r.states_bitexact ? "yes" : "no") << " | " << r.agreeing_tokens << "/" << r.total_tokens
        << " |\n";
  }
  out << "\n" << ChatPathLine(report.path) << "\n";
  out << "\nTTFT bound: fetched bytes / " << Fixed(gbps, 2)
      << " GB/s (a fetch from the server, best of 3) + the prefill of the unmatched tokens\n\n"
      << "| turn | fetched | match+fetch+hydrate | prefill | bound | warm TTFT | warm/bound | "
         "within 1.5x |\n|---|---|---|---|---|---|---|---|\n";
  for (const ChatRow& r : rows) {
    const double ratio = r.bound_ratio(gbps);
    out << "| " << r.turn << " | " << Fixed(static_cast<double>(r.fetched_bytes) / 1e6, 2)
        << " MB | " << Fixed(r.restore_ms, 1) << " ms | " << Fixed(r.prefill_ms, 1) << " ms | "
        << Fixed(r.bound_ms(gbps), 1) << " ms | " << Fixed(r.warm_ttft_ms, 1) << " ms | "
        << Fixed(ratio, 2) << " | " << (ratio <= 1.5 ? "yes" : "no") << " |\n";
  }
  if (rows.empty() || !rows.front().compared) return out.str();
  const std::string align = std::to_string(report.options.align_block);
  out << "\nThe same prompts under exact-key lookup (a miss costs the cold prefill) and states "
         "kept "
         "only at multiples of "
      << align << " tokens\n\n| turn | prompt | index matched | index TTFT | exact-key matched "
      << "| exact-key TTFT | aligned-" << align << " matched | aligned-" << align
      << " TTFT |\n|---|---|---|---|---|---|---|---|\n";
  int64_t index_avoided = 0, exact_avoided = 0, aligned_avoided = 0;
  double index_ms = 0, exact_ms = 0, aligned_ms = 0;
  for (const ChatRow& r : rows) {
    out << "| " << r.turn << " | " << r.prompt_tokens << " | " << r.matched_tokens << " | "
        << Fixed(r.warm_ttft_ms, 1) << " ms | " << r.exact_matched_tokens << " | "
        << Fixed(r.exact_ttft_ms, 1) << " ms | " << r.aligned_matched_tokens << " | "
        << Fixed(r.aligned_ttft_ms, 1) << " ms |\n";
    if (r.turn == 1) continue;  // nothing is cached before the first turn under any policy
    index_avoided += r.matched_tokens;
    exact_avoided += r.exact_matched_tokens;
    aligned_avoided += r.aligned_matched_tokens;
    index_ms += r.warm_ttft_ms;
    exact_ms += r.exact_ttft_ms;
    aligned_ms += r.aligned_ttft_ms;
  }
  int64_t later_tokens = 0;
  for (const ChatRow& r : rows) later_tokens += r.turn == 1 ? 0 : r.prompt_tokens;
  auto share = [&](int64_t avoided) {
    return Fixed(later_tokens > 0
                     ? 100.0 * static_cast<double>(avoided) / static_cast<double>(later_tokens)
                     : 0,
                 1);
  };
  out << "\nTurns 2.." << rows.size() << " (" << later_tokens
      << " prompt tokens): prefill tokens avoided and total TTFT\n\n"
      << "| policy | tokens avoided | share | total TTFT |\n|---|---|---|---|\n"
      << "| prefix index | " << index_avoided << " | " << share(index_avoided) << " % | "
      << Fixed(index_ms, 1) << " ms |\n"
      << "| exact key | " << exact_avoided << " | " << share(exact_avoided) << " % | "
      << Fixed(exact_ms, 1) << " ms |\n"
      << "| aligned " << align << " | " << aligned_avoided << " | " << share(aligned_avoided)
      << " % | " << Fixed(aligned_ms, 1) << " ms |\n";
  return out.str();
}

std::string ChatCompareCsv(const ChatReport& report) {
  std::ostringstream out;
  out << "turn,prompt_tokens,index_matched,index_warm_ttft_ms,exact_matched,exact_ttft_ms,"
         "aligned_matched,aligned_ttft_ms,fetched_bytes,restore_ms,prefill_ms,bound_ms,"
         "bound_ratio,within_bound\n";
  for (const ChatRow& r : report.rows) {
    const double ratio = r.bound_ratio(report.server_gbps);
    out << r.turn << ',' << r.prompt_tokens << ',' << r.matched_tokens << ','
        << Fixed(r.warm_ttft_ms, 3) << ',' << r.exact_matched_tokens << ','
        << Fixed(r.exact_ttft_ms, 3) << ',' << r.aligned_matched_tokens << ','
        << Fixed(r.aligned_ttft_ms, 3) << ',' << r.fetched_bytes << ',' << Fixed(r.restore_ms, 3)
        << ',' << Fixed(r.prefill_ms, 3) << ',' << Fixed(r.bound_ms(report.server_gbps), 3) << ','
        << Fixed(ratio, 3) << ',' << (ratio <= 1.5 ? "true" : "false") << '\n';
  }
  return out.str();
}

}  // namespace prefixd::hybrid
