// The parameters of the Mamba-2 and RWKV-7 families with their upstream checkpoint names
// (weights.h describes TensorSlot; the loader adds the "backbone." or "model." prefix).
#include <functional>

#include "family_config.h"
#include "weights.h"

namespace prefixd::hybrid {
namespace {

using Add = std::function<void(std::string, std::vector<int64_t>, FloatBuffer*, InitKind, float)>;

void Mamba2Slots(const ModelConfig& c, LayerWeights& l, const std::string& p, const Add& add) {
  const Mamba2Shape& m = c.mamba2;
  const int64_t hidden = c.hidden_size;
  Mamba2Weights& w = l.mamba2;
  const std::string a = p + "mixer.";
  add(p + "norm.weight", {hidden}, &l.input_norm, InitKind::kPlainNorm, 1.0f);
  add(a + "in_proj.weight", {m.in_proj_dim(), hidden}, &w.in_proj, InitKind::kLinear, 1.0f);
  if (m.use_bias) add(a + "in_proj.bias", {m.in_proj_dim()}, &w.in_proj_bias, InitKind::kBias, 1);
  add(a + "conv1d.weight", {m.conv_dim(), 1, m.conv_kernel}, &w.conv1d, InitKind::kConv, 1.0f);
  if (m.use_conv_bias) {
    add(a + "conv1d.bias", {m.conv_dim()}, &w.conv1d_bias, InitKind::kBias, 1.0f);
  }
  add(a + "dt_bias", {m.num_heads}, &w.dt_bias, InitKind::kDtBias, 1.0f);
  add(a + "A_log", {m.num_heads}, &w.a_log, InitKind::kALog, 1.0f);
  add(a + "D", {m.num_heads}, &w.d, InitKind::kPlainNorm, 1.0f);
  add(a + "norm.weight", {m.intermediate()}, &w.norm, InitKind::kPlainNorm, 1.0f);
  add(a + "out_proj.weight", {hidden, m.intermediate()}, &w.out_proj, InitKind::kLinear, 0.5f);
  if (m.use_bias) add(a + "out_proj.bias", {hidden}, &w.out_proj_bias, InitKind::kBias, 1.0f);
}

void LoraSlots(const std::string& name, int64_t hidden, int64_t rank, int64_t out, bool bias,
               LoraWeights& w, const Add& add) {
  add(name + ".lora.0.weight", {rank, hidden}, &w.down, InitKind::kLinear, 1.0f);
  add(name + ".lora.2.weight", {out, rank}, &w.up, InitKind::kLinear, 0.5f);
  if (bias) add(name + ".lora.2.bias", {out}, &w.bias, InitKind::kBias, 1.0f);
}

void Rwkv7Slots(const ModelConfig& c, int64_t layer, LayerWeights& l, const std::string& p,
                const Add& add) {
  const Rwkv7Shape& r = c.rwkv7;
  const int64_t hidden = c.hidden_size;
  Rwkv7Weights& w = l.rwkv7;
  if (layer == 0) {
    add(p + "pre_norm.weight", {hidden}, &w.pre_norm_w, InitKind::kPlainNorm, 1.0f);
    add(p + "pre_norm.bias", {hidden}, &w.pre_norm_b, InitKind::kBias, 1.0f);
  }
  add(p + "attn_norm.weight", {hidden}, &w.attn_norm_w, InitKind::kPlainNorm, 1.0f);
  add(p + "attn_norm.bias", {hidden}, &w.attn_norm_b, InitKind::kBias, 1.0f);
  const std::string a = p + "attn.";
  const std::pair<const char*, FloatBuffer*> mixes[] = {{"x_r", &w.x_r}, {"x_w", &w.x_w},
                                                        {"x_k", &w.x_k}, {"x_v", &w.x_v},
                                                        {"x_a", &w.x_a}, {"x_g", &w.x_g}};
  for (const auto& [name, dest] : mixes) {
    add(a + name, {1, 1, hidden}, dest, InitKind::kUnitInterval, 1.0f);
  }
  add(a + "k_k", {hidden}, &w.k_k, InitKind::kPlainNorm, 1.0f);
  add(a + "k_a", {hidden}, &w.k_a, InitKind::kPlainNorm, 1.0f);
  add(a + "r_k", {Rwkv7Heads(c), r.head_dim}, &w.r_k, InitKind::kBias, 1.0f);
  add(a + "r_proj.weight", {hidden, hidden}, &w.r_proj, InitKind::kLinear, 1.0f);
  add(a + "k_proj.weight", {hidden, hidden}, &w.k_proj, InitKind::kLinear, 1.0f);
  add(a + "v_proj.weight", {hidden, hidden}, &w.v_proj, InitKind::kLinear, 1.0f);
  add(a + "o_proj.weight", {hidden, hidden}, &w.o_proj, InitKind::kLinear, 0.5f);
  LoraSlots(a + "w_lora", hidden, r.decay_low_rank_dim, hidden, true, w.w_lora, add);
  if (layer != 0) LoraSlots(a + "v_lora", hidden, r.v_low_rank_dim, hidden, true, w.v_lora, add);
  LoraSlots(a + "a_lora", hidden, r.a_low_rank_dim, hidden, true, w.a_lora, add);
  LoraSlots(a + "g_lora", hidden, r.gate_low_rank_dim, hidden, false, w.g_lora, add);
  add(a + "g_norm.weight", {hidden}, &w.g_norm_w, InitKind::kPlainNorm, 1.0f);
  add(a + "g_norm.bias", {hidden}, &w.g_norm_b, InitKind::kBias, 1.0f);
  add(p + "ffn_norm.weight", {hidden}, &w.ffn_norm_w, InitKind::kPlainNorm, 1.0f);
  add(p + "ffn_norm.bias", {hidden}, &w.ffn_norm_b, InitKind::kBias, 1.0f);
  add(p + "ffn.x_k", {hidden}, &w.ffn_x_k, InitKind::kUnitInterval, 1.0f);
  add(p + "ffn.key.weight", {c.intermediate_size, hidden}, &w.ffn_key, InitKind::kLinear, 1.0f);
  add(p + "ffn.value.weight", {hidden, c.intermediate_size}, &w.ffn_value, InitKind::kLinear, 0.5f);
}

}  // namespace

std::vector<TensorSlot> FamilyTensorSlots(const ModelConfig& c, ModelWeights* w) {
  std::vector<TensorSlot> slots;
  const Add add = [&](std::string name, std::vector<int64_t> shape, FloatBuffer* dest,
                      InitKind init, float gain) {
    slots.push_back({std::move(name), std::move(shape), dest, init, gain});
  };
  const int64_t hidden = c.hidden_size;
  add("embeddings.weight", {c.vocab_size, hidden}, &w->embed, InitKind::kEmbedding, 1.0f);
  w->layers.resize(static_cast<size_t>(c.num_layers()));
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    LayerWeights& l = w->layers[static_cast<size_t>(i)];
    l.kind = c.layers[static_cast<size_t>(i)];
    const std::string p = "layers." + std::to_string(i) + ".";
    if (c.family == ModelFamily::kMamba2) {
      Mamba2Slots(c, l, p, add);
    } else {
      Rwkv7Slots(c, i, l, p, add);
    }
  }
  if (c.family == ModelFamily::kMamba2) {
    add("norm_f.weight", {hidden}, &w->final_norm, InitKind::kPlainNorm, 1.0f);
  } else {
    add("norm.weight", {hidden}, &w->final_norm, InitKind::kPlainNorm, 1.0f);
    add("norm.bias", {hidden}, &w->final_norm_bias, InitKind::kBias, 1.0f);
  }
  if (!c.tie_word_embeddings) {
    add("lm_head.weight", {c.vocab_size, hidden}, &w->lm_head, InitKind::kEmbedding, 1.0f);
  }
  return slots;
}

std::vector<const FloatBuffer*> FamilyLayerBuffers(const LayerWeights& l) {
  const Mamba2Weights& m = l.mamba2;
  const Rwkv7Weights& r = l.rwkv7;
  std::vector<const FloatBuffer*> out = {
      &m.in_proj,     &m.in_proj_bias, &m.conv1d,   &m.conv1d_bias,   &m.dt_bias,    &m.a_log,
      &m.d,           &m.norm,         &m.out_proj, &m.out_proj_bias, &r.pre_norm_w, &r.pre_norm_b,
      &r.attn_norm_w, &r.attn_norm_b,  &r.x_r,      &r.x_w,           &r.x_k,        &r.x_v,
      &r.x_a,         &r.x_g,          &r.k_k,      &r.k_a,           &r.r_k,        &r.r_proj,
      &r.k_proj,      &r.v_proj,       &r.o_proj,   &r.g_norm_w,      &r.g_norm_b,   &r.ffn_norm_w,
      &r.ffn_norm_b,  &r.ffn_x_k,      &r.ffn_key,  &r.ffn_value};
  for (const LoraWeights* lora : {&r.w_lora, &r.a_lora, &r.v_lora, &r.g_lora}) {
    out.push_back(&lora->down);
    out.push_back(&lora->up);
    out.push_back(&lora->bias);
  }
  return out;
}

}  // namespace prefixd::hybrid
