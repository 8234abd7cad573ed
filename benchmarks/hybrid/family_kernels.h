// The CPU kernels of the Mamba-2 and RWKV-7 families that cpu_kernels.h does not already have:
// their recurrences (one head, canonical and sequential), plain and gate-first RMSNorm, LayerNorm
// (also GroupNorm, one group at a time), and the token shift. Stateless functions over
// caller-owned memory; any thread. Every reduction has a fixed order (16 strided lanes and a
// fixed tree, as in cpu_kernels.h), so results depend on the shapes alone.
#pragma once

#include <cstdint>

namespace prefixd::hybrid::cpu {

// Σ x[i] in the canonical lane order.
float Sum(const float* x, int64_t n);

// y = w ⊙ x · (mean(x²) + eps)^-½ (a plain-weight RMSNorm; Mamba-2's block and final norms).
// `y` may equal `x`.
void RmsNormRow(const float* x, const float* w, int64_t dim, float eps, float* y);

// Mamba-2's gated RMSNorm, gate first (norm_before_gate = False), over each of `groups` equal
// slices of dim on its own (mamba_ssm's RMSNormGated(group_size = dim / groups)):
//   o ← o ⊙ silu(z);  per group: o_g ← w_g ⊙ o_g · (mean(o_g²) + eps)^-½.
// dim must be a multiple of groups.
void GateFirstRmsNormRow(float* o, const float* z, const float* w, int64_t dim, int64_t groups,
                         float eps);

// y = (x − mean) · (var + eps)^-½ ⊙ w + b with the biased variance, two passes (torch's
// LayerNorm, and GroupNorm applied to one group). `y` may equal `x`.
void LayerNormRow(const float* x, const float* w, const float* b, int64_t dim, float eps, float* y);

// The Mamba-2 (SSD) recurrence of one head over n tokens, in its sequential form:
//   dA = exp(dt_t · A);  S[p][s] ← S[p][s] · dA + (dt_t · x_t[p]) · B_t[s];
//   y_t[p] = Σ_s S[p][s] · C_t[s] + D · x_t[p]
// with S = [head_dim, state_size] (transformers' ssm_states[h] layout). Token t's x is at
// x + t·x_stride, its B and C (the head's group) at b / c + t·bc_stride, dt (already softplus'd
// and clamped) at dt + t·dt_stride, and y_t goes to out + t·out_stride.
struct Mamba2HeadArgs {
  const float* x;
  int64_t x_stride;
  const float* b;
  const float* c;
  int64_t bc_stride;
  const float* dt;
  int64_t dt_stride;
  float a;  // −exp(A_log[h])
  float d;  // D[h]
  float* out;
  int64_t out_stride;
  int64_t n;
  int64_t head_dim;
  int64_t state_size;
};
void Mamba2HeadScan(const Mamba2HeadArgs& args, float* state);

// The RWKV-7 generalised delta rule of one head over n tokens (BlinkDL's wkv7, with fla's
// a = −κ̂ and b = κ̂ ⊙ a):
//   sa_i = Σ_j S[i][j] · (−κ̂_j);  S[i][j] ← S[i][j] · w_j + sa_i · κ̂_j a_j + v_i · k_j;
//   o_i = Σ_j S[i][j] · r_j
// with S = [Dv, Dk] value-major, w the decay in (0, 1) and κ̂ the L2-normalised k ⊙ k_k. Token
// t's vectors sit at <ptr> + t·stride; o_t goes to out + t·out_stride.
struct Rwkv7HeadArgs {
  const float* r;
  const float* w;
  const float* k;
  const float* v;
  const float* kk;
  const float* a;
  int64_t stride;
  float* out;
  int64_t out_stride;
  int64_t n;
  int64_t dim;
};
void Rwkv7HeadWkv(const Rwkv7HeadArgs& args, float* state);

}  // namespace prefixd::hybrid::cpu
