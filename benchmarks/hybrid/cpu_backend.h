// The CPU backend: the whole forward pass in fp32 on the host, GEMMs through OpenBLAS
// (single-threaded calls spread over our own pool), everything else in cpu_kernels.h. One
// CpuBackend is one sequence; use it from one thread.
#pragma once

#include <memory>

#include "model.h"

namespace prefixd::hybrid {

struct CpuOptions {
  int threads = 0;              // 0: one per core
  int64_t prefill_chunk = 512;  // tokens per forward step in a long prefill
};

// The pool size for CpuOptions::threads: itself when positive, else one per core.
int ResolveThreads(int threads);

// `weights` must match `config` (TensorSlots) and is shared, read-only, by every backend built
// from it.
Result<std::unique_ptr<Backend>> MakeCpuBackend(const ModelConfig& config,
                                                std::shared_ptr<const ModelWeights> weights,
                                                const CpuOptions& options = {});

// The GEMM kernel family OpenBLAS picked for this CPU ("Haswell", "SkylakeX", ...). Results are
// bit-identical only between processes using the same one; OPENBLAS_CORETYPE overrides it.
std::string BlasCoreName();

// A hint when this CPU has AVX-512 but OpenBLAS chose an AVX2 kernel (OpenBLAS 0.3.21 does so on
// AMD Zen 4/5), else empty.
std::string BlasCoreHint();

}  // namespace prefixd::hybrid
