// PromptCache (include/prefixd/llama.h): llama.cpp's sequence state in and out of prefixd's
// prefix index. Used from the thread that drives its llama_context.
//
// In the server, for a namespace ns = "{llama:<identity digest>:<block size>}":
//   ns             the prefix index (KV.PREFIX.NAMESPACE): BLOCK block_size, ATTN the attention
//                  layers, KVDIM their K/V width, RECURRENT the recurrent layers, VQUANT the
//                  cache's own element type; blocks hold per attention layer the block's K rows
//                  then V rows; a checkpoint at L holds per recurrent layer its R row then S row at
//                  L - 1.
//   ns + ":layout" the StateLayout (seq_state.h) every state of the namespace has, written once
//                  (SET NX) by the first saver and compared by every later one; a restoring
//                  process reads it to assemble states.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <set>
#include <utility>

#include "prefixd/llama.h"
#include "prefixd/shm.h"
#include "seq_state.h"
#include "state_buffer.h"
#include "token_batch.h"

namespace prefixd::llama {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// A BSTORE carries at most this many bytes of rows, so that no single request (or log record)
// grows with the prompt.
constexpr uint64_t kMaxBlockStoreBytes = uint64_t{64} << 20;
// KV.PREFIX.MATCH ... AT takes at most 1024 candidates: two blocks' positions.
constexpr uint32_t kMaxBlockSize = 512;
// KV.PREFIX.BSTORE takes at most this many blocks.
constexpr uint64_t kMaxBlocksPerStore = 65536;

MemoryKind KindOf(const llama_model* model) {
  if (llama_model_is_hybrid(model)) return MemoryKind::kHybrid;
  if (llama_model_is_recurrent(model)) return MemoryKind::kRecurrent;
  return MemoryKind::kAttention;
}

std::optional<std::string_view> TierOf(int32_t ggml_type) {
  switch (ggml_type) {
    case GGML_TYPE_F32:
      return "fp32";
    case GGML_TYPE_F16:
      return "fp16";
    case GGML_TYPE_BF16:
      return "bf16";
    default:
      return std::nullopt;
  }
}

RowFormat FormatOf(int32_t ggml_type) {
  if (ggml_type == GGML_TYPE_F16) return RowFormat::kF16;
  if (ggml_type == GGML_TYPE_BF16) return RowFormat::kBf16;
  return RowFormat::kF32;
}

std::vector<uint32_t> AsUnsigned(std::span<const llama_token> tokens) {
  return {tokens.begin(), tokens.end()};
}

// A recurrent state captured during Prefill, parsed later (the bytes stay with it).
struct Capture {
  uint64_t length = 0;
  std::vector<uint8_t> bytes;
};

}  // namespace

class PromptCache::Impl {
 public:
  Impl(llama_context* ctx, const llama_context_params& params, Client client,
       ModelIdentity identity, CacheOptions options)
      : ctx_(ctx),
        kind_(KindOf(llama_get_model(ctx))),
        client_(std::move(client)),
        identity_(std::move(identity)),
        options_(std::move(options)),
        ns_(identity_.Namespace(options_.namespace_prefix, options_.block_size, options_.vquant)),
        layout_key_(ns_ + ":layout") {}

  uint64_t Restore(llama_seq_id seq, std::span<const llama_token> tokens, RestoreReport* report);
  // Stores the blocks of `tokens` the server lacks and a checkpoint at each capture. From Prefill
  // (prefill true) the state's last token was decoded alone (the last capture is before it): the
  // block that holds it is not stored, as its rows were not computed in a block-aligned chunk.
  // Otherwise every full block is stored, and a checkpoint at the end.
  Status Save(llama_seq_id seq, std::span<const llama_token> tokens, std::vector<Capture> captures,
              bool prefill, SaveReport* report);
  Status Prefill(llama_seq_id seq, std::span<const llama_token> tokens, uint64_t n_past,
                 SaveReport* report, PromptCache::Mode mode);

  const ModelIdentity& identity() const { return identity_; }
  const CacheOptions& options() const { return options_; }
  uint64_t KvBytesPerToken() const {
    if (!layout_ || !layout_->has_attention()) return 0;
    return 2 * uint64_t{layout_->attention.layers} * layout_->attention.row_bytes();
  }
  const std::string& name() const { return ns_; }
  const CacheStats& stats() const { return stats_; }

 private:
  // Reports a failure of kind `kind` the first time it happens; counts every one.
  void Failed(std::string_view kind, const Status& why);
  // The namespace's layout as the server has it (learned once), or nullopt.
  Result<std::optional<StateLayout>> ServerLayout();
  // Makes the namespace and its layout exist for `layout`; kInvalidArgument when the server's
  // namespace was made by a context whose states have another layout.
  Status EnsureNamespace(const StateLayout& layout);
  Result<uint64_t> MatchedBlocks(std::span<const PrefixHash> hashes);
  // Whether a checkpoint at `length` is stored (a match of its own chain that answers it).
  Result<bool> HasCheckpoint(std::span<const PrefixHash> hashes, std::span<const uint32_t> tokens,
                             uint64_t length);
  Status StoreBlocks(const SequenceState& state, std::span<const PrefixHash> hashes,
                     uint64_t from_block, SaveReport& report);
  Status StoreCheckpoint(const SequenceState& kv, const SequenceState& recurrent,
                         std::span<const PrefixHash> hashes, std::span<const uint32_t> tokens,
                         uint64_t length, SaveReport& report);
  void Log(std::string_view message) const;
  // Empties `seq`. A context of one sequence is cleared whole, which also puts the next cells back
  // at the start of the cache: where the restored state's cells land is where a cold run's
  // would, so attention sums over them in the same order (bit-identical results).
  void EmptySequence(llama_seq_id seq);
  // A connection to use: the client's, reopened when an earlier failure closed it (at most once a
  // second, so that a server that is down costs a cold request no more than a refused connect).
  Status Connected();
  // The shared-memory connection beside the client, opened on first use; nullptr when there is
  // none to use: over TCP, turned off, refused by the server (for good), or unreachable (tried
  // again at most once a second).
  ShmClient* Shm();
  // The matched prefix (lease `lease`) into `rows` and `blobs`: through the shared arenas when
  // Shm() gives a connection and the server answers there, else over the socket.
  Status FetchLease(uint64_t lease, std::span<const PrefixLeaseRows> rows,
                    std::span<const PrefixLeaseBlob> blobs, RestoreReport& report);
  // Logs `why` the first time a failure of kind `kind` happens; counts nothing.
  void Note(std::string_view kind, const Status& why);
  // A store of Save: through SHM.CALL (`shm_store`, its blobs in a memfd) when Shm() gives a
  // connection, else over the socket (`socket_store`); sets report.shared_memory when SHM.CALL
  // stored it. A store SHM.CALL did not make is made over the socket, and when that succeeds
  // where the server refused SHM.CALL (an older server, a refused descriptor), saves use the
  // socket from then on; a broken connection is opened again later.
  template <class ShmStore, class SocketStore>
  auto SaveStore(const ShmStore& shm_store, const SocketStore& socket_store, SaveReport& report)
      -> decltype(socket_store());

  llama_context* ctx_;
  const MemoryKind kind_;
  Client client_;
  const ModelIdentity identity_;
  const CacheOptions options_;
  const std::string ns_;
  const std::string layout_key_;

  Clock::time_point last_reconnect_{};
  std::unique_ptr<ShmClient> shm_;
  bool shm_off_ = false;        // over TCP, turned off or refused: the socket only
  bool shm_saves_off_ = false;  // the server refused SHM.CALL: saves over the socket only
  Clock::time_point last_shm_try_{};
  StateBuffer buffer_;                 // where restored states are assembled, reused
  std::optional<StateLayout> layout_;  // known once the server's layout was read or written
  bool namespace_ready_ = false;
  std::set<std::string, std::less<>> reported_;
  CacheStats stats_;
};

void PromptCache::Impl::Log(std::string_view message) const {
  if (options_.log) return options_.log(message);
  std::fprintf(stderr, "prefixd-llama: %.*s\n", static_cast<int>(message.size()), message.data());
}

void PromptCache::Impl::Failed(std::string_view kind, const Status& why) {
  ++stats_.failures;
  // A server that is down fails every step in turn; that is one thing to report, not one per step.
  const StatusCode code = why.code();
  if (code == StatusCode::kUnavailable || code == StatusCode::kIoError ||
      code == StatusCode::kTimeout) {
    kind = "prefixd unreachable";
  }
  if (reported_.insert(std::string(kind)).second) {
    Log(std::string(kind) + ": " + why.ToString() + " (reported once; the cache goes cold)");
  }
}

void PromptCache::Impl::Note(std::string_view kind, const Status& why) {
  if (reported_.insert(std::string(kind)).second) {
    Log(std::string(kind) + ": " + why.ToString() + " (reported once)");
  }
}

ShmClient* PromptCache::Impl::Shm() {
  if (shm_off_) return nullptr;
  if (shm_) return shm_.get();
  if (!options_.shared_memory || client_.unix_socket_path().empty()) {
    shm_off_ = true;
    return nullptr;
  }
  const auto now = Clock::now();
  if (last_shm_try_ != Clock::time_point{} && now - last_shm_try_ < std::chrono::seconds(1)) {
    return nullptr;
  }
  last_shm_try_ = now;
  auto shm = std::make_unique<ShmClient>();
  if (Status st = shm->ConnectBeside(client_); !st.ok()) {
    // The server's answer (SHM.HELLO refused, or AUTH) stands until the cache is opened again;
    // a connection that failed is tried again later.
    const bool refused = st.code() == StatusCode::kServerError;
    if (refused) shm_off_ = true;
    Note(refused ? "shared memory refused, using the socket"
                 : "shared memory unreachable, using the socket",
         st);
    return nullptr;
  }
  shm_ = std::move(shm);
  return shm_.get();
}

Status PromptCache::Impl::FetchLease(uint64_t lease, std::span<const PrefixLeaseRows> rows,
                                     std::span<const PrefixLeaseBlob> blobs,
                                     RestoreReport& report) {
  if (ShmClient* shm = Shm()) {
    ShmScatterStats moved;
    Status st = shm->ScatterLease(ns_, lease, rows, blobs, true, &moved);
    if (st.ok()) {
      report.shared_memory = true;
      report.mapped_bytes = moved.mapped_bytes;
      ++stats_.shm_restores;
      return st;
    }
    // The prefix lease outlives a refused shared fetch, so the socket can still fetch it. The
    // connection cap on SHM leases passes and a lost prefix lease fails the socket fetch too;
    // any other refusal (a tier the server decodes, a server without KV.PREFIX.SHMLFETCH) stays.
    // A broken connection is opened again later; a part of the wrong size fails the socket
    // fetch as well, on a connection still in step.
    Note("shared-memory fetch failed, restoring over the socket", st);
    const StatusCode code = st.code();
    const std::string& why = st.message();
    if (code == StatusCode::kUnavailable || code == StatusCode::kIoError ||
        code == StatusCode::kTimeout || code == StatusCode::kProtocolError) {
      shm_.reset();
    } else if (code == StatusCode::kServerError &&
               why.find("(shm-max-leases)") == std::string::npos &&
               why.find("prefix lease") == std::string::npos) {
      shm_.reset();
      shm_off_ = true;
    }
  }
  return client_.PrefixLeaseFetchAll(ns_, lease, rows, blobs, true);
}

namespace {

const Status& StatusOf(const Status& st) { return st; }
template <class T>
const Status& StatusOf(const Result<T>& r) {
  return r.status();
}

}  // namespace

template <class ShmStore, class SocketStore>
auto PromptCache::Impl::SaveStore(const ShmStore& shm_store, const SocketStore& socket_store,
                                  SaveReport& report) -> decltype(socket_store()) {
  ShmClient* shm = shm_saves_off_ ? nullptr : Shm();
  if (shm == nullptr) return socket_store();
  auto through_file = shm_store(*shm);
  if (StatusOf(through_file).ok()) {
    report.shared_memory = true;
    return through_file;
  }
  const Status why = StatusOf(through_file);
  const StatusCode code = why.code();
  if (code == StatusCode::kUnavailable || code == StatusCode::kIoError ||
      code == StatusCode::kTimeout || code == StatusCode::kProtocolError) {
    shm_.reset();
  }
  auto over_socket = socket_store();
  // The same store succeeded over the socket: the refusal was SHM.CALL's, not the store's.
  if (StatusOf(over_socket).ok() && code == StatusCode::kServerError) {
    shm_saves_off_ = true;
    Note("shared-memory save refused, saving over the socket", why);
  }
  return over_socket;
}

void PromptCache::Impl::EmptySequence(llama_seq_id seq) {
  llama_memory_t memory = llama_get_memory(ctx_);
  if (llama_n_seq_max(ctx_) == 1) {
    llama_memory_clear(memory, false);
  } else {
    llama_memory_seq_rm(memory, seq, -1, -1);
  }
}

Status PromptCache::Impl::Connected() {
  if (client_.connected()) return Status::Ok();
  const auto now = Clock::now();
  if (now - last_reconnect_ < std::chrono::seconds(1)) {
    return Status::Unavailable("not connected to prefixd (retrying once a second)");
  }
  last_reconnect_ = now;
  return client_.Reconnect();
}

Result<std::optional<StateLayout>> PromptCache::Impl::ServerLayout() {
  if (layout_) return layout_;
  const std::vector<std::string_view> get{"GET", layout_key_};
  PREFIXD_ASSIGN_OR_RETURN(Reply reply, client_.Command(get));
  if (reply.is_nil()) return std::optional<StateLayout>();
  if (reply.type != Reply::Type::kString) return Status::ProtocolError("GET of the layout");
  PREFIXD_ASSIGN_OR_RETURN(StateLayout layout, StateLayout::Decode(reply.str));
  layout_ = layout;
  return layout_;
}

Status PromptCache::Impl::EnsureNamespace(const StateLayout& layout) {
  if (namespace_ready_ && layout_ && *layout_ == layout) {
    // The layout is a small string key that maxmemory may evict on its own; without it no other
    // process can restore. Put back (if gone) with every save: one round trip.
    const std::string encoded = layout.Encode();
    const std::vector<std::string_view> set{"SET", layout_key_, encoded, "NX"};
    return client_.Command(set).status();
  }
  if (layout_ && !(*layout_ == layout)) {
    return Status::InvalidArgument(
        "this context's state has another layout than the namespace's (another flash "
        "attention or cache setting under the same identity?)");
  }
  const std::string encoded = layout.Encode();
  const std::vector<std::string_view> set{"SET", layout_key_, encoded, "NX"};
  PREFIXD_ASSIGN_OR_RETURN(Reply set_reply, client_.Command(set));
  if (set_reply.is_nil()) {
    PREFIXD_ASSIGN_OR_RETURN(std::optional<StateLayout> stored, ServerLayout());
    if (!stored || !(*stored == layout)) {
      layout_.reset();
      return Status::InvalidArgument("the namespace's stored layout differs from this context's");
    }
  }
  const std::string tier = options_.vquant.empty()
                               ? std::string(TierOf(layout.attention.type).value_or("fp32"))
                               : options_.vquant;
  PrefixShape shape;
  shape.block_size = options_.block_size;
  shape.attention_layers = layout.attention_layers();
  shape.kv_dim = layout.has_attention() ? layout.attention.width : 1;
  shape.recurrent_layers = layout.recurrent_layers();
  shape.vquant = tier;
  PREFIXD_RETURN_IF_ERROR(client_.PrefixNamespaceCreate(ns_, shape));
  layout_ = layout;
  namespace_ready_ = true;
  return Status::Ok();
}

Result<uint64_t> PromptCache::Impl::MatchedBlocks(std::span<const PrefixHash> hashes) {
  if (hashes.empty()) return 0;
  PREFIXD_ASSIGN_OR_RETURN(PrefixMatchResult m, client_.PrefixMatch(ns_, hashes, {}, 0));
  return m.matched_blocks;
}

Result<bool> PromptCache::Impl::HasCheckpoint(std::span<const PrefixHash> hashes,
                                              std::span<const uint32_t> tokens, uint64_t length) {
  const uint32_t bs = options_.block_size;
  const auto chain = hashes.first(length / bs);
  std::vector<PrefixCandidate> at;
  if (length % bs != 0) at.push_back({length, PrefixPositionHash(tokens, length, bs, hashes)});
  PREFIXD_ASSIGN_OR_RETURN(PrefixMatchResult m, client_.PrefixMatch(ns_, chain, at, 0));
  return m.length == length;
}

Status PromptCache::Impl::StoreBlocks(const SequenceState& state,
                                      std::span<const PrefixHash> hashes, uint64_t from_block,
                                      SaveReport& report) {
  const uint32_t bs = options_.block_size;
  const StateLayout& layout = state.layout();
  const uint64_t block_bytes =
      std::max<uint64_t>(1, 2 * uint64_t{bs} * layout.attention_layers() *
                                (layout.has_attention() ? layout.attention.row_bytes() : 0));
  const uint64_t per_request =
      std::clamp<uint64_t>(kMaxBlockStoreBytes / block_bytes, 1, kMaxBlocksPerStore);
  const uint32_t n_layers = layout.attention_layers();
  std::vector<std::vector<uint8_t>> rows(n_layers);
  for (uint64_t b = from_block; b < hashes.size(); b += per_request) {
    const uint64_t end = std::min<uint64_t>(hashes.size(), b + per_request);
    const uint64_t first = b * bs, last = end * bs;
    const uint64_t layer_bytes = state.RowsBytes(first, last);
    report.block_bytes += n_layers * layer_bytes;
    const PrefixHash& parent = b == 0 ? kPrefixRoot : hashes[b - 1];
    const auto chunk = hashes.subspan(b, end - b);
    const RowFormat format = FormatOf(layout.attention.type);
    // The rows gathered straight into the memfd SHM.CALL passes: no buffer of ours in between,
    // and the server keeps these pages as the stored rows.
    auto through_file = [&](ShmClient& shm) -> Result<int64_t> {
      const std::vector<uint64_t> sizes(n_layers, layer_bytes);
      PREFIXD_ASSIGN_OR_RETURN(ShmArgumentFile file,
                               ShmArgumentFile::Create(ShmArgumentFile::CapacityFor(sizes)));
      std::vector<LayerBlob> layers;
      for (uint32_t l = 0; l < n_layers; ++l) {
        const std::span<uint8_t> room = file.Take(layer_bytes);
        state.CopyRows(l, first, last, room);
        layers.push_back({l, room});
      }
      return shm.PrefixStoreBlocks(ns_, parent, chunk, layers, format, &file);
    };
    auto over_socket = [&] {
      std::vector<LayerBlob> layers;
      for (uint32_t l = 0; l < n_layers; ++l) {
        rows[l].clear();
        state.AppendRows(l, first, last, rows[l]);
        layers.push_back({l, rows[l]});
      }
      return client_.PrefixStoreBlocks(ns_, parent, chunk, layers, format);
    };
    PREFIXD_ASSIGN_OR_RETURN(int64_t stored, SaveStore(through_file, over_socket, report));
    report.blocks_stored += static_cast<uint64_t>(stored);
  }
  return Status::Ok();
}

Status PromptCache::Impl::StoreCheckpoint(const SequenceState& kv, const SequenceState& recurrent,
                                          std::span<const PrefixHash> hashes,
                                          std::span<const uint32_t> tokens, uint64_t length,
                                          SaveReport& report) {
  const uint32_t bs = options_.block_size;
  const StateLayout& layout = kv.layout();
  const uint64_t depth = length / bs;
  const PrefixHash anchor = depth == 0 ? kPrefixRoot : hashes[depth - 1];
  const PrefixHash position = PrefixPositionHash(tokens, length, bs, hashes);
  const size_t n_states = layout.recurrent_layers();
  const size_t n_tail = length % bs == 0 ? 0 : layout.attention_layers();
  for (size_t i = 0; i < n_states; ++i) report.state_bytes += recurrent.RecurrentBlobBytes(i);
  report.tail_bytes += n_tail * kv.RowsBytes(depth * bs, length);
  const RowFormat format = FormatOf(layout.attention.type);
  // Every blob and tail row written straight into the memfd SHM.CALL passes.
  auto through_file = [&](ShmClient& shm) -> Status {
    std::vector<uint64_t> sizes;
    for (size_t i = 0; i < n_states; ++i) sizes.push_back(recurrent.RecurrentBlobBytes(i));
    sizes.insert(sizes.end(), n_tail, kv.RowsBytes(depth * bs, length));
    PREFIXD_ASSIGN_OR_RETURN(ShmArgumentFile file,
                             ShmArgumentFile::Create(ShmArgumentFile::CapacityFor(sizes)));
    std::vector<LayerBlob> states, tail;
    for (size_t i = 0; i < n_states; ++i) {
      const std::span<uint8_t> room = file.Take(sizes[i]);
      recurrent.CopyRecurrentBlob(i, room);
      states.push_back({static_cast<uint32_t>(i), room});
    }
    for (uint32_t l = 0; l < n_tail; ++l) {
      const std::span<uint8_t> room = file.Take(sizes[n_states + l]);
      kv.CopyRows(l, depth * bs, length, room);
      tail.push_back({l, room});
    }
    const PrefixCheckpointParts parts{states, tail, format};
    return shm.PrefixStoreCheckpoint(ns_, anchor, length, position, parts, &file);
  };
  auto over_socket = [&] {
    std::vector<std::vector<uint8_t>> blobs, tail_rows(n_tail);
    std::vector<LayerBlob> states, tail;
    for (size_t i = 0; i < n_states; ++i) blobs.push_back(recurrent.RecurrentBlob(i));
    for (size_t i = 0; i < n_states; ++i) states.push_back({static_cast<uint32_t>(i), blobs[i]});
    for (uint32_t l = 0; l < n_tail; ++l) {
      kv.AppendRows(l, depth * bs, length, tail_rows[l]);
      tail.push_back({l, tail_rows[l]});
    }
    const PrefixCheckpointParts parts{states, tail, format};
    return client_.PrefixStoreCheckpoint(ns_, anchor, length, position, parts);
  };
  PREFIXD_RETURN_IF_ERROR(SaveStore(through_file, over_socket, report));
  ++report.checkpoints_stored;
  return Status::Ok();
}

uint64_t PromptCache::Impl::Restore(llama_seq_id seq, std::span<const llama_token> tokens,
                                    RestoreReport* out) {
  RestoreReport report;
  ++stats_.restores;
  EmptySequence(seq);
  auto miss = [&](std::string reason) -> uint64_t {
    report.restored = 0;
    report.miss_reason = std::move(reason);
    if (out) *out = std::move(report);
    return 0;
  };
  auto failed = [&](std::string_view kind, const Status& why) -> uint64_t {
    Failed(kind, why);
    EmptySequence(seq);
    return miss(std::string(kind) + ": " + why.ToString());
  };
  if (tokens.size() <= options_.keep_last) return miss("prompt too short");
  const uint64_t limit = tokens.size() - options_.keep_last;
  const uint32_t bs = options_.block_size;
  const std::vector<uint32_t> ids = AsUnsigned(tokens.first(limit));
  const std::vector<PrefixHash> hashes = PrefixBlockHashes(ids, bs);

  auto start = Clock::now();
  if (Status st = Connected(); !st.ok()) return failed("connecting", st);
  Result<std::optional<StateLayout>> layout = ServerLayout();
  if (!layout.ok()) return failed("reading the namespace's layout", layout.status());
  if (!*layout) return miss("nothing stored for this model");
  // First the chain alone: how many of the prompt's blocks are stored. A checkpoint between block
  // boundaries can then only be in the last stored block (a prompt that ended inside the block
  // after it stored its checkpoint before its last token, where the block may be whole) or in
  // the block after it (a prompt that ended there): their positions are the candidates.
  Result<PrefixMatchResult> chain = client_.PrefixMatch(ns_, hashes, {}, 0);
  if (!chain.ok()) return failed("matching", chain.status());
  const uint64_t matched = chain->matched_blocks;
  report.matched_blocks = matched;
  std::vector<PrefixCandidate> at;
  const uint64_t first = matched == 0 ? 1 : (matched - 1) * bs + 1;
  for (uint64_t length = first; length < (matched + 1) * bs && length <= limit; ++length) {
    if (length % bs == 0) continue;  // a block boundary: found through the hashes
    at.push_back({length, PrefixPositionHash(ids, length, bs, hashes)});
  }
  Result<PrefixMatchResult> match = client_.PrefixMatch(
      ns_, std::span<const PrefixHash>(hashes).first(matched), at, options_.lease_ms);
  report.match_ms = MsSince(start);
  if (!match.ok()) return failed("matching", match.status());
  const uint64_t length = match->length;
  if (length == 0) return miss("no restorable prefix");

  // llama.cpp's state laid out first, then the leased fetch (every attention layer's rows and the
  // recurrent blobs, pipelined) read straight into it.
  start = Clock::now();
  const StateLayout& shape = **layout;
  Result<StatePlan> plan =
      PlanState(shape, seq, length, tokens, buffer_.Take(PlannedStateSize(shape, length)));
  if (!plan.ok()) return failed("assembling the state", plan.status());
  // A transposed V cache takes the rows through a scratch buffer (transposed below).
  const bool transpose = shape.has_attention() && shape.attention.v_trans;
  std::vector<uint8_t> v_rows(transpose ? plan->v.size() * length * shape.attention.row_bytes()
                                        : 0);
  std::vector<PrefixLeaseRows> rows;
  for (uint32_t l = 0; l < shape.attention_layers(); ++l) {
    const std::span<uint8_t> v =
        transpose ? std::span<uint8_t>(v_rows).subspan(l * plan->v[l].size(), plan->v[l].size())
                  : plan->v[l];
    rows.push_back({l, plan->k[l], v});
  }
  std::vector<PrefixLeaseBlob> blobs;
  for (size_t i = 0; i < plan->r.size(); ++i) blobs.push_back({plan->r[i], plan->s[i]});
  report.assemble_ms = MsSince(start);
  start = Clock::now();
  if (Status st = FetchLease(match->lease, rows, blobs, report); !st.ok()) {
    return failed("fetching the matched prefix", st);
  }
  report.fetch_ms = MsSince(start);
  report.bytes = match->kv_bytes + match->state_bytes;
  if (transpose) {
    start = Clock::now();
    for (uint32_t l = 0; l < shape.attention_layers(); ++l) {
      TransposeV(shape.attention, length, rows[l].v_rows, plan->v[l]);
    }
    report.assemble_ms += MsSince(start);
  }

  start = Clock::now();
  const size_t read =
      llama_state_seq_set_data_ext(ctx_, plan->bytes.data(), plan->bytes.size(), seq, 0);
  report.load_ms = MsSince(start);
  if (read != plan->bytes.size()) {
    return failed(
        "loading the state into llama.cpp",
        Status::InvalidArgument("llama_state_seq_set_data_ext took " + std::to_string(read) +
                                " of " + std::to_string(plan->bytes.size()) + " bytes"));
  }
  ++stats_.restore_hits;
  stats_.restored_tokens += length;
  report.restored = length;
  if (out) *out = std::move(report);
  return length;
}

Status PromptCache::Impl::Save(llama_seq_id seq, std::span<const llama_token> tokens,
                               std::vector<Capture> captures, bool prefill, SaveReport* out) {
  SaveReport report;
  ++stats_.saves;
  const auto start = Clock::now();
  auto failed = [&](std::string_view kind, Status why) -> Status {
    Failed(kind, why);
    // The namespace may be gone (dropped, or evicted whole): the next Save makes it again.
    namespace_ready_ = false;
    report.ms = MsSince(start);
    if (out) *out = report;
    return why;
  };
  if (tokens.empty()) return Status::Ok();
  if (Status st = Connected(); !st.ok()) return failed("connecting", st);
  std::vector<uint8_t> bytes(llama_state_seq_get_size_ext(ctx_, seq, 0));
  const size_t written = llama_state_seq_get_data_ext(ctx_, bytes.data(), bytes.size(), seq, 0);
  if (written != bytes.size()) {
    return failed("reading the state from llama.cpp",
                  Status::Internal("llama_state_seq_get_data_ext wrote " + std::to_string(written) +
                                   " of " + std::to_string(bytes.size()) + " bytes"));
  }
  Result<SequenceState> state = SequenceState::Parse(bytes, kind_, tokens);
  if (!state.ok()) return failed("taking the state apart", state.status());
  if (Status st = EnsureNamespace(state->layout()); !st.ok()) {
    return failed("preparing the namespace", st);
  }
  const uint32_t bs = options_.block_size;
  const std::vector<uint32_t> ids = AsUnsigned(tokens);
  const std::vector<PrefixHash> hashes = PrefixBlockHashes(ids, bs);

  // Blocks first (a checkpoint's anchor must be stored), from the first one the server lacks.
  const uint64_t storable = prefill ? (tokens.size() - 1) / bs : hashes.size();
  const auto blocks = std::span<const PrefixHash>(hashes).first(storable);
  Result<uint64_t> matched = MatchedBlocks(blocks);
  if (!matched.ok()) return failed("matching", matched.status());
  if (Status st = StoreBlocks(*state, blocks, *matched, report); !st.ok()) {
    return failed("storing blocks", st);
  }
  stats_.blocks_stored += report.blocks_stored;

  // Then the checkpoints: the captures' recurrent states and the state now, each with its tail.
  // A pure transformer needs one only where a partial block ends the sequence.
  if (!prefill) captures.push_back({tokens.size(), {}});
  for (const Capture& c : captures) {
    if (kind_ == MemoryKind::kAttention && c.length % bs == 0) continue;
    Result<bool> stored = HasCheckpoint(hashes, ids, c.length);
    if (!stored.ok()) return failed("matching", stored.status());
    if (*stored) continue;
    std::optional<SequenceState> captured;
    if (!c.bytes.empty()) {
      Result<SequenceState> r =
          SequenceState::ParseRecurrent(c.bytes, static_cast<int32_t>(c.length - 1));
      if (!r.ok()) return failed("taking a captured state apart", r.status());
      if (!(r->layout().recurrent == state->layout().recurrent)) {
        return failed("taking a captured state apart",
                      Status::Corruption("a captured recurrent state has another layout"));
      }
      captured = std::move(*r);
    }
    Status st =
        StoreCheckpoint(*state, captured ? *captured : *state, hashes, ids, c.length, report);
    if (!st.ok()) return failed("storing a checkpoint", st);
  }
  stats_.checkpoints_stored += report.checkpoints_stored;
  if (report.shared_memory) ++stats_.shm_saves;
  report.ms = MsSince(start);
  if (out) *out = report;
  return Status::Ok();
}

Status PromptCache::Impl::Prefill(llama_seq_id seq, std::span<const llama_token> tokens,
                                  uint64_t n_past, SaveReport* report, PromptCache::Mode mode) {
  const bool store = mode != PromptCache::Mode::kDecodeOnly;
  if (n_past > tokens.size()) {
    return Status::InvalidArgument("n_past " + std::to_string(n_past) + " is past the prompt's " +
                                   std::to_string(tokens.size()) + " tokens");
  }
  // Where the chunks end: at every multiple of the block size (the checkpoint interval is one), so
  // that every stored block's rows were computed alone in one chunk, the same in every run that
  // stores it, and restored parts never mix two roundings; and, when storing, before the prompt's
  // last token, which is decoded alone: the state before it is the checkpoint that serves this
  // same prompt again (a restore leaves the last token to decode) and every prompt that extends
  // it. (llama.cpp's CPU kernels round a row differently in batches of other sizes.)
  const uint32_t bs = options_.block_size;
  const uint64_t n = tokens.size();
  const bool recurrent = kind_ != MemoryKind::kAttention;
  const uint64_t interval =
      !recurrent || options_.checkpoint_interval == 0
          ? 0
          : std::max<uint64_t>(bs, options_.checkpoint_interval / bs * uint64_t{bs});
  const uint64_t before_last = mode == PromptCache::Mode::kPrompt && n >= n_past + 2 ? n - 1 : 0;
  std::vector<Capture> captures;
  TokenBatch batch(bs);
  for (uint64_t at = n_past; at < n;) {
    uint64_t end = std::min<uint64_t>(n, (at / bs + 1) * bs);
    if (at < before_last) end = std::min(end, before_last);
    PREFIXD_RETURN_IF_ERROR(batch.Decode(ctx_, seq, tokens, at, end, end == n));
    const bool at_interval = interval != 0 && end % interval == 0 && end < n;
    if (store && (at_interval || end == before_last)) {
      // A transformer's checkpoint is the partial block's K/V, which the end state still holds.
      Capture c{end, {}};
      if (recurrent) {
        c.bytes.resize(llama_state_seq_get_size_ext(ctx_, seq, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY));
        llama_state_seq_get_data_ext(ctx_, c.bytes.data(), c.bytes.size(), seq,
                                     LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
      }
      captures.push_back(std::move(c));
    }
    at = end;
  }
  if (!store) return Status::Ok();
  return Save(seq, tokens, std::move(captures), /*prefill=*/before_last != 0, report);
}

// --- PromptCache ---

Result<PromptCache> PromptCache::Open(llama_context* ctx, const llama_context_params& params,
                                      Client client, const ModelIdentity& identity,
                                      CacheOptions options) {
  PREFIXD_RETURN_IF_ERROR(CheckLibraryRelease());
  if (ctx == nullptr) return Status::InvalidArgument("no llama_context");
  if (options.block_size == 0 || options.block_size > kMaxBlockSize) {
    return Status::InvalidArgument("block_size must be 1.." + std::to_string(kMaxBlockSize));
  }
  if (params.n_batch < options.block_size || params.n_ubatch < options.block_size) {
    return Status::InvalidArgument(
        "the context's n_batch and n_ubatch (" + std::to_string(params.n_batch) + ", " +
        std::to_string(params.n_ubatch) + ") must hold a block of block_size (" +
        std::to_string(options.block_size) + ") tokens");
  }
  if (identity.digest.empty()) return Status::InvalidArgument("the model identity has no digest");
  return PromptCache(
      std::make_unique<Impl>(ctx, params, std::move(client), identity, std::move(options)));
}

PromptCache::PromptCache(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PromptCache::PromptCache(PromptCache&&) noexcept = default;
PromptCache& PromptCache::operator=(PromptCache&&) noexcept = default;
PromptCache::~PromptCache() = default;

uint64_t PromptCache::Restore(llama_seq_id seq, std::span<const llama_token> tokens,
                              RestoreReport* report) {
  return impl_->Restore(seq, tokens, report);
}

Status PromptCache::Save(llama_seq_id seq, std::span<const llama_token> tokens,
                         SaveReport* report) {
  return impl_->Save(seq, tokens, {}, false, report);
}

Status PromptCache::Prefill(llama_seq_id seq, std::span<const llama_token> tokens, uint64_t n_past,
                            SaveReport* report, Mode mode) {
  return impl_->Prefill(seq, tokens, n_past, report, mode);
}

Status PromptCache::Decoded(llama_seq_id seq, std::span<const llama_token> tokens,
                            SaveReport* report) {
  const uint32_t every = impl_->options().decode_interval;
  if (every == 0 || tokens.empty() || tokens.size() % every != 0) return Status::Ok();
  return impl_->Save(seq, tokens, {}, false, report);
}

uint64_t PromptCache::KvBytesPerToken() const { return impl_->KvBytesPerToken(); }
const ModelIdentity& PromptCache::identity() const { return impl_->identity(); }
const std::string& PromptCache::name() const { return impl_->name(); }
const CacheStats& PromptCache::stats() const { return impl_->stats(); }

}  // namespace prefixd::llama
