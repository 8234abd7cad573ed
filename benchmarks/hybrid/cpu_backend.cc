#include "cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "cpu_kernels.h"
#include "family_cpu_backend.h"
#include "thread_pool.h"

namespace prefixd::hybrid {
namespace {

using cpu::Gemm;

class CpuBackend final : public Backend {
 public:
  CpuBackend(const ModelConfig& config, std::shared_ptr<const ModelWeights> weights,
             const CpuOptions& options)
      : config_(config),
        weights_(std::move(weights)),
        chunk_(std::max<int64_t>(options.prefill_chunk, 1)),
        pool_(ResolveThreads(options.threads)),
        state_(config) {
    // Our pool owns the parallelism; OpenBLAS threads would contend with it for the cores.
    openblas_set_num_threads(1);
  }

  std::string_view name() const override { return "cpu"; }
  const ModelConfig& config() const override { return config_; }
  SequenceState& host_state() override { return state_; }
  Status PullState() override { return Status::Ok(); }
  Status PushState() override { return Status::Ok(); }
  void Reset(int64_t reserve_tokens) override {
    state_.Clear();
    state_.Reserve(reserve_tokens);
  }

  Status Forward(std::span<const int32_t> tokens, std::span<float> logits,
                 const ProgressFn& progress) override {
    PREFIXD_RETURN_IF_ERROR(CheckForwardArgs(config_, tokens, logits));
    const int64_t total = static_cast<int64_t>(tokens.size());
    state_.Reserve(state_.n_tokens() + total);
    for (int64_t done = 0; done < total;) {
      const int64_t m = std::min(chunk_, total - done);
      const bool last = done + m == total;
      ForwardChunk(tokens.subspan(static_cast<size_t>(done), static_cast<size_t>(m)),
                   last ? logits : std::span<float>());
      done += m;
      if (progress) progress(done, total);
    }
    return Status::Ok();
  }

 private:
  // Runs fn(r) for rows [0, rows), blocks of `block` rows per work item.
  template <typename Fn>
  void ForRows(int64_t rows, int64_t block, Fn&& fn) {
    pool_.For((rows + block - 1) / block, [&](int64_t b) {
      const int64_t end = std::min(rows, (b + 1) * block);
      for (int64_t r = b * block; r < end; ++r) fn(r);
    });
  }

  void ForwardChunk(std::span<const int32_t> tokens, std::span<float> logits) {
    const ModelConfig& c = config_;
    const int64_t m = static_cast<int64_t>(tokens.size());
    const int64_t hidden = c.hidden_size;
    x_.Resize(static_cast<size_t>(m * hidden), false);
    h_.Resize(static_cast<size_t>(m * hidden), false);
    mix_.Resize(static_cast<size_t>(m * hidden), false);
    for (int64_t t = 0; t < m; ++t) {
      const float* row = weights_->embed.data() + static_cast<int64_t>(tokens[t]) * hidden;
      std::copy(row, row + hidden, x_.data() + t * hidden);
    }
    const float eps = static_cast<float>(c.rms_norm_eps);
    for (int64_t l = 0; l < c.num_layers(); ++l) {
      const LayerWeights& w = weights_->layers[static_cast<size_t>(l)];
      LayerState& s = state_.layers()[static_cast<size_t>(l)];
      ForRows(m, 16, [&](int64_t t) {
        cpu::RmsNormZeroCentred(x_.data() + t * hidden, w.input_norm.data(), 1, hidden, eps,
                                h_.data() + t * hidden);
      });
      if (w.kind == LayerKind::kLinear) {
        LinearAttention(w.linear, s, m);
      } else {
        FullAttention(w.attn, s, m);
      }
      ForRows(m, 16, [&](int64_t t) {
        float* x = x_.data() + t * hidden;
        const float* y = mix_.data() + t * hidden;
        for (int64_t i = 0; i < hidden; ++i) x[i] += y[i];
        cpu::RmsNormZeroCentred(x, w.post_norm.data(), 1, hidden, eps, h_.data() + t * hidden);
      });
      Mlp(w, m);
      ForRows(m, 16, [&](int64_t t) {
        float* x = x_.data() + t * hidden;
        const float* y = mix_.data() + t * hidden;
        for (int64_t i = 0; i < hidden; ++i) x[i] += y[i];
      });
    }
    state_.set_n_tokens(state_.n_tokens() + m);
    if (logits.empty()) return;
    FloatBuffer last(static_cast<size_t>(hidden));
    cpu::RmsNormZeroCentred(x_.data() + (m - 1) * hidden, weights_->final_norm.data(), 1, hidden,
                            eps, last.data());
    Gemm(pool_, last.data(), 1, hidden, weights_->output_embedding().data(), c.vocab_size,
         logits.data());
  }

  void Mlp(const LayerWeights& w, int64_t m) {
    const int64_t hidden = config_.hidden_size;
    const int64_t ffn = config_.intermediate_size;
    gate_.Resize(static_cast<size_t>(m * ffn), false);
    up_.Resize(static_cast<size_t>(m * ffn), false);
    Gemm(pool_, h_.data(), m, hidden, w.mlp_gate.data(), ffn, gate_.data());
    Gemm(pool_, h_.data(), m, hidden, w.mlp_up.data(), ffn, up_.data());
    ForRows(m, 16, [&](int64_t t) {
      float* g = gate_.data() + t * ffn;
      const float* u = up_.data() + t * ffn;
      for (int64_t i = 0; i < ffn; ++i) g[i] = cpu::Silu(g[i]) * u[i];
    });
    Gemm(pool_, gate_.data(), m, ffn, w.mlp_down.data(), hidden, mix_.data());
  }

  void LinearAttention(const LinearAttentionWeights& w, LayerState& s, int64_t m) {
    const ModelConfig& c = config_;
    const int64_t hidden = c.hidden_size;
    const int64_t conv_dim = c.conv_dim();
    const int64_t key_dim = c.key_dim();
    const int64_t value_dim = c.value_dim();
    const int64_t hk = c.linear_num_key_heads;
    const int64_t hv = c.linear_num_value_heads;
    const int64_t dk = c.linear_key_head_dim;
    const int64_t dv = c.linear_value_head_dim;
    const float eps = static_cast<float>(c.rms_norm_eps);
    qkv_.Resize(static_cast<size_t>(m * conv_dim), false);
    conv_out_.Resize(static_cast<size_t>(m * conv_dim), false);
    z_.Resize(static_cast<size_t>(m * value_dim), false);
    beta_.Resize(static_cast<size_t>(m * hv), false);
    alpha_.Resize(static_cast<size_t>(m * hv), false);
    core_.Resize(static_cast<size_t>(m * value_dim), false);

    Gemm(pool_, h_.data(), m, hidden, w.in_proj_qkv.data(), conv_dim, qkv_.data());
    Gemm(pool_, h_.data(), m, hidden, w.in_proj_z.data(), value_dim, z_.data());
    Gemm(pool_, h_.data(), m, hidden, w.in_proj_b.data(), hv, beta_.data());
    Gemm(pool_, h_.data(), m, hidden, w.in_proj_a.data(), hv, alpha_.data());
    cpu::CausalConvSilu(pool_, qkv_.data(), m, conv_dim, w.conv1d.data(), c.linear_conv_kernel_dim,
                        s.conv.data(), conv_out_.data());

    const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
    ForRows(m, 16, [&](int64_t t) {
      float* row = conv_out_.data() + t * conv_dim;
      for (int64_t h = 0; h < hk; ++h) {
        cpu::L2NormalizeRow(row + h * dk, dk, 1e-6f, q_scale);
        cpu::L2NormalizeRow(row + key_dim + h * dk, dk, 1e-6f, 1.0f);
      }
      for (int64_t h = 0; h < hv; ++h) {
        const float a = alpha_[static_cast<size_t>(t * hv + h)] + w.dt_bias[static_cast<size_t>(h)];
        const float g = -std::exp(w.a_log[static_cast<size_t>(h)]) * cpu::Softplus(a);
        alpha_[static_cast<size_t>(t * hv + h)] = std::exp(g);
        float& b = beta_[static_cast<size_t>(t * hv + h)];
        b = 1.0f / (1.0f + std::exp(-b));
      }
    });

    const int64_t ratio = hv / hk;
    pool_.For(hv, [&](int64_t h) {
      const int64_t kh = h / ratio;
      cpu::GdnHeadArgs args{.q = conv_out_.data() + kh * dk,
                            .k = conv_out_.data() + key_dim + kh * dk,
                            .qk_stride = conv_dim,
                            .v = conv_out_.data() + 2 * key_dim + h * dv,
                            .v_stride = conv_dim,
                            .alpha = alpha_.data() + h,
                            .beta = beta_.data() + h,
                            .gate_stride = hv,
                            .out = core_.data() + h * dv,
                            .out_stride = value_dim,
                            .n = m,
                            .dk = dk,
                            .dv = dv};
      cpu::GdnHeadRecurrence(args, s.recurrent.data() + h * dv * dk);
    });
    ForRows(m, 16, [&](int64_t t) {
      for (int64_t h = 0; h < hv; ++h) {
        cpu::GatedRmsNormRow(core_.data() + t * value_dim + h * dv,
                             z_.data() + t * value_dim + h * dv, w.norm.data(), dv, eps);
      }
    });
    Gemm(pool_, core_.data(), m, value_dim, w.out_proj.data(), hidden, mix_.data());
  }

  void FullAttention(const FullAttentionWeights& w, LayerState& s, int64_t m) {
    const ModelConfig& c = config_;
    const int64_t hidden = c.hidden_size;
    const int64_t heads = c.num_attention_heads;
    const int64_t kv_heads = c.num_key_value_heads;
    const int64_t d = c.head_dim;
    const int64_t q_proj = c.q_proj_dim();
    const int64_t kv_dim = c.kv_dim();
    const int64_t hd = heads * d;
    const int64_t p0 = state_.n_tokens();
    const float eps = static_cast<float>(c.rms_norm_eps);
    qg_.Resize(static_cast<size_t>(m * q_proj), false);
    q_.Resize(static_cast<size_t>(m * hd), false);
    attn_.Resize(static_cast<size_t>(m * hd), false);
    s.k.Resize(static_cast<size_t>((p0 + m) * kv_dim), false);
    s.v.Resize(static_cast<size_t>((p0 + m) * kv_dim), false);
    float* k_new = s.k.data() + p0 * kv_dim;
    float* v_new = s.v.data() + p0 * kv_dim;

    Gemm(pool_, h_.data(), m, hidden, w.q_proj.data(), q_proj, qg_.data());
    Gemm(pool_, h_.data(), m, hidden, w.k_proj.data(), kv_dim, k_new);
    Gemm(pool_, h_.data(), m, hidden, w.v_proj.data(), kv_dim, v_new);
    const int64_t per_head = c.attn_output_gate ? 2 * d : d;
    ForRows(m, 16, [&](int64_t t) {
      // Each head's query is the first d of its 2d-wide slice (the gate is the second d).
      for (int64_t h = 0; h < heads; ++h) {
        const float* src = qg_.data() + t * q_proj + h * per_head;
        cpu::RmsNormZeroCentred(src, w.q_norm.data(), 1, d, eps, q_.data() + t * hd + h * d);
      }
      cpu::RmsNormZeroCentred(k_new + t * kv_dim, w.k_norm.data(), kv_heads, d, eps,
                              k_new + t * kv_dim);
    });
    cpu::ApplyRope(q_.data(), m, heads, d, hd, c.rope_dim(), c.rope_theta, p0);
    cpu::ApplyRope(k_new, m, kv_heads, d, kv_dim, c.rope_dim(), c.rope_theta, p0);
    cpu::CausalAttention(pool_, {.q = q_.data(),
                                 .q_stride = hd,
                                 .k = s.k.data(),
                                 .v = s.v.data(),
                                 .kv_stride = kv_dim,
                                 .out = attn_.data(),
                                 .out_stride = hd,
                                 .n = m,
                                 .first_position = p0,
                                 .heads = heads,
                                 .kv_heads = kv_heads,
                                 .head_dim = d});
    if (c.attn_output_gate) {
      ForRows(m, 16, [&](int64_t t) {
        for (int64_t h = 0; h < heads; ++h) {
          const float* gate = qg_.data() + t * q_proj + h * per_head + d;
          float* o = attn_.data() + t * hd + h * d;
          for (int64_t i = 0; i < d; ++i) o[i] *= cpu::Sigmoid(gate[i]);
        }
      });
    }
    Gemm(pool_, attn_.data(), m, hd, w.o_proj.data(), hidden, mix_.data());
  }

  const ModelConfig config_;
  const std::shared_ptr<const ModelWeights> weights_;
  const int64_t chunk_;
  ThreadPool pool_;
  SequenceState state_;
  // Scratch, sized per chunk.
  FloatBuffer x_, h_, mix_, gate_, up_;
  FloatBuffer qkv_, conv_out_, z_, beta_, alpha_, core_;
  FloatBuffer qg_, q_, attn_;
};

}  // namespace

Result<std::unique_ptr<Backend>> MakeCpuBackend(const ModelConfig& config,
                                                std::shared_ptr<const ModelWeights> weights,
                                                const CpuOptions& options) {
  PREFIXD_RETURN_IF_ERROR(config.Validate());
  if (weights == nullptr || static_cast<int64_t>(weights->layers.size()) != config.num_layers()) {
    return Status::InvalidArgument("weights do not match the model config");
  }
  if (config.family == ModelFamily::kMamba2) {
    return MakeMamba2CpuBackend(config, std::move(weights), options);
  }
  if (config.family == ModelFamily::kRwkv7) {
    return MakeRwkv7CpuBackend(config, std::move(weights), options);
  }
  return std::unique_ptr<Backend>(new CpuBackend(config, std::move(weights), options));
}

int ResolveThreads(int threads) {
  return threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

std::string BlasCoreName() {
  const char* name = openblas_get_corename();
  return name != nullptr ? name : "unknown";
}

std::string BlasCoreHint() {
  const std::string core = BlasCoreName();
  if (core != "Haswell" && core != "Zen") return "";
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq")) {
    return "";
  }
  return "this CPU has AVX-512 but OpenBLAS chose its " + core +
         " kernels; OPENBLAS_CORETYPE=SkylakeX is about twice as fast";
}

}  // namespace prefixd::hybrid
