#include "cpu_kernels.h"

#include <cblas.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace prefixd::hybrid::cpu {
namespace {

constexpr int kLanes = 16;
// Output columns per GEMM work item. Fixed (not derived from the thread count) so every element
// is computed by the same single-threaded BLAS call whatever the pool size.
constexpr int64_t kGemmSlice = 256;
// Attention tiles: query tokens per work item and keys per block.
constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyBlock = 256;
// Keys per attention work item: a long prefix is split so few queries still fill the pool.
constexpr int64_t kKeySplit = 4096;
// Channels per causal-conv work item.
constexpr int64_t kConvBlock = 512;

}  // namespace

float Dot(const float* a, const float* b, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  return ReduceLanes(acc);
}

float SumSquares(const float* x, int64_t n) { return Dot(x, x, n); }

void Gemm(ThreadPool& pool, const float* x, int64_t n, int64_t in, const float* w, int64_t out,
          float* y) {
  const int64_t slices = (out + kGemmSlice - 1) / kGemmSlice;
  pool.For(slices, [&](int64_t s) {
    const int64_t col = s * kGemmSlice;
    const int64_t width = std::min(kGemmSlice, out - col);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n),
                static_cast<int>(width), static_cast<int>(in), 1.0f, x, static_cast<int>(in),
                w + col * in, static_cast<int>(in), 0.0f, y + col, static_cast<int>(out));
  });
}

void RmsNormZeroCentred(const float* x, const float* w, int64_t rows, int64_t dim, float eps,
                        float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const float scale = 1.0f / std::sqrt(SumSquares(xr, dim) / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * scale * (1.0f + w[i]);
  }
}

void L2NormalizeRow(float* x, int64_t dim, float eps, float scale) {
  const float inv = 1.0f / std::sqrt(SumSquares(x, dim) + eps);
  for (int64_t i = 0; i < dim; ++i) x[i] = x[i] * inv * scale;
}

void CausalConvSilu(ThreadPool& pool, const float* in, int64_t n, int64_t channels,
                    const float* weight, int64_t kernel, float* state, float* out) {
  CausalConvBiasSilu(pool, {.in = in,
                            .in_stride = channels,
                            .n = n,
                            .channels = channels,
                            .weight = weight,
                            .bias = nullptr,
                            .kernel = kernel,
                            .state = state,
                            .out = out,
                            .out_stride = channels});
}

void CausalConvBiasSilu(ThreadPool& pool, const ConvArgs& a) {
  const int64_t kernel = a.kernel;
  const int64_t channels = a.channels;
  const int64_t n = a.n;
  const int64_t history = kernel - 1;
  const int64_t blocks = (channels + kConvBlock - 1) / kConvBlock;
  pool.For(blocks, [&](int64_t b) {
    const int64_t c0 = b * kConvBlock;
    const int64_t width = std::min(kConvBlock, channels - c0);
    // Tap-major weights for this block, so the channel loop is contiguous.
    std::vector<float> taps(static_cast<size_t>(kernel * width));
    for (int64_t j = 0; j < kernel; ++j) {
      for (int64_t c = 0; c < width; ++c) taps[j * width + c] = a.weight[(c0 + c) * kernel + j];
    }
    // Input row s of the extended sequence [state; in], s in [-history, n).
    auto row = [&](int64_t s) -> const float* {
      return s < 0 ? a.state + (history + s) * channels + c0 : a.in + s * a.in_stride + c0;
    };
    for (int64_t t = 0; t < n; ++t) {
      float* o = a.out + t * a.out_stride + c0;
      const float* x0 = row(t - history);
      for (int64_t c = 0; c < width; ++c) o[c] = taps[c] * x0[c];
      for (int64_t j = 1; j < kernel; ++j) {
        const float* xj = row(t - history + j);
        const float* tj = taps.data() + j * width;
        for (int64_t c = 0; c < width; ++c) o[c] += tj[c] * xj[c];
      }
      if (a.bias != nullptr) {
        for (int64_t c = 0; c < width; ++c) o[c] += a.bias[c0 + c];
      }
      for (int64_t c = 0; c < width; ++c) o[c] = Silu(o[c]);
    }
    // The new history is the last K-1 rows of [state; in]; rows move forward, so copy in order.
    for (int64_t h = 0; h < history; ++h) {
      const float* src = row(n - history + h);
      float* dst = a.state + h * channels + c0;
      if (src != dst) std::copy(src, src + width, dst);
    }
  });
}

void GdnHeadRecurrence(const GdnHeadArgs& a, float* state) {
  const int64_t dk = a.dk;
  for (int64_t t = 0; t < a.n; ++t) {
    const float* q = a.q + t * a.qk_stride;
    const float* k = a.k + t * a.qk_stride;
    const float* v = a.v + t * a.v_stride;
    const float alpha = a.alpha[t * a.gate_stride];
    const float beta = a.beta[t * a.gate_stride];
    float* o = a.out + t * a.out_stride;
    for (int64_t i = 0; i < a.dv; ++i) {
      float* m = state + i * dk;
      // Decay the row and predict v[i] from the decayed memory in one pass.
      float acc[kLanes] = {};
      int64_t j = 0;
      for (; j + kLanes <= dk; j += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
          const float decayed = m[j + l] * alpha;
          m[j + l] = decayed;
          acc[l] += decayed * k[j + l];
        }
      }
      for (int l = 0; j < dk; ++j, ++l) {
        m[j] *= alpha;
        acc[l] += m[j] * k[j];
      }
      const float delta = beta * (v[i] - ReduceLanes(acc));
      // Write the correction and read the output in a second pass.
      float out_acc[kLanes] = {};
      j = 0;
      for (; j + kLanes <= dk; j += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
          const float updated = m[j + l] + delta * k[j + l];
          m[j + l] = updated;
          out_acc[l] += updated * q[j + l];
        }
      }
      for (int l = 0; j < dk; ++j, ++l) {
        m[j] += delta * k[j];
        out_acc[l] += m[j] * q[j];
      }
      o[i] = ReduceLanes(out_acc);
    }
  }
}

void GatedRmsNormRow(float* o, const float* z, const float* w, int64_t dim, float eps) {
  const float scale = 1.0f / std::sqrt(SumSquares(o, dim) / static_cast<float>(dim) + eps);
  for (int64_t i = 0; i < dim; ++i) o[i] = w[i] * (o[i] * scale) * Silu(z[i]);
}

void ApplyRope(float* x, int64_t n, int64_t heads, int64_t head_dim, int64_t row_stride,
               int64_t rope_dim, double theta, int64_t first_position) {
  const int64_t half = rope_dim / 2;
  if (half == 0) return;
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    inv_freq[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rope_dim));
  }
  std::vector<float> cos(static_cast<size_t>(half));
  std::vector<float> sin(static_cast<size_t>(half));
  for (int64_t t = 0; t < n; ++t) {
    const double position = static_cast<double>(first_position + t);
    for (int64_t i = 0; i < half; ++i) {
      const double angle = position * inv_freq[i];
      cos[i] = static_cast<float>(std::cos(angle));
      sin[i] = static_cast<float>(std::sin(angle));
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + t * row_stride + h * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float x1 = v[i];
        const float x2 = v[i + half];
        v[i] = x1 * cos[i] - x2 * sin[i];
        v[i + half] = x2 * cos[i] + x1 * sin[i];
      }
    }
  }
}

void CausalAttention(ThreadPool& pool, const AttentionArgs& a) {
  const int64_t d = a.head_dim;
  const int64_t group = a.heads / a.kv_heads;
  const int64_t query_blocks = (a.n + kQueryBlock - 1) / kQueryBlock;
  const int64_t max_rows = kQueryBlock * group;
  const int64_t total_keys = a.first_position + a.n;
  const int64_t splits = (total_keys + kKeySplit - 1) / kKeySplit;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const float neg_inf = -std::numeric_limits<float>::infinity();

  // Partial results per (KV head, query block, key split): running max, sum and unnormalised
  // output of every row over that split's keys.
  const int64_t items = a.kv_heads * query_blocks * splits;
  std::vector<float> part_max(static_cast<size_t>(items * max_rows));
  std::vector<float> part_sum(static_cast<size_t>(items * max_rows));
  std::vector<float> part_acc(static_cast<size_t>(items * max_rows * d));

  // Pass 1. Row r of a (KV head g, query block) item is token t0 + r / group, query head
  // g * group + r % group, so the group's heads share each K and V block in one GEMM. The key
  // range is cut into fixed splits (not per thread), so short queries over a long prefix still
  // spread over the pool and results depend only on the shapes.
  pool.For(items, [&](int64_t item) {
    const int64_t split = item % splits;
    const int64_t block = item / splits;
    const int64_t g = block / query_blocks;
    const int64_t t0 = (block % query_blocks) * kQueryBlock;
    const int64_t t1 = std::min(a.n, t0 + kQueryBlock);
    const int64_t rows = (t1 - t0) * group;
    const int64_t key_begin = split * kKeySplit;
    const int64_t key_end = std::min(a.first_position + t1, key_begin + kKeySplit);
    float* run_max = part_max.data() + item * max_rows;
    float* run_sum = part_sum.data() + item * max_rows;
    float* acc = part_acc.data() + item * max_rows * d;
    std::fill(run_max, run_max + rows, neg_inf);
    std::fill(run_sum, run_sum + rows, 0.0f);
    std::fill(acc, acc + rows * d, 0.0f);
    if (key_begin >= key_end) return;  // every key of this split is in these rows' future

    thread_local std::vector<float> q, scores;
    q.resize(static_cast<size_t>(rows * d));
    scores.resize(static_cast<size_t>(rows * kKeyBlock));
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = a.q + (t0 + r / group) * a.q_stride + (g * group + r % group) * d;
      for (int64_t i = 0; i < d; ++i) q[r * d + i] = src[i] * scale;
    }
    for (int64_t k0 = key_begin; k0 < key_end; k0 += kKeyBlock) {
      const int64_t kn = std::min(kKeyBlock, key_end - k0);
      const float* kb = a.k + k0 * a.kv_stride + g * d;
      const float* vb = a.v + k0 * a.kv_stride + g * d;
      // scores[rows, kn] = q · K_blockᵀ
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows),
                  static_cast<int>(kn), static_cast<int>(d), 1.0f, q.data(), static_cast<int>(d),
                  kb, static_cast<int>(a.kv_stride), 0.0f, scores.data(),
                  static_cast<int>(kKeyBlock));
      // Online softmax: scores become probabilities relative to the running max, earlier
      // accumulations are rescaled; keys after a row's own position get probability 0.
      for (int64_t r = 0; r < rows; ++r) {
        float* s = scores.data() + r * kKeyBlock;
        const int64_t last_key = a.first_position + t0 + r / group;
        const int64_t valid = std::clamp<int64_t>(last_key - k0 + 1, 0, kn);
        if (valid == 0) {
          for (int64_t j = 0; j < kn; ++j) s[j] = 0.0f;
          continue;
        }
        float block_max = neg_inf;
        for (int64_t j = 0; j < valid; ++j) block_max = s[j] > block_max ? s[j] : block_max;
        const float new_max = block_max > run_max[r] ? block_max : run_max[r];
        const float correction = run_max[r] == neg_inf ? 0.0f : Exp(run_max[r] - new_max);
        float block_sum = 0.0f;
        for (int64_t j = 0; j < valid; ++j) {
          s[j] = Exp(s[j] - new_max);
          block_sum += s[j];
        }
        for (int64_t j = valid; j < kn; ++j) s[j] = 0.0f;
        run_sum[r] = run_sum[r] * correction + block_sum;
        run_max[r] = new_max;
        float* ar = acc + r * d;
        for (int64_t i = 0; i < d; ++i) ar[i] *= correction;
      }
      // acc[rows, d] += P · V_block
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows),
                  static_cast<int>(d), static_cast<int>(kn), 1.0f, scores.data(),
                  static_cast<int>(kKeyBlock), vb, static_cast<int>(a.kv_stride), 1.0f, acc,
                  static_cast<int>(d));
    }
  });

  // Pass 2: merge each row's splits in increasing order and normalise.
  pool.For(a.kv_heads * query_blocks, [&](int64_t block) {
    const int64_t g = block / query_blocks;
    const int64_t t0 = (block % query_blocks) * kQueryBlock;
    const int64_t rows = (std::min(a.n, t0 + kQueryBlock) - t0) * group;
    for (int64_t r = 0; r < rows; ++r) {
      float total_max = neg_inf;
      for (int64_t sp = 0; sp < splits; ++sp) {
        const float m = part_max[(block * splits + sp) * max_rows + r];
        total_max = m > total_max ? m : total_max;
      }
      float* dst = a.out + (t0 + r / group) * a.out_stride + (g * group + r % group) * d;
      std::fill(dst, dst + d, 0.0f);
      float total_sum = 0.0f;
      for (int64_t sp = 0; sp < splits; ++sp) {
        const int64_t item = block * splits + sp;
        const float m = part_max[item * max_rows + r];
        if (m == neg_inf) continue;
        const float w = Exp(m - total_max);
        total_sum += part_sum[item * max_rows + r] * w;
        const float* src = part_acc.data() + (item * max_rows + r) * d;
        for (int64_t i = 0; i < d; ++i) dst[i] += src[i] * w;
      }
      const float inv = 1.0f / total_sum;
      for (int64_t i = 0; i < d; ++i) dst[i] *= inv;
    }
  });
}

}  // namespace prefixd::hybrid::cpu
