#include "family_kernels.h"

#include <cmath>

#include "cpu_kernels.h"

namespace prefixd::hybrid::cpu {
namespace {

// Lane l holds the partial sum of every index ≡ l (mod 16); ReduceLanes meets them in a tree.
constexpr int kLanes = 16;

}  // namespace

float Sum(const float* x, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += x[i + l];
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] += x[i];
  return ReduceLanes(acc);
}

void RmsNormRow(const float* x, const float* w, int64_t dim, float eps, float* y) {
  const float scale = 1.0f / std::sqrt(SumSquares(x, dim) / static_cast<float>(dim) + eps);
  for (int64_t i = 0; i < dim; ++i) y[i] = w[i] * (x[i] * scale);
}

void GateFirstRmsNormRow(float* o, const float* z, const float* w, int64_t dim, int64_t groups,
                         float eps) {
  for (int64_t i = 0; i < dim; ++i) o[i] *= Silu(z[i]);
  const int64_t group_size = dim / groups;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t begin = g * group_size;
    RmsNormRow(o + begin, w + begin, group_size, eps, o + begin);
  }
}

void LayerNormRow(const float* x, const float* w, const float* b, int64_t dim, float eps,
                  float* y) {
  const float mean = Sum(x, dim) / static_cast<float>(dim);
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= dim; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float d = x[i + l] - mean;
      acc[l] += d * d;
    }
  }
  for (int l = 0; i < dim; ++i, ++l) {
    const float d = x[i] - mean;
    acc[l] += d * d;
  }
  const float inv = 1.0f / std::sqrt(ReduceLanes(acc) / static_cast<float>(dim) + eps);
  for (i = 0; i < dim; ++i) y[i] = (x[i] - mean) * inv * w[i] + b[i];
}

void Mamba2HeadScan(const Mamba2HeadArgs& a, float* state) {
  const int64_t ns = a.state_size;
  for (int64_t t = 0; t < a.n; ++t) {
    const float* x = a.x + t * a.x_stride;
    const float* b = a.b + t * a.bc_stride;
    const float* c = a.c + t * a.bc_stride;
    const float dt = a.dt[t * a.dt_stride];
    const float decay = std::exp(dt * a.a);
    float* y = a.out + t * a.out_stride;
    for (int64_t p = 0; p < a.head_dim; ++p) {
      float* s = state + p * ns;
      const float coef = dt * x[p];
      float acc[kLanes] = {};
      int64_t j = 0;
      for (; j + kLanes <= ns; j += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
          const float updated = s[j + l] * decay + coef * b[j + l];
          s[j + l] = updated;
          acc[l] += updated * c[j + l];
        }
      }
      for (int l = 0; j < ns; ++j, ++l) {
        s[j] = s[j] * decay + coef * b[j];
        acc[l] += s[j] * c[j];
      }
      y[p] = ReduceLanes(acc) + a.d * x[p];
    }
  }
}

void Rwkv7HeadWkv(const Rwkv7HeadArgs& a, float* state) {
  const int64_t dim = a.dim;
  constexpr int64_t kMaxDim = 256;
  float b_vec[kMaxDim];  // κ̂ ⊙ a of the current token
  for (int64_t t = 0; t < a.n; ++t) {
    const float* r = a.r + t * a.stride;
    const float* w = a.w + t * a.stride;
    const float* k = a.k + t * a.stride;
    const float* v = a.v + t * a.stride;
    const float* kk = a.kk + t * a.stride;
    const float* aa = a.a + t * a.stride;
    float* o = a.out + t * a.out_stride;
    for (int64_t j = 0; j < dim; ++j) b_vec[j] = kk[j] * aa[j];
    for (int64_t i = 0; i < dim; ++i) {
      float* s = state + i * dim;
      // sa = S_i · (−κ̂): what the old state predicts along κ̂, removed (scaled by a) below.
      float acc[kLanes] = {};
      int64_t j = 0;
      for (; j + kLanes <= dim; j += kLanes) {
        for (int l = 0; l < kLanes; ++l) acc[l] -= s[j + l] * kk[j + l];
      }
      for (int l = 0; j < dim; ++j, ++l) acc[l] -= s[j] * kk[j];
      const float sa = ReduceLanes(acc);
      const float vi = v[i];
      float out_acc[kLanes] = {};
      j = 0;
      for (; j + kLanes <= dim; j += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
          const float updated = s[j + l] * w[j + l] + sa * b_vec[j + l] + vi * k[j + l];
          s[j + l] = updated;
          out_acc[l] += updated * r[j + l];
        }
      }
      for (int l = 0; j < dim; ++j, ++l) {
        s[j] = s[j] * w[j] + sa * b_vec[j] + vi * k[j];
        out_acc[l] += s[j] * r[j];
      }
      o[i] = ReduceLanes(out_acc);
    }
  }
}

}  // namespace prefixd::hybrid::cpu
