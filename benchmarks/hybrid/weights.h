// ModelWeights: every parameter of a Qwen3.5-architecture hybrid decoder, held as fp32 in host
// memory, made either deterministically from a seed or loaded from a safetensors checkpoint.
// Built once, then read-only: any number of threads may read a finished ModelWeights.
//
// Names follow the Hugging Face checkpoints (text weights under "model.language_model."):
//   embed_tokens.weight [vocab, hidden]; norm.weight [hidden]; lm_head.weight (untied only);
//   layers.N.{input_layernorm,post_attention_layernorm}.weight [hidden];
//   layers.N.mlp.{gate_proj,up_proj} [ffn, hidden], mlp.down_proj [hidden, ffn];
//   GDN: layers.N.linear_attn.{in_proj_qkv [conv_dim, hidden], in_proj_z [value_dim, hidden],
//        in_proj_b / in_proj_a [Hv, hidden], conv1d.weight [conv_dim, 1, K], A_log [Hv],
//        dt_bias [Hv], norm.weight [Dv], out_proj [hidden, value_dim]};
//   attention: layers.N.self_attn.{q_proj [H*D*2, hidden], k_proj / v_proj [Hkv*D, hidden],
//        o_proj [hidden, H*D], q_norm / k_norm [D]}.
// Matrices are row-major [out, in], as stored. Zero-centred norms keep the stored w (the kernel
// multiplies by 1 + w).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "buffer.h"
#include "config.h"
#include "prefixd/status.h"

namespace prefixd::hybrid {

struct LinearAttentionWeights {
  FloatBuffer in_proj_qkv;  // [conv_dim, hidden], rows in [Q | K | V] order
  FloatBuffer in_proj_z;    // [value_dim, hidden]
  FloatBuffer in_proj_b;    // [Hv, hidden]
  FloatBuffer in_proj_a;    // [Hv, hidden]
  FloatBuffer conv1d;       // [conv_dim, K]
  FloatBuffer a_log;        // [Hv]
  FloatBuffer dt_bias;      // [Hv]
  FloatBuffer norm;         // [Dv], plain weight
  FloatBuffer out_proj;     // [hidden, value_dim]
};

struct FullAttentionWeights {
  FloatBuffer q_proj;  // [H * D * (gate ? 2 : 1), hidden], per head D query rows then D gate rows
  FloatBuffer k_proj;  // [Hkv * D, hidden]
  FloatBuffer v_proj;  // [Hkv * D, hidden]
  FloatBuffer o_proj;  // [hidden, H * D]
  FloatBuffer q_norm;  // [D], zero-centred
  FloatBuffer k_norm;  // [D], zero-centred
};

// A Mamba-2 mixer (transformers' Mamba2Mixer), under "backbone.layers.N.mixer.".
struct Mamba2Weights {
  FloatBuffer in_proj;        // [2·intermediate + 2·G·N + H, hidden], rows [z | xBC | dt]
  FloatBuffer in_proj_bias;   // [in_proj_dim], use_bias only
  FloatBuffer conv1d;         // [conv_dim, K]
  FloatBuffer conv1d_bias;    // [conv_dim], use_conv_bias only
  FloatBuffer dt_bias;        // [H]
  FloatBuffer a_log;          // [H]
  FloatBuffer d;              // [H]
  FloatBuffer norm;           // [intermediate], gated RMSNorm weight (plain)
  FloatBuffer out_proj;       // [hidden, intermediate]
  FloatBuffer out_proj_bias;  // [hidden], use_bias only
};

// A low-rank path: up · act(down · x) + bias ("lora.0.weight", "lora.2.weight", "lora.2.bias").
struct LoraWeights {
  FloatBuffer down;  // [rank, hidden]
  FloatBuffer up;    // [out, rank]
  FloatBuffer bias;  // [out]; empty for the gate path
};

// An RWKV-7 block (flash-linear-attention's RWKV7Block), under "model.layers.N.".
struct Rwkv7Weights {
  FloatBuffer pre_norm_w, pre_norm_b;        // [hidden], layer 0 only (LayerNorm on the embedding)
  FloatBuffer attn_norm_w, attn_norm_b;      // [hidden]
  FloatBuffer x_r, x_w, x_k, x_v, x_a, x_g;  // [hidden] token-shift mixes
  FloatBuffer k_k, k_a;                      // [hidden]
  FloatBuffer r_k;                           // [H, N]
  FloatBuffer r_proj, k_proj, v_proj;        // [hidden, hidden]
  FloatBuffer o_proj;                        // [hidden, hidden]
  LoraWeights w_lora, a_lora, v_lora, g_lora;  // v_lora: layers > 0 only
  FloatBuffer g_norm_w, g_norm_b;              // [hidden], GroupNorm of H groups
  FloatBuffer ffn_norm_w, ffn_norm_b;          // [hidden]
  FloatBuffer ffn_x_k;                         // [hidden]
  FloatBuffer ffn_key;                         // [ffn, hidden]
  FloatBuffer ffn_value;                       // [hidden, ffn]
};

struct LayerWeights {
  LayerKind kind = LayerKind::kLinear;
  FloatBuffer input_norm;         // [hidden], zero-centred
  FloatBuffer post_norm;          // [hidden], zero-centred
  FloatBuffer mlp_gate;           // [ffn, hidden]
  FloatBuffer mlp_up;             // [ffn, hidden]
  FloatBuffer mlp_down;           // [hidden, ffn]
  LinearAttentionWeights linear;  // kLinear only
  FullAttentionWeights attn;      // kFullAttention only
  Mamba2Weights mamba2;           // kMamba2 only (input_norm: the block's plain RMSNorm)
  Rwkv7Weights rwkv7;             // kRwkv7 only
};

struct ModelWeights {
  FloatBuffer embed;            // [vocab, hidden]
  FloatBuffer final_norm;       // [hidden], zero-centred
  FloatBuffer lm_head;          // [vocab, hidden]; empty when the embeddings are tied
  FloatBuffer final_norm_bias;  // [hidden], RWKV-7's final LayerNorm only
  std::vector<LayerWeights> layers;
  // What produced these numbers, for the prefix-cache namespace: "synthetic:v1:seed=N" or
  // "safetensors:<digest of headers and sizes>".
  std::string identity;

  const FloatBuffer& output_embedding() const { return lm_head.empty() ? embed : lm_head; }
  size_t bytes() const;
};

// How the synthetic generator fills a tensor.
enum class InitKind : uint8_t {
  kLinear,           // uniform, std = gain / sqrt(fan_in)
  kEmbedding,        // uniform, std 0.02
  kZeroCentredNorm,  // w near 0 (so 1 + w near 1)
  kPlainNorm,        // w near 1
  kALog,             // log(U(1, 16)), as the reference init
  kDtBias,           // softplus^-1(dt), dt log-uniform in [1e-3, 1e-1]
  kConv,             // uniform, std = 1 / sqrt(3 K)
  kBias,             // uniform in [-0.05, 0.05]
  kUnitInterval,     // uniform in [0, 1) (RWKV-7's token-shift mixes)
};

// One parameter: its checkpoint name below "model.language_model." (Qwen3.5), "model." (Qwen3.5
// text-only, RWKV-7) or "backbone." (Mamba-2), or "lm_head.weight"; its
// checkpoint shape, where it goes, and how to synthesise it.
struct TensorSlot {
  std::string name;
  std::vector<int64_t> shape;
  FloatBuffer* dest = nullptr;
  InitKind init = InitKind::kLinear;
  float gain = 1.0f;
};

// Every parameter the config needs, in a fixed order; `weights->layers` is sized to match.
std::vector<TensorSlot> TensorSlots(const ModelConfig& config, ModelWeights* weights);
// The same for the Mamba-2 and RWKV-7 families (family_weights.cc).
std::vector<TensorSlot> FamilyTensorSlots(const ModelConfig& config, ModelWeights* weights);
// Every family-specific buffer of a layer, for byte counts.
std::vector<const FloatBuffer*> FamilyLayerBuffers(const LayerWeights& layer);

// Deterministic synthetic weights: element i of tensor `name` is a function of (seed, name, i)
// only, so generation runs in parallel on `threads` threads and gives the same bits anywhere.
// Scaled so activations stay finite over 32K tokens (projections ~ 1/sqrt(fan_in), output
// projections halved, norms near identity, decays in the reference init's range).
Result<ModelWeights> SyntheticWeights(const ModelConfig& config, uint64_t seed, int threads);

// One tensor of a safetensors file: its header entry, offsets relative to the data section.
struct SafetensorsTensor {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", ...
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// A safetensors file opened for reading: the 8-byte little-endian header length, a JSON header
// naming each tensor's dtype, shape and [begin, end) data offsets, then the data. Open()
// validates all of it against the file before anything is read: header length within the file,
// JSON well-formed, known dtypes, non-negative shapes whose byte size equals end - begin, every
// range inside the data section and no two ranges overlapping.
class SafetensorsFile {
 public:
  static Result<SafetensorsFile> Open(const std::string& path);
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* Find(std::string_view name) const;
  const std::string& header() const { return header_; }
  uint64_t file_size() const { return file_size_; }

  // Reads one F32, F16 or BF16 tensor widened to fp32 into `out` (exactly its element count).
  Status ReadAsFloat32(const SafetensorsTensor& tensor, std::span<float> out) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  uint64_t data_start_ = 0;
  std::string header_;
  std::vector<SafetensorsTensor> tensors_;
};

// Loads a checkpoint: one .safetensors file, or a directory of them (shards). Text weights are
// looked up under "model.language_model." (VLM checkpoints), then "model." (text-only ones);
// "model.visual.*" and "mtp.*" are skipped. Every tensor the config needs must be present with
// exactly the expected shape.
Result<ModelWeights> LoadSafetensorsWeights(const ModelConfig& config, const std::string& path,
                                            int threads);

// "synthetic" (seed 0), "synthetic:<seed>", or a safetensors path.
Result<ModelWeights> LoadWeights(const ModelConfig& config, std::string_view spec, int threads);

}  // namespace prefixd::hybrid
