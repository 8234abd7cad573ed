#include "family_cpu_backend.h"

#include <cblas.h>

#include "cpu_kernels.h"

namespace prefixd::hybrid {

FamilyCpuBackend::FamilyCpuBackend(const ModelConfig& config,
                                   std::shared_ptr<const ModelWeights> weights,
                                   const CpuOptions& options)
    : config_(config),
      weights_(std::move(weights)),
      chunk_(std::max<int64_t>(options.prefill_chunk, 1)),
      pool_(ResolveThreads(options.threads)),
      state_(config),
      last_(static_cast<size_t>(config.hidden_size)) {
  // Our pool owns the parallelism; OpenBLAS threads would contend with it for the cores.
  openblas_set_num_threads(1);
}

Status FamilyCpuBackend::Forward(std::span<const int32_t> tokens, std::span<float> logits,
                                 const ProgressFn& progress) {
  PREFIXD_RETURN_IF_ERROR(CheckForwardArgs(config_, tokens, logits));
  const int64_t total = static_cast<int64_t>(tokens.size());
  const int64_t hidden = config_.hidden_size;
  for (int64_t done = 0; done < total;) {
    const int64_t m = std::min(chunk_, total - done);
    const auto chunk = tokens.subspan(static_cast<size_t>(done), static_cast<size_t>(m));
    x_.Resize(static_cast<size_t>(m * hidden), false);
    for (int64_t t = 0; t < m; ++t) {
      const float* row = weights_->embed.data() + static_cast<int64_t>(chunk[t]) * hidden;
      std::copy(row, row + hidden, x_.data() + t * hidden);
    }
    ForwardChunk(chunk);
    state_.set_n_tokens(state_.n_tokens() + m);
    done += m;
    if (progress) progress(done, total);
  }
  if (!logits.empty()) {
    cpu::Gemm(pool_, last_.data(), 1, hidden, weights_->output_embedding().data(),
              config_.vocab_size, logits.data());
  }
  return Status::Ok();
}

void FamilyCpuBackend::Linear(const float* x, int64_t m, int64_t in, const FloatBuffer& w,
                              const FloatBuffer& bias, int64_t out, float* y) {
  cpu::Gemm(pool_, x, m, in, w.data(), out, y);
  if (bias.empty()) return;
  ForRows(m, 16, [&](int64_t t) {
    float* row = y + t * out;
    for (int64_t i = 0; i < out; ++i) row[i] += bias[static_cast<size_t>(i)];
  });
}

}  // namespace prefixd::hybrid
