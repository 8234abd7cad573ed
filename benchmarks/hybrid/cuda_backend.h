// The CUDA backend: the same forward pass as the CPU backend on one GPU, fp32 throughout, GEMMs
// through cuBLAS (pedantic fp32, no TF32) and our own kernels for the embedding, norms, causal
// conv, Gated DeltaNet recurrence, RoPE, attention and the element-wise steps. One CudaBackend
// is one sequence on one stream; use it from one thread.
//
// Determinism: every kernel gives each output to one thread or one warp with a fixed loop order
// and fixed warp-shuffle trees, and cuBLAS is deterministic on one stream, so the same inputs
// give the same bits on the same GPU model. The summation orders differ from the CPU backend's,
// so CPU and CUDA agree to rounding, not bit for bit: hydrate a state on the backend that made it.
//
// The sequence state lives on the GPU; host_state() is a mirror that PullState() refreshes and
// PushState() uploads (after the prefix cache has hydrated it).
#pragma once

#include <memory>
#include <string>

#include "model.h"
#include "prefixd/status.h"
#include "weights.h"

namespace prefixd::hybrid {

struct CudaOptions {
  int device = 0;
  int64_t prefill_chunk = 512;  // tokens per forward step, as on the CPU
};

// Uploads `weights` (the caller may free its copy afterwards) and allocates the state.
Result<std::unique_ptr<Backend>> MakeCudaBackend(const ModelConfig& config,
                                                 const ModelWeights& weights,
                                                 const CudaOptions& options = {});

// "NVIDIA H200 (sm_90, 139 GiB)", or an error when no GPU is usable.
Result<std::string> CudaDeviceDescription(int device);

}  // namespace prefixd::hybrid
