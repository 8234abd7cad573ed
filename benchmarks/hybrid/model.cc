#include "model.h"

#include <xxhash.h>

#include <cstdio>

namespace prefixd::hybrid {

FloatBuffer& SlotBuffer(LayerState& layer, StateSlot slot) {
  switch (slot) {
    case StateSlot::kConv:
      return layer.conv;
    case StateSlot::kRecurrent:
      return layer.recurrent;
    case StateSlot::kFfnShift:
      break;
  }
  return layer.ffn_shift;
}

const FloatBuffer& SlotBuffer(const LayerState& layer, StateSlot slot) {
  return SlotBuffer(const_cast<LayerState&>(layer), slot);
}

std::vector<StateArraySpec> RecurrentStateArrays(const ModelConfig& c, LayerKind kind) {
  auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
  switch (kind) {
    case LayerKind::kLinear:
      return {
          {StateSlot::kConv, {1, u(c.linear_conv_kernel_dim - 1), u(c.conv_dim())}},
          {StateSlot::kRecurrent,
           {1, u(c.linear_num_value_heads), u(c.linear_value_head_dim), u(c.linear_key_head_dim)}}};
    case LayerKind::kMamba2:
      return {{StateSlot::kConv, {1, u(c.mamba2.conv_kernel - 1), u(c.mamba2.conv_dim())}},
              {StateSlot::kRecurrent,
               {1, u(c.mamba2.num_heads), u(c.mamba2.head_dim), u(c.mamba2.state_size)}}};
    case LayerKind::kRwkv7: {
      const int64_t n = c.rwkv7.head_dim;
      return {{StateSlot::kConv, {1, 1, u(c.hidden_size)}},
              {StateSlot::kRecurrent, {1, u(c.hidden_size / n), u(n), u(n)}},
              {StateSlot::kFfnShift, {1, 1, u(c.hidden_size)}}};
    }
    case LayerKind::kFullAttention:
      break;
  }
  return {};
}

SequenceState::SequenceState(const ModelConfig& config) : kv_dim_(config.kv_dim()) {
  for (LayerKind kind : config.layers) {
    LayerState layer;
    layer.kind = kind;
    for (const StateArraySpec& a : RecurrentStateArrays(config, kind)) {
      size_t n = 1;
      for (uint32_t d : a.shape) n *= d;
      SlotBuffer(layer, a.slot).Resize(n);
    }
    layers_.push_back(std::move(layer));
  }
}

void SequenceState::Clear() {
  n_tokens_ = 0;
  for (LayerState& l : layers_) {
    l.conv.Zero();
    l.recurrent.Zero();
    l.ffn_shift.Zero();
    l.k.Resize(0);
    l.v.Resize(0);
  }
}

void SequenceState::Reserve(int64_t tokens) {
  for (LayerState& l : layers_) {
    if (l.kind != LayerKind::kFullAttention) continue;
    l.k.Reserve(static_cast<size_t>(tokens * kv_dim_));
    l.v.Reserve(static_cast<size_t>(tokens * kv_dim_));
  }
}

void SequenceState::ResizeTokens(int64_t n) {
  n_tokens_ = n;
  for (LayerState& l : layers_) {
    if (l.kind != LayerKind::kFullAttention) continue;
    l.k.Resize(static_cast<size_t>(n * kv_dim_), /*zero=*/false);
    l.v.Resize(static_cast<size_t>(n * kv_dim_), /*zero=*/false);
  }
}

uint64_t SequenceState::bytes() const {
  uint64_t n = 0;
  for (const LayerState& l : layers_) n += l.bytes();
  return n;
}

LayerDigest DigestLayer(const LayerState& layer) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  for (const FloatBuffer* b :
       {&layer.conv, &layer.recurrent, &layer.k, &layer.v, &layer.ffn_shift}) {
    if (!b->empty()) XXH3_128bits_update(st, b->data(), b->bytes());
  }
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  return {h.high64, h.low64};
}

std::string DigestHex(const LayerDigest& digest) {
  char text[33];
  std::snprintf(text, sizeof(text), "%016llx%016llx", static_cast<unsigned long long>(digest[0]),
                static_cast<unsigned long long>(digest[1]));
  return text;
}

std::vector<std::string> DigestState(const SequenceState& state) {
  std::vector<std::string> out;
  for (const LayerState& l : state.layers()) out.push_back(DigestHex(DigestLayer(l)));
  return out;
}

Status CheckForwardArgs(const ModelConfig& config, std::span<const int32_t> tokens,
                        std::span<const float> logits) {
  if (tokens.empty()) return Status::InvalidArgument("Forward needs at least one token");
  if (!logits.empty() && static_cast<int64_t>(logits.size()) != config.vocab_size) {
    return Status::InvalidArgument("logits buffer is not vocab_size floats");
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= config.vocab_size) {
      return Status::InvalidArgument("token id " + std::to_string(t) + " outside the vocabulary");
    }
  }
  return Status::Ok();
}

int32_t Argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  return best;
}

Result<std::vector<int32_t>> GreedyContinue(Backend& backend, int32_t first, int count) {
  std::vector<int32_t> tokens;
  if (count <= 0) return tokens;
  tokens.push_back(first);
  std::vector<float> logits(static_cast<size_t>(backend.config().vocab_size));
  while (static_cast<int>(tokens.size()) < count) {
    const int32_t last = tokens.back();
    PREFIXD_RETURN_IF_ERROR(backend.Forward({&last, 1}, logits));
    tokens.push_back(Argmax(logits));
  }
  return tokens;
}

std::vector<int32_t> PseudoRandomTokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t h = XXH3_64bits_withSeed(&i, sizeof(i), seed);
    tokens[static_cast<size_t>(i)] = static_cast<int32_t>(h % static_cast<uint64_t>(vocab));
  }
  return tokens;
}

}  // namespace prefixd::hybrid
