// The CPU backends of the pure recurrent families (Mamba-2: mamba2_cpu.cc, RWKV-7: rwkv7_cpu.cc)
// and what they share: argument checks, fixed-size prefill chunks, the thread pool and the row
// loop. One backend is one sequence; use it from one thread.
//
// Determinism is the Qwen3.5 backend's (cpu_kernels.h): GEMMs in fixed column slices, every
// head's recurrence on one thread in token order, row-wise work with fixed reduction orders.
#pragma once

#include <algorithm>
#include <memory>
#include <span>

#include "cpu_backend.h"
#include "model.h"
#include "thread_pool.h"

namespace prefixd::hybrid {

class FamilyCpuBackend : public Backend {
 public:
  FamilyCpuBackend(const ModelConfig& config, std::shared_ptr<const ModelWeights> weights,
                   const CpuOptions& options);

  std::string_view name() const override { return "cpu"; }
  const ModelConfig& config() const override { return config_; }
  SequenceState& host_state() override { return state_; }
  Status PullState() override { return Status::Ok(); }
  Status PushState() override { return Status::Ok(); }
  void Reset(int64_t /*reserve_tokens*/) override { state_.Clear(); }

  Status Forward(std::span<const int32_t> tokens, std::span<float> logits,
                 const ProgressFn& progress) override;

 protected:
  // Runs the m = tokens.size() tokens through every layer from `x` (their embeddings, [m,
  // hidden], the residual stream) and leaves in `x` row m−1 the final hidden state, normalised.
  virtual void ForwardChunk(std::span<const int32_t> tokens) = 0;

  // Runs fn(r) for rows [0, rows), blocks of `block` rows per work item.
  template <typename Fn>
  void ForRows(int64_t rows, int64_t block, Fn&& fn) {
    pool_.For((rows + block - 1) / block, [&](int64_t b) {
      const int64_t end = std::min(rows, (b + 1) * block);
      for (int64_t r = b * block; r < end; ++r) fn(r);
    });
  }
  // y[m, out] = x[m, in] · wᵀ (+ bias per row when non-empty).
  void Linear(const float* x, int64_t m, int64_t in, const FloatBuffer& w, const FloatBuffer& bias,
              int64_t out, float* y);

  const ModelConfig config_;
  const std::shared_ptr<const ModelWeights> weights_;
  const int64_t chunk_;
  ThreadPool pool_;
  SequenceState state_;
  FloatBuffer x_;     // [m, hidden] residual stream
  FloatBuffer last_;  // [hidden] the final hidden state of the last token, normalised
};

Result<std::unique_ptr<Backend>> MakeMamba2CpuBackend(const ModelConfig& config,
                                                      std::shared_ptr<const ModelWeights> weights,
                                                      const CpuOptions& options);
Result<std::unique_ptr<Backend>> MakeRwkv7CpuBackend(const ModelConfig& config,
                                                     std::shared_ptr<const ModelWeights> weights,
                                                     const CpuOptions& options);

}  // namespace prefixd::hybrid
