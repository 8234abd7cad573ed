// ModelConfig: the shape of a Qwen3.5-architecture hybrid decoder (Gated DeltaNet layers and
// gated full-attention layers, 3:1), or of a pure recurrent Mamba-2 or RWKV-7 model
// (family_config.h), from a built-in name or a Hugging Face style config.json.
// Plain values: any thread.
//
// The math these shapes feed is in ../shared/reference/qwen35-arch.md; the names below follow the
// Hugging Face fields (hidden_size, linear_num_value_heads, ...) so a config.json maps 1:1.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "prefixd/status.h"

namespace prefixd::hybrid {

enum class LayerKind : uint8_t {
  kLinear,         // Gated DeltaNet ("linear_attention")
  kFullAttention,  // gated softmax attention ("full_attention")
  kMamba2,         // a Mamba-2 (SSD) mixer block (family_config.h)
  kRwkv7,          // an RWKV-7 time-mix + channel-mix block (family_config.h)
};

// Which architecture the layers belong to. Qwen3.5 mixes kLinear and kFullAttention; the pure
// recurrent families have one layer kind each.
enum class ModelFamily : uint8_t { kQwen35, kMamba2, kRwkv7 };

// Mamba-2's shape (Hugging Face Mamba2Config names). intermediate = num_heads · head_dim
// (= expand · hidden_size); B and C are shared by the heads of each of n_groups groups.
struct Mamba2Shape {
  int64_t state_size = 128;
  int64_t n_groups = 1;
  int64_t num_heads = 0;
  int64_t head_dim = 64;
  int64_t conv_kernel = 4;
  bool use_conv_bias = true;
  bool use_bias = false;
  double time_step_min = 0.0;  // time_step_limit: dt is clamped to [min, max]
  double time_step_max = 1e300;

  int64_t intermediate() const { return num_heads * head_dim; }
  int64_t conv_dim() const { return intermediate() + 2 * n_groups * state_size; }
  int64_t in_proj_dim() const { return 2 * intermediate() + 2 * n_groups * state_size + num_heads; }
};

// RWKV-7's shape (flash-linear-attention RWKV7Config names). Heads are hidden_size / head_dim;
// the FFN width is ModelConfig::intermediate_size.
struct Rwkv7Shape {
  int64_t head_dim = 64;
  int64_t decay_low_rank_dim = 64;
  int64_t a_low_rank_dim = 64;
  int64_t v_low_rank_dim = 32;
  int64_t gate_low_rank_dim = 128;
};

struct ModelConfig {
  std::string name;
  ModelFamily family = ModelFamily::kQwen35;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = true;
  std::vector<LayerKind> layers;

  // Full attention.
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  double partial_rotary_factor = 0.25;
  double rope_theta = 1e7;
  bool attn_output_gate = true;

  // Gated DeltaNet.
  int64_t linear_num_key_heads = 0;
  int64_t linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_conv_kernel_dim = 4;

  // The pure recurrent families (family_config.h); rms_norm_eps is their norm epsilon.
  Mamba2Shape mamba2;
  Rwkv7Shape rwkv7;

  int64_t num_layers() const { return static_cast<int64_t>(layers.size()); }
  int64_t rope_dim() const {
    return static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary_factor);
  }
  // Query projection width: per head, D query values then (with the gate) D gate values.
  int64_t q_proj_dim() const { return num_attention_heads * head_dim * (attn_output_gate ? 2 : 1); }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
  int64_t key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
  int64_t value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  int64_t num_linear_layers() const;
  int64_t num_attention_layers() const;

  // Every derived size positive, heads divisible, rope_dim even and within head_dim.
  Status Validate() const;

  // Every field in a fixed textual form: two configs with the same Canonical() compute the same
  // function (given the same weights). Part of the prefix-cache namespace.
  std::string Canonical() const;

  // One line for logs: "qwen3.5-0.8b: 24 layers (18 GDN + 6 attention), hidden 1024, ...".
  std::string Summary() const;
};

// "tiny" (tests), "small" (a scaled-down shape for 32K-token CPU sweeps), "qwen3.5-0.8b",
// "qwen3.5-4b".
Result<ModelConfig> BuiltinConfig(std::string_view name);
std::vector<std::string> BuiltinConfigNames();

// Parses a Hugging Face Qwen3.5 config.json (flat, or a VLM's with the text settings under
// "text_config"). A missing field takes transformers' Qwen3_5TextConfig default (untied
// embeddings, 32 linear value heads, rope_theta 10000, ...: docs/reference-client.md), never a
// built-in shape's; a setting this model does not compute (rope_type other than default,
// attention_bias, hidden_act other than silu, experts, another model_type) is an error naming it.
Result<ModelConfig> ConfigFromJson(std::string_view json_text, std::string name);

// A built-in name, or a path to a config.json (or to a directory holding one).
Result<ModelConfig> LoadConfig(std::string_view name_or_path);

}  // namespace prefixd::hybrid
