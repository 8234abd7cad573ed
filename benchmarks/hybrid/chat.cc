#include "chat.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "prefix_cache.h"
#include "prefixd/state_blob.h"

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

// The layers of the namespace: attention layers by rank (ATTN) and the others (RECURRENT).
struct LayerMap {
  std::vector<size_t> attention, recurrent;
  explicit LayerMap(const ModelConfig& c) {
    for (size_t i = 0; i < c.layers.size(); ++i) {
      (c.layers[i] == LayerKind::kFullAttention ? attention : recurrent).push_back(i);
    }
  }
};

// One conversation against one namespace: the prefix index's client side.
class ChatSession {
 public:
  ChatSession(Backend& backend, PrefixdLink& link, std::string ns, const ChatOptions& options)
      : backend_(backend),
        config_(backend.config()),
        link_(link),
        ns_(std::move(ns)),
        options_(options),
        layers_(config_) {}

  Status Open() {
    PREFIXD_RETURN_IF_ERROR(Call([&](Client& c) { return c.Command({"DEL", ns_}); }).status());
    PrefixShape shape;
    shape.block_size = options_.block;
    shape.attention_layers = static_cast<uint32_t>(layers_.attention.size());
    shape.kv_dim = static_cast<uint32_t>(config_.kv_dim());
    shape.recurrent_layers = static_cast<uint32_t>(layers_.recurrent.size());
    shape.vquant = "fp32";  // lossless: the bit-exact check needs it
    return Call([&](Client& c) { return c.PrefixNamespaceCreate(ns_, shape); });
  }

  // One turn of `prompt`; `checkpoint_at`: positions inside it (besides its end) where the
  // client stores a checkpoint on the way (the end of a shared system prompt).
  Result<ChatRow> Turn(int turn, const std::vector<int32_t>& prompt,
                       const std::vector<int64_t>& checkpoint_at, std::vector<int32_t>* reply) {
    const bool kv_only = options_.restore == "kv-only";
    const int64_t len = static_cast<int64_t>(prompt.size());
    const uint32_t bs = options_.block;
    const std::vector<uint32_t> u32 = AsU32(prompt);
    const std::vector<PrefixHash> blocks = PrefixBlockHashes(u32, bs);
    ChatRow row;
    row.turn = turn;
    row.prompt_tokens = len;
    std::vector<float> logits(static_cast<size_t>(config_.vocab_size));

    // Warm: match, fetch, hydrate, prefill the rest. At least one token is prefilled (its
    // logits give the first reply token), so the chain offered stops before the last token.
    const auto start = Clock::now();
    double paused_ms = 0;
    const size_t offered = static_cast<size_t>((len - 1) / bs);
    std::vector<PrefixCandidate> candidates;
    for (int64_t l : stored_lengths_) {
      if (l < len) candidates.push_back({static_cast<uint64_t>(l), Position(u32, l, blocks)});
    }
    PREFIXD_ASSIGN_OR_RETURN(PrefixMatchResult m, Call([&](Client& c) {
                               return c.PrefixMatch(ns_, std::span(blocks).first(offered),
                                                    candidates);
                             }));
    const int64_t matched = static_cast<int64_t>(m.length);
    backend_.Reset(len + options_.reply_tokens + 1);
    if (matched > 0) {
      PREFIXD_ASSIGN_OR_RETURN(row.fetched_bytes, kv_only ? HydrateKvOnly(m, blocks) : Hydrate(m));
    }
    PREFIXD_RETURN_IF_ERROR(backend_.PushState());
    std::vector<int64_t> cuts;
    if (matched > 0) cuts = history_.at(m.position);
    size_t stored_blocks = std::min<size_t>(m.matched_blocks, offered);
    int64_t at = matched;
    for (int64_t point : checkpoint_at) {
      if (point <= at || point >= len) continue;
      PREFIXD_RETURN_IF_ERROR(backend_.Forward(std::span(prompt).subspan(at, point - at), {}));
      const auto pause = Clock::now();
      PREFIXD_RETURN_IF_ERROR(StoreCheckpoint(u32, blocks, point, &stored_blocks));
      cuts.push_back(point);
      history_[Position(u32, point, blocks)] = cuts;
      paused_ms += MsSince(pause);
      at = point;
    }
    PREFIXD_RETURN_IF_ERROR(backend_.Forward(std::span(prompt).subspan(at), logits));
    const int32_t first = Argmax(logits);
    row.warm_ttft_ms = MsSince(start) - paused_ms;
    row.matched_tokens = matched;
    row.prefilled_tokens = len - matched;
    cuts.push_back(len);

    // Untimed: the state the model now holds, stored for later turns.
    PREFIXD_RETURN_IF_ERROR(backend_.PullState());
    const std::vector<std::string> warm_digests = DigestState(backend_.host_state());
    PREFIXD_RETURN_IF_ERROR(StoreCheckpoint(u32, blocks, len, &stored_blocks));
    history_[Position(u32, len, blocks)] = cuts;
    PREFIXD_ASSIGN_OR_RETURN(std::vector<int32_t> warm_tokens,
                             GreedyContinue(backend_, first, options_.reply_tokens));

    // Cold: the whole prompt from an empty state, fed in the same pieces as the warm history
    // (the prompt's checkpoints' cuts), which is what makes bit-exactness a fair demand
    // (model.h: prefill(a + b) and prefill(a), prefill(b) agree only up to rounding).
    backend_.Reset(len + options_.reply_tokens + 1);
    const auto cold_start = Clock::now();
    int64_t from = 0;
    for (int64_t cut : cuts) {
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
    *reply = cold_tokens;  // the conversation continues with the correct reply
    return row;
  }

 private:
  PrefixHash Position(const std::vector<uint32_t>& u32, int64_t l,
                      const std::vector<PrefixHash>& blocks) const {
    return PrefixPositionHash(u32, static_cast<uint64_t>(l), options_.block, blocks);
  }

  // Attention rows of the lease into the state, then the recurrent blobs. Returns bytes moved.
  Result<uint64_t> Hydrate(const PrefixMatchResult& m) {
    SequenceState& state = backend_.host_state();
    const int64_t n = static_cast<int64_t>(m.length);
    const size_t rows = static_cast<size_t>(n) * static_cast<size_t>(config_.kv_dim());
    state.ResizeTokens(n);
    uint64_t bytes = 0;
    std::vector<float> buf(2 * rows);
    for (size_t r = 0; r < layers_.attention.size(); ++r) {
      PREFIXD_ASSIGN_OR_RETURN(size_t got, Call([&](Client& c) {
                                 return c.PrefixLeaseFetchAttention(
                                     ns_, m.lease, static_cast<uint32_t>(r), 0, m.length, buf);
                               }));
      if (got != buf.size()) return Status::Internal("short attention fetch");
      LayerState& layer = state.layers()[layers_.attention[r]];
      std::memcpy(layer.k.data(), buf.data(), rows * sizeof(float));
      std::memcpy(layer.v.data(), buf.data() + rows, rows * sizeof(float));
      bytes += buf.size() * sizeof(float);
    }
    PREFIXD_ASSIGN_OR_RETURN(std::vector<Blob> blobs, Call([&](Client& c) {
                               return c.PrefixLeaseFetchState(ns_, m.lease, {}, /*release=*/true);
                             }));
    if (blobs.size() != layers_.recurrent.size()) {
      return Status::Internal("the checkpoint has " + std::to_string(blobs.size()) +
                              " recurrent layers, the model " +
                              std::to_string(layers_.recurrent.size()));
    }
    for (size_t q = 0; q < blobs.size(); ++q) {
      PREFIXD_RETURN_IF_ERROR(LoadRecurrent(state.layers()[layers_.recurrent[q]], blobs[q]));
      bytes += blobs[q].size();
    }
    state.set_n_tokens(n);
    return bytes;
  }

  // The negative control: the same blocks (KV.PREFIX.BFETCH) and tail (through the lease) for
  // the same L, but the recurrent layers start from zero.
  Result<uint64_t> HydrateKvOnly(const PrefixMatchResult& m,
                                 const std::vector<PrefixHash>& blocks) {
    SequenceState& state = backend_.host_state();
    const int64_t n = static_cast<int64_t>(m.length);
    const size_t dim = static_cast<size_t>(config_.kv_dim());
    const size_t full = static_cast<size_t>(n / options_.block);
    const size_t head = full * options_.block, tail = static_cast<size_t>(n) - head;
    state.ResizeTokens(n);
    uint64_t bytes = 0;
    for (size_t r = 0; r < layers_.attention.size(); ++r) {
      LayerState& layer = state.layers()[layers_.attention[r]];
      if (full > 0) {
        std::vector<float> buf(2 * head * dim);
        PREFIXD_ASSIGN_OR_RETURN(std::optional<size_t> got, Call([&](Client& c) {
                                   return c.PrefixFetchBlocks(ns_, std::span(blocks).first(full),
                                                              static_cast<uint32_t>(r), buf);
                                 }));
        if (!got) return Status::Internal("a matched block is missing");
        std::memcpy(layer.k.data(), buf.data(), head * dim * sizeof(float));
        std::memcpy(layer.v.data(), buf.data() + head * dim, head * dim * sizeof(float));
        bytes += buf.size() * sizeof(float);
      }
      if (tail > 0) {
        std::vector<float> buf(2 * tail * dim);
        PREFIXD_RETURN_IF_ERROR(Call([&](Client& c) {
                                  return c.PrefixLeaseFetchAttention(ns_, m.lease,
                                                                     static_cast<uint32_t>(r), head,
                                                                     static_cast<uint64_t>(n), buf);
                                }).status());
        std::memcpy(layer.k.data() + head * dim, buf.data(), tail * dim * sizeof(float));
        std::memcpy(layer.v.data() + head * dim, buf.data() + tail * dim,
                    tail * dim * sizeof(float));
        bytes += buf.size() * sizeof(float);
      }
    }
    PREFIXD_RETURN_IF_ERROR(
        Call([&](Client& c) { return c.PrefixRelease(ns_, m.lease); }).status());
    state.set_n_tokens(n);
    return bytes;
  }

  Status LoadRecurrent(LayerState& layer, const Blob& blob) {
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
  Status StoreCheckpoint(const std::vector<uint32_t>& u32, const std::vector<PrefixHash>& blocks,
                         int64_t at, size_t* stored_blocks) {
    PREFIXD_RETURN_IF_ERROR(backend_.PullState());
    const SequenceState& state = backend_.host_state();
    const uint32_t bs = options_.block;
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
    const PrefixHash position = Position(u32, at, blocks);
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
  LayerMap layers_;
  // Every checkpoint this client stored: its length (an AT candidate for later prompts) and, by
  // position, the pieces its state was computed in (for the cold comparison).
  std::set<int64_t> stored_lengths_;
  std::map<PrefixHash, std::vector<int64_t>> history_;
};

}  // namespace

Result<std::vector<ChatRow>> RunChatWorkload(Backend& backend, std::string_view weights_identity,
                                             PrefixdLink& link, const ChatOptions& o) {
  if (o.workload != "multiturn" && o.workload != "fanout" && o.workload != "branch") {
    return Status::InvalidArgument("--workload must be multiturn, fanout or branch");
  }
  if (o.restore != "full" && o.restore != "kv-only") {
    return Status::InvalidArgument("--restore must be full or kv-only");
  }
  if (o.turns < 2) return Status::InvalidArgument("--turns must be at least 2");
  if (o.block < 1 || o.block > 4096) return Status::InvalidArgument("--block must be 1..4096");
  if (o.system_tokens < 1 || o.message_tokens < 2 || o.reply_tokens < 1) {
    return Status::InvalidArgument(
        "--system-tokens, --message-tokens and --reply-tokens must "
        "be at least 1, 2 and 1");
  }
  const ModelConfig& config = backend.config();
  const std::string ns = "{" + PrefixDigestName(config, weights_identity, {}) + ":chat:b" +
                         std::to_string(o.block) + "}";
  ChatSession session(backend, link, ns, o);
  PREFIXD_RETURN_IF_ERROR(session.Open());
  const int64_t vocab = config.vocab_size;
  const std::vector<int32_t> system = PseudoRandomTokens(o.system_tokens, vocab, o.seed);
  auto message = [&](int turn) {
    return PseudoRandomTokens(o.message_tokens, vocab, o.seed * 1000003 + turn);
  };
  const int64_t system_end = o.system_tokens;
  // fanout and branch keep a checkpoint at the end of the shared system prompt.
  const std::vector<int64_t> points =
      o.workload == "multiturn" ? std::vector<int64_t>{} : std::vector<int64_t>{system_end};

  std::vector<ChatRow> rows;
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
    PREFIXD_ASSIGN_OR_RETURN(ChatRow row, session.Turn(turn, prompt, points, &reply));
    row.edit_position = edit;
    std::fprintf(
        stderr,
        "turn %2d  prompt %6lld  matched %6lld  prefilled %6lld  cold %9.1f ms  warm "
        "%8.1f ms  %6.1fx  bit-exact %s  tokens %d/%d\n",
        turn, static_cast<long long>(row.prompt_tokens), static_cast<long long>(row.matched_tokens),
        static_cast<long long>(row.prefilled_tokens), row.cold_ttft_ms, row.warm_ttft_ms,
        row.speedup(), row.states_bitexact ? "yes" : "NO", row.agreeing_tokens, row.total_tokens);
    rows.push_back(row);
  }
  return rows;
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

std::string ChatMarkdown(const std::vector<ChatRow>& rows, std::string_view title) {
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
  return out.str();
}

}  // namespace prefixd::hybrid
