// RWKV-7 "Goose" on the CPU, as BlinkDL's reference and flash-linear-attention's RWKV7 model
// compute it (fla's parameter names):
//   block:    layer 0 first applies pre_norm (LayerNorm) to the embedding;
//             x ← x + time_mix(attn_norm(x));  x ← x + channel_mix(ffn_norm(x))
//   time mix: δ = shift(h) − h (shift: the previous token's h, the state for the first);
//             x_* = h + δ ⊙ μ_*  for r, w, k, v, a, g;
//             r, k, v = projections;  w = exp(−e^−½ · σ(w_lora(x_w)))  (the decay);
//             layer 0 keeps v as v_first, later layers v ← lerp(v, v_first, σ(v_lora(x_v)));
//             a = σ(a_lora(x_a));  g = g_lora(x_g) (σ inside);  κ̂ = L2norm_head(k ⊙ k_k);
//             k ← k ⊙ (1 + (a − 1) ⊙ k_a);  o = wkv7(r, w, k, v, −κ̂, κ̂ ⊙ a) per head;
//             o ← GroupNorm_H(o) + (Σ_head r ⊙ k ⊙ r_k) · v;  o_proj(o ⊙ g)
//   channel:  x_k = h + (shift(h) − h) ⊙ μ_k;  value(relu(key(x_k))²)
//   head:     logits = lm_head(LayerNorm(x)).
#include <cmath>

#include "cpu_kernels.h"
#include "family_config.h"
#include "family_cpu_backend.h"
#include "family_kernels.h"

namespace prefixd::hybrid {
namespace {

// e^−½: fla's form of BlinkDL's w = −softplus(−z) − 0.5, decay = exp(−e^w) = exp(−e^−½ σ(z)).
constexpr float kDecayScale = 0.6065306597126334f;
// F.normalize's floor on the norm.
constexpr float kNormFloor = 1e-12f;

class Rwkv7CpuBackend final : public FamilyCpuBackend {
 public:
  using FamilyCpuBackend::FamilyCpuBackend;

 private:
  // out[m, dim] = up · act(down · x) + bias, through the [m, rank] scratch.
  template <typename Act>
  void Lora(const float* x, int64_t m, const LoraWeights& w, int64_t rank, Act act, float* out) {
    const int64_t hidden = config_.hidden_size;
    low_.Resize(static_cast<size_t>(m * rank), false);
    cpu::Gemm(pool_, x, m, hidden, w.down.data(), rank, low_.data());
    ForRows(m, 16, [&](int64_t t) {
      float* row = low_.data() + t * rank;
      for (int64_t i = 0; i < rank; ++i) row[i] = act(row[i]);
    });
    Linear(low_.data(), m, rank, w.up, w.bias, hidden, out);
  }

  // out_* = h + (shift(h) − h) ⊙ μ_* for each mix, with `shift` the state for the first row;
  // then the state becomes the last row of h.
  void TokenShift(const float* h, int64_t m, FloatBuffer& shift,
                  std::initializer_list<std::pair<const FloatBuffer*, float*>> mixes) {
    const int64_t hidden = config_.hidden_size;
    ForRows(m, 16, [&](int64_t t) {
      const float* cur = h + t * hidden;
      const float* prev = t == 0 ? shift.data() : cur - hidden;
      for (const auto& [mu, out] : mixes) {
        float* o = out + t * hidden;
        for (int64_t i = 0; i < hidden; ++i) {
          o[i] = cur[i] + (prev[i] - cur[i]) * (*mu)[static_cast<size_t>(i)];
        }
      }
    });
    std::copy(h + (m - 1) * hidden, h + m * hidden, shift.data());
  }

  void ForwardChunk(std::span<const int32_t> tokens) override {
    const ModelConfig& c = config_;
    const Rwkv7Shape& s = c.rwkv7;
    const int64_t m = static_cast<int64_t>(tokens.size());
    const int64_t hidden = c.hidden_size;
    const int64_t ffn = c.intermediate_size;
    const int64_t heads = Rwkv7Heads(c);
    const int64_t dim = s.head_dim;
    const float eps = static_cast<float>(c.rms_norm_eps);
    const float group_eps = eps * static_cast<float>(dim);
    const size_t rows = static_cast<size_t>(m * hidden);
    for (FloatBuffer* b : {&h_, &xr_, &xw_, &xk_, &xv_, &xa_, &xg_, &r_, &w_, &k_, &v_, &kk_, &a_,
                           &g_, &v_first_, &o_, &mix_}) {
      b->Resize(rows, false);
    }
    ffn_.Resize(static_cast<size_t>(m * ffn), false);
    auto add_rows = [&](const FloatBuffer& y) {
      ForRows(m, 16, [&](int64_t t) {
        float* x = x_.data() + t * hidden;
        const float* d = y.data() + t * hidden;
        for (int64_t i = 0; i < hidden; ++i) x[i] += d[i];
      });
    };
    auto layer_norm = [&](const FloatBuffer& w, const FloatBuffer& b, float* out) {
      ForRows(m, 16, [&](int64_t t) {
        cpu::LayerNormRow(x_.data() + t * hidden, w.data(), b.data(), hidden, eps,
                          out + t * hidden);
      });
    };
    for (int64_t l = 0; l < c.num_layers(); ++l) {
      const Rwkv7Weights& w = weights_->layers[static_cast<size_t>(l)].rwkv7;
      LayerState& st = state_.layers()[static_cast<size_t>(l)];
      if (l == 0) layer_norm(w.pre_norm_w, w.pre_norm_b, x_.data());

      // Time mix.
      layer_norm(w.attn_norm_w, w.attn_norm_b, h_.data());
      TokenShift(h_.data(), m, st.conv,
                 {{&w.x_r, xr_.data()},
                  {&w.x_w, xw_.data()},
                  {&w.x_k, xk_.data()},
                  {&w.x_v, xv_.data()},
                  {&w.x_a, xa_.data()},
                  {&w.x_g, xg_.data()}});
      const FloatBuffer none;
      Linear(xr_.data(), m, hidden, w.r_proj, none, hidden, r_.data());
      Linear(xk_.data(), m, hidden, w.k_proj, none, hidden, k_.data());
      Linear(xv_.data(), m, hidden, w.v_proj, none, hidden, v_.data());
      Lora(
          xw_.data(), m, w.w_lora, s.decay_low_rank_dim, [](float z) { return std::tanh(z); },
          w_.data());
      Lora(
          xa_.data(), m, w.a_lora, s.a_low_rank_dim, [](float z) { return z; }, a_.data());
      Lora(xg_.data(), m, w.g_lora, s.gate_low_rank_dim, cpu::Sigmoid, g_.data());
      if (l == 0) {
        std::copy(v_.data(), v_.data() + rows, v_first_.data());
      } else {
        // x_v is consumed by the LoRA's first GEMM, so its buffer can take the LoRA's output.
        Lora(
            xv_.data(), m, w.v_lora, s.v_low_rank_dim, [](float z) { return z; }, xv_.data());
      }
      ForRows(m, 16, [&](int64_t t) {
        const size_t row = static_cast<size_t>(t * hidden);
        for (int64_t i = 0; i < hidden; ++i) {
          const size_t e = row + static_cast<size_t>(i);
          const size_t ch = static_cast<size_t>(i);
          w_[e] = std::exp(-kDecayScale * cpu::Sigmoid(w_[e]));
          a_[e] = cpu::Sigmoid(a_[e]);
          if (l != 0) v_[e] += (v_first_[e] - v_[e]) * cpu::Sigmoid(xv_[e]);
          kk_[e] = k_[e] * w.k_k[ch];
          k_[e] = k_[e] * (1.0f + (a_[e] - 1.0f) * w.k_a[ch]);
        }
        for (int64_t h = 0; h < heads; ++h) {
          float* kk = kk_.data() + row + h * dim;
          const float inv = 1.0f / std::max(std::sqrt(cpu::SumSquares(kk, dim)), kNormFloor);
          for (int64_t i = 0; i < dim; ++i) kk[i] *= inv;
        }
      });
      pool_.For(heads, [&](int64_t h) {
        cpu::Rwkv7HeadWkv({.r = r_.data() + h * dim,
                           .w = w_.data() + h * dim,
                           .k = k_.data() + h * dim,
                           .v = v_.data() + h * dim,
                           .kk = kk_.data() + h * dim,
                           .a = a_.data() + h * dim,
                           .stride = hidden,
                           .out = o_.data() + h * dim,
                           .out_stride = hidden,
                           .n = m,
                           .dim = dim},
                          st.recurrent.data() + h * dim * dim);
      });
      ForRows(m, 16, [&](int64_t t) {
        const int64_t row = t * hidden;
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t at = row + h * dim;
          float* o = o_.data() + at;
          cpu::LayerNormRow(o, w.g_norm_w.data() + h * dim, w.g_norm_b.data() + h * dim, dim,
                            group_eps, o);
          float rk[256];
          for (int64_t i = 0; i < dim; ++i) {
            rk[i] = r_.data()[at + i] * k_.data()[at + i] * w.r_k.data()[h * dim + i];
          }
          const float bonus = cpu::Sum(rk, dim);
          for (int64_t i = 0; i < dim; ++i) {
            o[i] = (o[i] + bonus * v_.data()[at + i]) * g_.data()[at + i];
          }
        }
      });
      Linear(o_.data(), m, hidden, w.o_proj, none, hidden, mix_.data());
      add_rows(mix_);

      // Channel mix.
      layer_norm(w.ffn_norm_w, w.ffn_norm_b, h_.data());
      TokenShift(h_.data(), m, st.ffn_shift, {{&w.ffn_x_k, xk_.data()}});
      cpu::Gemm(pool_, xk_.data(), m, hidden, w.ffn_key.data(), ffn, ffn_.data());
      ForRows(m, 16, [&](int64_t t) {
        float* row = ffn_.data() + t * ffn;
        for (int64_t i = 0; i < ffn; ++i) {
          const float relu = row[i] > 0.0f ? row[i] : 0.0f;
          row[i] = relu * relu;
        }
      });
      cpu::Gemm(pool_, ffn_.data(), m, ffn, w.ffn_value.data(), hidden, mix_.data());
      add_rows(mix_);
    }
    cpu::LayerNormRow(x_.data() + (m - 1) * hidden, weights_->final_norm.data(),
                      weights_->final_norm_bias.data(), hidden, eps, last_.data());
  }

  FloatBuffer h_, xr_, xw_, xk_, xv_, xa_, xg_, r_, w_, k_, v_, kk_, a_, g_, v_first_, o_, mix_;
  FloatBuffer low_, ffn_;
};

}  // namespace

Result<std::unique_ptr<Backend>> MakeRwkv7CpuBackend(const ModelConfig& config,
                                                     std::shared_ptr<const ModelWeights> weights,
                                                     const CpuOptions& options) {
  return std::unique_ptr<Backend>(new Rwkv7CpuBackend(config, std::move(weights), options));
}

}  // namespace prefixd::hybrid
