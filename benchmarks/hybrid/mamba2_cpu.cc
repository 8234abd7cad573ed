// Mamba-2 on the CPU, as transformers' Mamba2 torch path computes it but with mamba_ssm's gated
// norm, and with the SSD recurrence in its sequential form (the chunked scan is the same
// function, summed in another order):
//   block:  x ← x + mixer(RMSNorm(x))
//   mixer:  [z | xBC | dt] = in_proj(h);  xBC ← silu(conv1d(xBC) + bias) over the conv state;
//           [x | B | C] = xBC;  dt ← clamp(softplus(dt + dt_bias));  A = −exp(A_log);
//           per head: S ← exp(dt·A)·S + dt·x Bᵀ,  y = S C + D·x  (B, C of the head's group);
//           per group (its d_inner / n_groups channels): y ← RMSNorm(y ⊙ silu(z));  out_proj(y)
//   head:   logits = lm_head(RMSNorm_f(x)) (lm_head = the embedding when tied).
// The gated norm is per group as in mamba_ssm, llama.cpp and vLLM; transformers normalises over
// all of d_inner, an upstream bug (transformers PR #40861) that only matters for n_groups > 1.
#include <cmath>

#include "cpu_kernels.h"
#include "family_cpu_backend.h"
#include "family_kernels.h"

namespace prefixd::hybrid {
namespace {

class Mamba2CpuBackend final : public FamilyCpuBackend {
 public:
  using FamilyCpuBackend::FamilyCpuBackend;

 private:
  void ForwardChunk(std::span<const int32_t> tokens) override {
    const ModelConfig& c = config_;
    const Mamba2Shape& s = c.mamba2;
    const int64_t m = static_cast<int64_t>(tokens.size());
    const int64_t hidden = c.hidden_size;
    const int64_t inter = s.intermediate();
    const int64_t conv_dim = s.conv_dim();
    const int64_t proj_dim = s.in_proj_dim();
    const int64_t heads = s.num_heads;
    const int64_t heads_per_group = heads / s.n_groups;
    const int64_t p = s.head_dim;
    const int64_t n = s.state_size;
    const float eps = static_cast<float>(c.rms_norm_eps);
    h_.Resize(static_cast<size_t>(m * hidden), false);
    proj_.Resize(static_cast<size_t>(m * proj_dim), false);
    xbc_.Resize(static_cast<size_t>(m * conv_dim), false);
    dt_.Resize(static_cast<size_t>(m * heads), false);
    y_.Resize(static_cast<size_t>(m * inter), false);
    mix_.Resize(static_cast<size_t>(m * hidden), false);
    for (int64_t l = 0; l < c.num_layers(); ++l) {
      const LayerWeights& lw = weights_->layers[static_cast<size_t>(l)];
      const Mamba2Weights& w = lw.mamba2;
      LayerState& st = state_.layers()[static_cast<size_t>(l)];
      ForRows(m, 16, [&](int64_t t) {
        cpu::RmsNormRow(x_.data() + t * hidden, lw.input_norm.data(), hidden, eps,
                        h_.data() + t * hidden);
      });
      Linear(h_.data(), m, hidden, w.in_proj, w.in_proj_bias, proj_dim, proj_.data());
      cpu::CausalConvBiasSilu(pool_,
                              {.in = proj_.data() + inter,
                               .in_stride = proj_dim,
                               .n = m,
                               .channels = conv_dim,
                               .weight = w.conv1d.data(),
                               .bias = w.conv1d_bias.empty() ? nullptr : w.conv1d_bias.data(),
                               .kernel = s.conv_kernel,
                               .state = st.conv.data(),
                               .out = xbc_.data(),
                               .out_stride = conv_dim});
      const float dt_min = static_cast<float>(s.time_step_min);
      const float dt_max = static_cast<float>(std::min(s.time_step_max, 3.0e38));
      ForRows(m, 16, [&](int64_t t) {
        const float* raw = proj_.data() + t * proj_dim + inter + conv_dim;
        for (int64_t h = 0; h < heads; ++h) {
          const float dt = cpu::Softplus(raw[h] + w.dt_bias[static_cast<size_t>(h)]);
          dt_[static_cast<size_t>(t * heads + h)] = std::clamp(dt, dt_min, dt_max);
        }
      });
      pool_.For(heads, [&](int64_t h) {
        const int64_t g = h / heads_per_group;
        cpu::Mamba2HeadScan({.x = xbc_.data() + h * p,
                             .x_stride = conv_dim,
                             .b = xbc_.data() + inter + g * n,
                             .c = xbc_.data() + inter + s.n_groups * n + g * n,
                             .bc_stride = conv_dim,
                             .dt = dt_.data() + h,
                             .dt_stride = heads,
                             .a = -std::exp(w.a_log[static_cast<size_t>(h)]),
                             .d = w.d[static_cast<size_t>(h)],
                             .out = y_.data() + h * p,
                             .out_stride = inter,
                             .n = m,
                             .head_dim = p,
                             .state_size = n},
                            st.recurrent.data() + h * p * n);
      });
      ForRows(m, 16, [&](int64_t t) {
        cpu::GateFirstRmsNormRow(y_.data() + t * inter, proj_.data() + t * proj_dim, w.norm.data(),
                                 inter, s.n_groups, eps);
      });
      Linear(y_.data(), m, inter, w.out_proj, w.out_proj_bias, hidden, mix_.data());
      ForRows(m, 16, [&](int64_t t) {
        float* x = x_.data() + t * hidden;
        const float* y = mix_.data() + t * hidden;
        for (int64_t i = 0; i < hidden; ++i) x[i] += y[i];
      });
    }
    cpu::RmsNormRow(x_.data() + (m - 1) * hidden, weights_->final_norm.data(), hidden, eps,
                    last_.data());
  }

  FloatBuffer h_, proj_, xbc_, dt_, y_, mix_;
};

}  // namespace

Result<std::unique_ptr<Backend>> MakeMamba2CpuBackend(const ModelConfig& config,
                                                      std::shared_ptr<const ModelWeights> weights,
                                                      const CpuOptions& options) {
  return std::unique_ptr<Backend>(new Mamba2CpuBackend(config, std::move(weights), options));
}

}  // namespace prefixd::hybrid
