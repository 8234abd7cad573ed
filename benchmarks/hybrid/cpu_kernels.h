// The CPU backend's numerical kernels: GEMM through OpenBLAS, and our own loops for the causal
// convolution, the Gated DeltaNet recurrence, the norms, RoPE and the blocking, masking and
// online softmax of causal attention (whose per-block products are BLAS calls).
// Stateless functions over caller-owned memory; those taking a ThreadPool run on its threads.
//
// Determinism: every output element is produced by exactly one thread with a fixed operation
// order that depends only on the shapes, never on the thread count or the schedule. Reductions
// use 16 strided partial sums combined by a fixed pairwise tree (Dot, SumSquares). GEMMs are cut
// into fixed-width column slices, each one single-threaded OpenBLAS call. So the same inputs give
// the same bits in any process of the same binary on the same CPU.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "thread_pool.h"

namespace prefixd::hybrid::cpu {

// e^x with relative error under 1e-7 (measured: 8.5e-8) for x in [-87, 88], clamped outside;
// branch-free so loops over it vectorise. Range reduction by ln 2 (split in two parts), a degree-6
// polynomial, and the exponent set directly.
inline float Exp(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  // Round to nearest with the 1.5 * 2^23 trick: exact for |t| < 2^22, and vectorises.
  const float t = x * 1.44269504088896341f;
  const float n = (t + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t biased = static_cast<int32_t>(n) + 127;
  return p * std::bit_cast<float>(biased << 23);
}

inline float Sigmoid(float x) { return 1.0f / (1.0f + Exp(-x)); }
inline float Silu(float x) { return x / (1.0f + Exp(-x)); }
// log(1 + e^x), linear above 20 as in torch.nn.functional.softplus.
inline float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// Σ a[i]·b[i] and Σ x[i]² in the canonical order: lane l accumulates i ≡ l (mod 16) in
// increasing i, then lanes are added pairwise (l + 8, l + 4, l + 2, l + 1).
float Dot(const float* a, const float* b, int64_t n);
float SumSquares(const float* x, int64_t n);
// Adds 16 lane partial sums pairwise (l + 8, l + 4, l + 2, l + 1), in place; returns the total.
// Inline: the recurrences call it once per state row and token.
inline float ReduceLanes(float* acc) {
  for (int width = 8; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

// y[n, out] = x[n, in] · w[out, in]ᵀ, row-major, all leading dimensions dense.
void Gemm(ThreadPool& pool, const float* x, int64_t n, int64_t in, const float* w, int64_t out,
          float* y);

// Zero-centred RMSNorm of `rows` rows of `dim`: y = x · (mean(x²) + eps)^-½ · (1 + w).
// `y` may equal `x`.
void RmsNormZeroCentred(const float* x, const float* w, int64_t rows, int64_t dim, float eps,
                        float* y);

// x ← x · (Σx² + eps)^-½ · scale, per row of `dim` (rows `stride` apart).
void L2NormalizeRow(float* x, int64_t dim, float eps, float scale);

// Depthwise causal convolution with kernel K followed by SiLU, over n tokens of `channels`:
//   out[t][c] = silu(Σ_j w[c][j] · x[t − (K−1) + j][c]),  j = 0..K−1 in order,
// where x[−1], x[−2], ... come from `state` ([K−1, channels], oldest row first), which is then
// advanced to the last K−1 inputs. `weight` is [channels, K].
void CausalConvSilu(ThreadPool& pool, const float* in, int64_t n, int64_t channels,
                    const float* weight, int64_t kernel, float* state, float* out);

// The same with a per-channel bias added before the SiLU (null: none) and row strides: token t's
// channels are read at in + t·in_stride and written at out + t·out_stride (Mamba-2's xBC is a
// column range of its input projection).
struct ConvArgs {
  const float* in;
  int64_t in_stride;
  int64_t n;
  int64_t channels;
  const float* weight;
  const float* bias;
  int64_t kernel;
  float* state;
  float* out;
  int64_t out_stride;
};
void CausalConvBiasSilu(ThreadPool& pool, const ConvArgs& args);

// The Gated DeltaNet recurrence of one value head over n tokens, canonical and sequential:
//   M ← α_t M;  u = M k_t;  M ← M + β_t (v_t − u) k_tᵀ;  o_t = M q_t
// with M = [Dv, Dk] (value-major, the transpose of the key-major S in the reference), i.e.
// S_t = α_t (I − β_t k kᵀ) S_{t−1} + β_t k vᵀ and o_t = S_tᵀ q_t. Token t's q, k are at
// q + t·qk_stride, k + t·qk_stride, v at v + t·v_stride, α and β at gate + t·gate_stride, and
// o_t is written at out + t·out_stride.
struct GdnHeadArgs {
  const float* q;
  const float* k;
  int64_t qk_stride;
  const float* v;
  int64_t v_stride;
  const float* alpha;
  const float* beta;
  int64_t gate_stride;
  float* out;
  int64_t out_stride;
  int64_t n;
  int64_t dk;
  int64_t dv;
};
void GdnHeadRecurrence(const GdnHeadArgs& args, float* state);

// Gated RMSNorm of one head's output: y = (w ⊙ o · (mean(o²) + eps)^-½) ⊙ silu(z), plain w.
void GatedRmsNormRow(float* o, const float* z, const float* w, int64_t dim, float eps);

// Rotate-half RoPE on the first `rope_dim` dims of each of `heads` heads of `head_dim` per token:
// dim i < rope_dim/2 pairs with i + rope_dim/2, angle = position · θ^(−2i/rope_dim); positions
// are first_position, first_position + 1, ... Token t's heads start at x + t·row_stride.
void ApplyRope(float* x, int64_t n, int64_t heads, int64_t head_dim, int64_t row_stride,
               int64_t rope_dim, double theta, int64_t first_position);

// Causal softmax attention with grouped KV heads. Queries q (token t, head h at
// q + t·q_stride + h·D) sit at positions first_position + t and see keys 0..first_position + t
// of the cache (row r at k + r·kv_stride, KV head g at + g·D). Query head h reads KV head
// h / (heads / kv_heads). Scores are scaled by 1/√D. Work items are (KV head, 64 query tokens,
// 4096-key split); each visits its keys in blocks of 256 in increasing order with an online
// softmax, computing Q·Kᵀ and P·V of a block as single-threaded BLAS calls, and the splits are
// merged in increasing order. Results depend only on the shapes, never on the threads.
struct AttentionArgs {
  const float* q;
  int64_t q_stride;
  const float* k;
  const float* v;
  int64_t kv_stride;
  float* out;
  int64_t out_stride;
  int64_t n;
  int64_t first_position;
  int64_t heads;
  int64_t kv_heads;
  int64_t head_dim;
};
void CausalAttention(ThreadPool& pool, const AttentionArgs& args);

}  // namespace prefixd::hybrid::cpu
