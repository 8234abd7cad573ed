// The CPU kernels of the hybrid reference model against straightforward double-precision
// reference implementations written from qwen35-arch.md: the Gated DeltaNet recurrence against
// its closed form, zero-centred and gated RMSNorm, the causal conv, partial rotate-half RoPE,
// GQA causal attention, GEMM, and the exp approximation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cpu_kernels.h"
#include "random_vectors.h"
#include "thread_pool.h"

namespace prefixd::hybrid {
namespace {

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double Silu(double x) { return x * Sigmoid(x); }

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, double tol,
                 const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(got[i] - want[i]) / std::max(1.0, std::abs(want[i]));
    if (err > worst) worst = err, at = i;
  }
  EXPECT_LE(worst, tol) << what << ": element " << at << " is " << got[at] << ", want " << want[at];
}

TEST(HybridMath, ExpIsAccurateAcrossItsRange) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.01f) {
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(cpu::Exp(x) - want) / want);
  }
  EXPECT_LT(worst, 5e-7);
  EXPECT_EQ(cpu::Exp(0.0f), 1.0f);
  EXPECT_GT(cpu::Exp(-1000.0f), 0.0f);  // clamped, never NaN
  EXPECT_TRUE(std::isfinite(cpu::Exp(1000.0f)));
}

TEST(HybridMath, DotMatchesDoubleAndIsOrderFixed) {
  for (int64_t n : {1, 15, 16, 17, 128, 1000}) {
    const auto a = Random(static_cast<size_t>(n), 1);
    const auto b = Random(static_cast<size_t>(n), 2);
    double want = 0;
    for (int64_t i = 0; i < n; ++i) want += double(a[i]) * b[i];
    EXPECT_NEAR(cpu::Dot(a.data(), b.data(), n), want, 1e-4 * std::sqrt(double(n))) << n;
    EXPECT_EQ(cpu::Dot(a.data(), b.data(), n), cpu::Dot(a.data(), b.data(), n));
  }
}

TEST(HybridMath, GemmMatchesNaive) {
  ThreadPool pool(3);
  const int64_t n = 7, in = 33, out = 600;  // more than two 256-column slices
  const auto x = Random(n * in, 3);
  const auto w = Random(out * in, 4);
  std::vector<float> y(n * out);
  cpu::Gemm(pool, x.data(), n, in, w.data(), out, y.data());
  std::vector<double> want(n * out);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < out; ++c) {
      double s = 0;
      for (int64_t i = 0; i < in; ++i) s += double(x[r * in + i]) * w[c * in + i];
      want[r * out + c] = s;
    }
  }
  ExpectClose(y, want, 1e-5, "gemm");
}

TEST(HybridMath, RmsNormIsZeroCentred) {
  const int64_t rows = 3, dim = 40;
  const auto x = Random(rows * dim, 5, 3.0f);
  const auto w = Random(dim, 6, 0.1f);
  std::vector<float> y(rows * dim);
  cpu::RmsNormZeroCentred(x.data(), w.data(), rows, dim, 1e-6f, y.data());
  std::vector<double> want(rows * dim);
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t i = 0; i < dim; ++i) ms += double(x[r * dim + i]) * x[r * dim + i];
    const double s = 1.0 / std::sqrt(ms / dim + 1e-6);
    for (int64_t i = 0; i < dim; ++i) want[r * dim + i] = x[r * dim + i] * s * (1.0 + w[i]);
  }
  ExpectClose(y, want, 1e-5, "rmsnorm");
  // With w = 0 the norm is the identity scaling: unit RMS.
  std::vector<float> zeros(dim, 0.0f);
  cpu::RmsNormZeroCentred(x.data(), zeros.data(), 1, dim, 1e-6f, y.data());
  double ms = 0;
  for (int64_t i = 0; i < dim; ++i) ms += double(y[i]) * y[i];
  EXPECT_NEAR(ms / dim, 1.0, 1e-5);
}

TEST(HybridMath, GatedRmsNormUsesPlainWeightAndSiluGate) {
  const int64_t dim = 24;
  auto o = Random(dim, 7, 2.0f);
  const auto z = Random(dim, 8);
  const auto w = Random(dim, 9);
  std::vector<double> want(dim);
  double ms = 0;
  for (float v : o) ms += double(v) * v;
  const double s = 1.0 / std::sqrt(ms / dim + 1e-6);
  for (int64_t i = 0; i < dim; ++i) want[i] = w[i] * (o[i] * s) * Silu(z[i]);
  cpu::GatedRmsNormRow(o.data(), z.data(), w.data(), dim, 1e-6f);
  ExpectClose(o, want, 1e-5, "gated rmsnorm");
}

TEST(HybridMath, L2NormalizeThenScale) {
  auto x = Random(16, 10, 5.0f);
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  std::vector<double> want(16);
  for (int i = 0; i < 16; ++i) want[i] = x[i] / std::sqrt(ss + 1e-6) * 0.25;
  cpu::L2NormalizeRow(x.data(), 16, 1e-6f, 0.25f);
  ExpectClose(x, want, 1e-6, "l2norm");
}

TEST(HybridMath, CausalConvMatchesReferenceAndIsChunkInvariant) {
  ThreadPool pool(2);
  const int64_t n = 11, channels = 600, kernel = 4;  // two conv work blocks
  const auto in = Random(n * channels, 11);
  const auto weight = Random(channels * kernel, 12, 0.5f);
  const auto history = Random((kernel - 1) * channels, 13);
  // Reference: the full sequence [history; in], taps applied oldest first.
  std::vector<double> want(n * channels);
  auto at = [&](int64_t s, int64_t c) -> double {
    return s < 0 ? history[(kernel - 1 + s) * channels + c] : in[s * channels + c];
  };
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t c = 0; c < channels; ++c) {
      double acc = 0;
      for (int64_t j = 0; j < kernel; ++j) acc += weight[c * kernel + j] * at(t - 3 + j, c);
      want[t * channels + c] = Silu(acc);
    }
  }
  std::vector<float> state = history;
  std::vector<float> out(n * channels);
  cpu::CausalConvSilu(pool, in.data(), n, channels, weight.data(), kernel, state.data(),
                      out.data());
  ExpectClose(out, want, 2e-6, "conv");
  for (int64_t h = 0; h < kernel - 1; ++h) {
    for (int64_t c = 0; c < channels; ++c) {
      ASSERT_EQ(state[h * channels + c], in[(n - 3 + h) * channels + c]);
    }
  }
  // The same sequence in pieces of 2, 1 and 8 tokens gives the same bits.
  std::vector<float> state2 = history;
  std::vector<float> out2(n * channels);
  int64_t done = 0;
  for (int64_t piece : {2, 1, 8}) {
    cpu::CausalConvSilu(pool, in.data() + done * channels, piece, channels, weight.data(), kernel,
                        state2.data(), out2.data() + done * channels);
    done += piece;
  }
  EXPECT_EQ(out, out2);
  EXPECT_EQ(state, state2);
}

// The recurrence against S_t = α_t (I − β_t k kᵀ) S_{t−1} + β_t k v_tᵀ, o_t = S_tᵀ q_t in double.
TEST(HybridMath, GdnRecurrenceMatchesClosedForm) {
  const int64_t n = 20, dk = 24, dv = 20;  // not multiples of 16: exercises the tails
  auto q = Random(n * dk, 14);
  auto k = Random(n * dk, 15);
  const auto v = Random(n * dv, 16);
  std::vector<float> alpha(n), beta(n);
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> unit(0.05f, 0.99f);
  for (int64_t t = 0; t < n; ++t) alpha[t] = unit(rng), beta[t] = unit(rng);
  for (int64_t t = 0; t < n; ++t) {
    cpu::L2NormalizeRow(q.data() + t * dk, dk, 1e-6f, 1.0f / std::sqrt(float(dk)));
    cpu::L2NormalizeRow(k.data() + t * dk, dk, 1e-6f, 1.0f);
  }
  const auto s0 = Random(dv * dk, 18, 0.3f);  // value-major [Dv, Dk]
  std::vector<double> S(dk * dv);             // key-major S[j][i]
  for (int64_t i = 0; i < dv; ++i) {
    for (int64_t j = 0; j < dk; ++j) S[j * dv + i] = s0[i * dk + j];
  }
  std::vector<double> want_out(n * dv);
  for (int64_t t = 0; t < n; ++t) {
    const float* kt = k.data() + t * dk;
    std::vector<double> next(dk * dv);
    // (I − β k kᵀ) S, then scale by α, then add β k vᵀ.
    for (int64_t j = 0; j < dk; ++j) {
      for (int64_t i = 0; i < dv; ++i) {
        double proj = 0;
        for (int64_t jj = 0; jj < dk; ++jj) proj += double(kt[jj]) * S[jj * dv + i];
        next[j * dv + i] =
            alpha[t] * (S[j * dv + i] - beta[t] * kt[j] * proj) + beta[t] * kt[j] * v[t * dv + i];
      }
    }
    S = next;
    for (int64_t i = 0; i < dv; ++i) {
      double o = 0;
      for (int64_t j = 0; j < dk; ++j) o += S[j * dv + i] * q[t * dk + j];
      want_out[t * dv + i] = o;
    }
  }
  std::vector<float> state = s0;
  std::vector<float> out(n * dv);
  cpu::GdnHeadRecurrence({.q = q.data(),
                          .k = k.data(),
                          .qk_stride = dk,
                          .v = v.data(),
                          .v_stride = dv,
                          .alpha = alpha.data(),
                          .beta = beta.data(),
                          .gate_stride = 1,
                          .out = out.data(),
                          .out_stride = dv,
                          .n = n,
                          .dk = dk,
                          .dv = dv},
                         state.data());
  ExpectClose(out, want_out, 1e-5, "gdn output");
  std::vector<double> want_state(dv * dk);
  for (int64_t i = 0; i < dv; ++i) {
    for (int64_t j = 0; j < dk; ++j) want_state[i * dk + j] = S[j * dv + i];
  }
  ExpectClose(state, want_state, 1e-5, "gdn state (value-major)");
}

TEST(HybridMath, RopeRotatesHalfOfThePartialSlice) {
  const int64_t n = 5, heads = 3, d = 32, rope = 8, first = 1000;
  const double theta = 1e7;
  const auto x0 = Random(n * heads * d, 19);
  std::vector<double> want(x0.begin(), x0.end());
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      double* v = want.data() + (t * heads + h) * d;
      const float* src = x0.data() + (t * heads + h) * d;
      for (int64_t i = 0; i < rope / 2; ++i) {
        const double angle = double(first + t) * std::pow(theta, -2.0 * i / rope);
        v[i] = src[i] * std::cos(angle) - src[i + rope / 2] * std::sin(angle);
        v[i + rope / 2] = src[i + rope / 2] * std::cos(angle) + src[i] * std::sin(angle);
      }
    }
  }
  std::vector<float> x = x0;
  cpu::ApplyRope(x.data(), n, heads, d, heads * d, rope, theta, first);
  ExpectClose(x, want, 1e-5, "rope");
  // Dims past the rotary slice pass through untouched.
  for (int64_t r = 0; r < n * heads; ++r) {
    for (int64_t i = rope; i < d; ++i) ASSERT_EQ(x[r * d + i], x0[r * d + i]);
  }
}

// Naive causal GQA softmax attention in double.
std::vector<double> NaiveAttention(const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v, int64_t n, int64_t first,
                                   int64_t heads, int64_t kv_heads, int64_t d) {
  std::vector<double> out(n * heads * d);
  const int64_t kv_dim = kv_heads * d;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = h / (heads / kv_heads);
      const int64_t keys = first + t + 1;
      std::vector<double> s(keys);
      double mx = -1e300;
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i)
          dot += double(q[(t * heads + h) * d + i]) * k[j * kv_dim + g * d + i];
        s[j] = dot / std::sqrt(double(d));
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (double& e : s) sum += (e = std::exp(e - mx));
      for (int64_t i = 0; i < d; ++i) {
        double acc = 0;
        for (int64_t j = 0; j < keys; ++j) acc += s[j] * v[j * kv_dim + g * d + i];
        out[(t * heads + h) * d + i] = acc / sum;
      }
    }
  }
  return out;
}

TEST(HybridMath, CausalAttentionMatchesNaiveGqa) {
  ThreadPool pool(2);
  struct Case {
    int64_t n, first, heads, kv_heads, d;
  };
  for (const Case c :
       {Case{1, 0, 4, 2, 32}, Case{40, 0, 4, 2, 32}, Case{17, 150, 8, 2, 40},
        Case{1, 300, 4, 1, 64}, Case{70, 5, 2, 2, 16},
        // Past one 4096-key split: partial results merged across splits.
        Case{3, 5000, 8, 2, 32}, Case{1, 9000, 4, 1, 64}, Case{100, 4050, 2, 1, 16}}) {
    const int64_t total = c.first + c.n;
    const auto q = Random(c.n * c.heads * c.d, 20, 2.0f);
    const auto k = Random(total * c.kv_heads * c.d, 21, 2.0f);
    const auto v = Random(total * c.kv_heads * c.d, 22);
    std::vector<float> out(c.n * c.heads * c.d);
    cpu::CausalAttention(pool, {.q = q.data(),
                                .q_stride = c.heads * c.d,
                                .k = k.data(),
                                .v = v.data(),
                                .kv_stride = c.kv_heads * c.d,
                                .out = out.data(),
                                .out_stride = c.heads * c.d,
                                .n = c.n,
                                .first_position = c.first,
                                .heads = c.heads,
                                .kv_heads = c.kv_heads,
                                .head_dim = c.d});
    ExpectClose(out, NaiveAttention(q, k, v, c.n, c.first, c.heads, c.kv_heads, c.d), 2e-5,
                "attention");
  }
}

TEST(HybridMath, KernelsDoNotDependOnThreadCount) {
  ThreadPool one(1), three(3);
  const int64_t n = 33, first = 4100, heads = 4, kv_heads = 2, d = 32;
  const auto q = Random(n * heads * d, 23);
  const auto k = Random((first + n) * kv_heads * d, 24);
  const auto v = Random((first + n) * kv_heads * d, 25);
  std::vector<float> a(n * heads * d), b(n * heads * d);
  cpu::AttentionArgs args{.q = q.data(),
                          .q_stride = heads * d,
                          .k = k.data(),
                          .v = v.data(),
                          .kv_stride = kv_heads * d,
                          .out = a.data(),
                          .out_stride = heads * d,
                          .n = n,
                          .first_position = first,
                          .heads = heads,
                          .kv_heads = kv_heads,
                          .head_dim = d};
  cpu::CausalAttention(one, args);
  args.out = b.data();
  cpu::CausalAttention(three, args);
  EXPECT_EQ(a, b);
  const auto w = Random(700 * 64, 26);
  std::vector<float> y1(5 * 700), y3(5 * 700);
  cpu::Gemm(one, q.data(), 5, 64, w.data(), 700, y1.data());
  cpu::Gemm(three, q.data(), 5, 64, w.data(), 700, y3.data());
  EXPECT_EQ(y1, y3);
}

}  // namespace
}  // namespace prefixd::hybrid
