// The hybrid model's per-sequence state and the backend interface that runs the forward pass
// (CPU: cpu_backend.h, CUDA: cuda_backend.h). A Backend and its state belong to one thread.
//
// Prefix state, per layer (the layouts the prefix cache stores, named explicitly):
//   Gated DeltaNet: conv      [K−1, conv_dim]  fp32, the last K−1 pre-conv inputs, oldest first,
//                                               channels in [Q | K | V] order;
//                   recurrent [Hv, Dv, Dk]     fp32, value-major: element (h, i, j) is row i,
//                                               column j of M_h = S_hᵀ (S_h key-major as in HF).
//   full attention: k, v      [n_tokens, Hkv·D] fp32, K after k_norm and RoPE, V raw.
//   Mamba-2:        conv      [K−1, conv_dim]  fp32, the last K−1 pre-conv xBC rows, oldest first;
//                   recurrent [H, P, N]        fp32, the SSM state (HF's ssm_states layout).
//   RWKV-7:         conv      [1, hidden]      fp32, time-mix token shift: the last attn_norm
//                                               output;
//                   recurrent [H, Dv, Dk]      fp32, value-major WKV state (BlinkDL's layout,
//                                               the transpose of fla's key-major one);
//                   ffn_shift [1, hidden]      fp32, channel-mix token shift: the last ffn_norm
//                                               output.
//
// Bit-exactness contract: Forward() is one function for prefill and decode, deterministic for
// given (state, tokens) on one binary and CPU. So hydrating the state a cold prefill produced
// and running the same suffix gives the same bits as continuing the cold run. Forward() cuts a
// long prompt into fixed-size chunks from its first token, so prefill(a + b) and prefill(a) then
// prefill(b) agree only up to rounding, not bit for bit (GEMM shapes differ).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "buffer.h"
#include "config.h"
#include "prefixd/status.h"
#include "weights.h"

namespace prefixd::hybrid {

struct LayerState {
  LayerKind kind = LayerKind::kLinear;
  FloatBuffer conv;       // GDN: [K−1, conv_dim]
  FloatBuffer recurrent;  // GDN: [Hv, Dv, Dk]
  FloatBuffer k;          // attention: [n_tokens, kv_dim] (size() is exactly n_tokens rows)
  FloatBuffer v;          // attention: [n_tokens, kv_dim]
  FloatBuffer ffn_shift;  // RWKV-7: [1, hidden]

  uint64_t bytes() const {
    return conv.bytes() + recurrent.bytes() + k.bytes() + v.bytes() + ffn_shift.bytes();
  }
};

// The fixed-size arrays of a recurrent layer's state (GDN, Mamba-2, RWKV-7) in stored order,
// each with its state-blob shape (a leading batch dimension of 1); empty for attention layers.
enum class StateSlot : uint8_t { kConv, kRecurrent, kFfnShift };
struct StateArraySpec {
  StateSlot slot;
  std::vector<uint32_t> shape;
};
FloatBuffer& SlotBuffer(LayerState& layer, StateSlot slot);
const FloatBuffer& SlotBuffer(const LayerState& layer, StateSlot slot);
std::vector<StateArraySpec> RecurrentStateArrays(const ModelConfig& config, LayerKind kind);

class SequenceState {
 public:
  SequenceState() = default;
  explicit SequenceState(const ModelConfig& config);

  // Back to the empty sequence: zero GDN state, no attention rows.
  void Clear();
  // Capacity for `tokens` attention rows, so appends do not reallocate.
  void Reserve(int64_t tokens);
  // Sets the sequence length, sizing every attention layer to n rows (contents unspecified for
  // new rows): the first step of hydration.
  void ResizeTokens(int64_t n);

  int64_t n_tokens() const { return n_tokens_; }
  void set_n_tokens(int64_t n) { n_tokens_ = n; }
  int64_t kv_dim() const { return kv_dim_; }
  std::vector<LayerState>& layers() { return layers_; }
  const std::vector<LayerState>& layers() const { return layers_; }
  // Payload bytes of the whole state (what a prefix store moves).
  uint64_t bytes() const;

 private:
  int64_t n_tokens_ = 0;
  int64_t kv_dim_ = 0;
  std::vector<LayerState> layers_;
};

// 128-bit XXH3 of one layer's state in its stored order: conv, recurrent(, ffn_shift), or k, v.
using LayerDigest = std::array<uint64_t, 2>;
LayerDigest DigestLayer(const LayerState& layer);
std::string DigestHex(const LayerDigest& digest);
std::vector<std::string> DigestState(const SequenceState& state);

using ProgressFn = std::function<void(int64_t tokens_done, int64_t tokens_total)>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual const ModelConfig& config() const = 0;

  // Appends `tokens` to the sequence. When `logits` is non-empty (vocab_size floats) it receives
  // the logits after the last token; otherwise the output head is skipped. `progress`, if set,
  // is called after each chunk.
  virtual Status Forward(std::span<const int32_t> tokens, std::span<float> logits,
                         const ProgressFn& progress = {}) = 0;

  // The sequence state in host memory. On the CPU this is the live state; a device backend
  // keeps a mirror that PullState() refreshes and PushState() uploads (after hydration).
  virtual SequenceState& host_state() = 0;
  virtual Status PullState() = 0;
  virtual Status PushState() = 0;

  // Empty sequence, with room for `reserve_tokens` attention rows.
  virtual void Reset(int64_t reserve_tokens = 0) = 0;
};

// The checks every Backend::Forward makes: at least one token, every id inside the vocabulary,
// and `logits` empty or exactly vocab_size floats.
Status CheckForwardArgs(const ModelConfig& config, std::span<const int32_t> tokens,
                        std::span<const float> logits);

// Index of the largest logit; the first on ties.
int32_t Argmax(std::span<const float> logits);

// Greedy decoding: `first` was chosen from the prompt's logits; feeds it and each next token
// back for a total of `count` tokens (first included).
Result<std::vector<int32_t>> GreedyContinue(Backend& backend, int32_t first, int count);

// `n` deterministic pseudo-random token ids in [0, vocab), from `seed`.
std::vector<int32_t> PseudoRandomTokens(int64_t n, int64_t vocab, uint64_t seed);

}  // namespace prefixd::hybrid
