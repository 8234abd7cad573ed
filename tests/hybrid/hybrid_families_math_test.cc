// The Mamba-2 and RWKV-7 kernels (family_kernels.h, and the biased strided causal conv) against
// straightforward double-precision references: each recurrence against its closed form on short
// inputs, the conv against its definition and across chunkings, the norms against theirs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu_kernels.h"
#include "family_kernels.h"
#include "thread_pool.h"

namespace prefixd::hybrid {
namespace {

using Matrix = std::vector<std::vector<double>>;

std::vector<float> Random(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// |a − b| ≤ tol · max(1, |b|).
void ExpectClose(double a, double b, double tol, const std::string& what) {
  EXPECT_LE(std::abs(a - b), tol * std::max(1.0, std::abs(b))) << what << ": " << a << " vs " << b;
}

Matrix Zeros(size_t r, size_t c) { return Matrix(r, std::vector<double>(c, 0.0)); }

Matrix Multiply(const Matrix& a, const Matrix& b) {
  Matrix out = Zeros(a.size(), b[0].size());
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t k = 0; k < b.size(); ++k) {
      for (size_t j = 0; j < b[0].size(); ++j) out[i][j] += a[i][k] * b[k][j];
    }
  }
  return out;
}

// ---- Mamba-2 -------------------------------------------------------------------------------

// y_t = C_t-weighted sum over s ≤ t of (Π_{s<r≤t} e^{dt_r A}) dt_s x_s B_sᵀ, plus the decayed
// initial state, plus D x_t: the closed form of the sequential scan.
TEST(HybridFamilyMath, Mamba2ScanMatchesItsClosedForm) {
  for (const auto& [p, ns] : {std::pair<int64_t, int64_t>{4, 16}, {3, 21}, {8, 40}}) {
    const int64_t n = 7;
    const int64_t x_stride = p + 5;  // strided, as the heads sit inside xBC
    const int64_t bc_stride = 2 * ns + 3;
    const auto x = Random(static_cast<size_t>(n * x_stride), 1);
    const auto bc = Random(static_cast<size_t>(n * bc_stride), 2);
    const auto dt = Random(static_cast<size_t>(n), 3, 0.01f, 0.5f);
    const auto s0 = Random(static_cast<size_t>(p * ns), 4);
    const float a = -1.7f;
    const float d = 0.8f;
    std::vector<float> state = s0;
    std::vector<float> out(static_cast<size_t>(n * p));
    cpu::Mamba2HeadScan({.x = x.data(),
                         .x_stride = x_stride,
                         .b = bc.data(),
                         .c = bc.data() + ns,
                         .bc_stride = bc_stride,
                         .dt = dt.data(),
                         .dt_stride = 1,
                         .a = a,
                         .d = d,
                         .out = out.data(),
                         .out_stride = p,
                         .n = n,
                         .head_dim = p,
                         .state_size = ns},
                        state.data());
    // decay(s, t) = Π_{s<r≤t} e^{dt_r A}
    auto decay = [&](int64_t s, int64_t t) {
      double v = 1;
      for (int64_t r = s + 1; r <= t; ++r) v *= std::exp(double(dt[r]) * a);
      return v;
    };
    auto B = [&](int64_t s, int64_t j) { return double(bc[s * bc_stride + j]); };
    auto C = [&](int64_t s, int64_t j) { return double(bc[s * bc_stride + ns + j]); };
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t i = 0; i < p; ++i) {
        double y = double(d) * x[t * x_stride + i];
        for (int64_t j = 0; j < ns; ++j) {
          double sij = decay(-1, t) * s0[i * ns + j];
          for (int64_t s = 0; s <= t; ++s)
            sij += decay(s, t) * dt[s] * x[s * x_stride + i] * B(s, j);
          y += sij * C(t, j);
          if (t == n - 1) ExpectClose(state[i * ns + j], sij, 1e-5, "final state");
        }
        ExpectClose(out[t * p + i], y, 1e-5, "y");
      }
    }
  }
}

// ---- RWKV-7 --------------------------------------------------------------------------------

// S_t = S_0 Π_{r≤t} T_r + Σ_{s≤t} v_s k_sᵀ Π_{s<r≤t} T_r with T_r = diag(w_r) − κ̂_r (κ̂_r ⊙ a_r)ᵀ,
// and o_t = S_t r_t: the closed form of the generalised delta rule.
TEST(HybridFamilyMath, Rwkv7WkvMatchesItsClosedForm) {
  for (const int64_t dim : {8, 20, 32}) {
    const int64_t n = 6;
    const int64_t stride = dim + 3;
    const size_t len = static_cast<size_t>(n * stride);
    const auto r = Random(len, 11);
    const auto w = Random(len, 12, 0.5f, 0.99f);
    const auto k = Random(len, 13);
    const auto v = Random(len, 14);
    auto kk = Random(len, 15);
    const auto a = Random(len, 16, 0.0f, 1.0f);
    for (int64_t t = 0; t < n; ++t) {  // κ̂ is unit length per token
      double norm = 0;
      for (int64_t j = 0; j < dim; ++j) norm += double(kk[t * stride + j]) * kk[t * stride + j];
      for (int64_t j = 0; j < dim; ++j) kk[t * stride + j] /= static_cast<float>(std::sqrt(norm));
    }
    const auto s0 = Random(static_cast<size_t>(dim * dim), 17);
    std::vector<float> state = s0;
    std::vector<float> out(len);
    cpu::Rwkv7HeadWkv({.r = r.data(),
                       .w = w.data(),
                       .k = k.data(),
                       .v = v.data(),
                       .kk = kk.data(),
                       .a = a.data(),
                       .stride = stride,
                       .out = out.data(),
                       .out_stride = stride,
                       .n = n,
                       .dim = dim},
                      state.data());
    const size_t d = static_cast<size_t>(dim);
    auto transition = [&](int64_t t) {
      Matrix m = Zeros(d, d);
      for (size_t i = 0; i < d; ++i) {
        m[i][i] = w[t * stride + i];
        for (size_t j = 0; j < d; ++j) {
          m[i][j] -= double(kk[t * stride + i]) * kk[t * stride + j] * a[t * stride + j];
        }
      }
      return m;
    };
    for (int64_t t = 0; t < n; ++t) {
      // Π_{s<r≤t} T_r for every s from −1, built right to left.
      std::vector<Matrix> tail(static_cast<size_t>(t + 2));
      Matrix identity = Zeros(d, d);
      for (size_t i = 0; i < d; ++i) identity[i][i] = 1;
      tail[static_cast<size_t>(t + 1)] = identity;  // s = t: empty product
      for (int64_t s = t - 1; s >= -1; --s) {
        tail[static_cast<size_t>(s + 1)] =
            Multiply(transition(s + 1), tail[static_cast<size_t>(s + 2)]);
      }
      Matrix st = Zeros(d, d);
      for (size_t i = 0; i < d; ++i) {
        for (size_t j = 0; j < d; ++j) st[i][j] = s0[i * d + j];
      }
      st = Multiply(st, tail[0]);
      for (int64_t s = 0; s <= t; ++s) {
        Matrix outer = Zeros(d, d);
        for (size_t i = 0; i < d; ++i) {
          for (size_t j = 0; j < d; ++j)
            outer[i][j] = double(v[s * stride + i]) * k[s * stride + j];
        }
        const Matrix term = Multiply(outer, tail[static_cast<size_t>(s + 1)]);
        for (size_t i = 0; i < d; ++i) {
          for (size_t j = 0; j < d; ++j) st[i][j] += term[i][j];
        }
      }
      for (size_t i = 0; i < d; ++i) {
        double o = 0;
        for (size_t j = 0; j < d; ++j) o += st[i][j] * r[t * stride + j];
        ExpectClose(out[t * stride + i], o, 2e-5, "o");
        if (t == n - 1) {
          for (size_t j = 0; j < d; ++j) ExpectClose(state[i * d + j], st[i][j], 2e-5, "state");
        }
      }
    }
  }
}

// ---- Causal conv with bias and strides ------------------------------------------------------

TEST(HybridFamilyMath, BiasedStridedConvMatchesItsDefinitionAndAnyChunking) {
  ThreadPool pool(3);
  const int64_t channels = 600;  // more than one 512-channel block
  const int64_t kernel = 4;
  const int64_t n = 9;
  const int64_t in_stride = channels + 7;
  const auto in = Random(static_cast<size_t>(n * in_stride), 21);
  const auto weight = Random(static_cast<size_t>(channels * kernel), 22);
  const auto bias = Random(static_cast<size_t>(channels), 23);
  const auto state0 = Random(static_cast<size_t>((kernel - 1) * channels), 24);
  auto run = [&](std::vector<int64_t> cuts, std::vector<float>* state) {
    std::vector<float> out(static_cast<size_t>(n * channels));
    int64_t begin = 0;
    cuts.push_back(n);
    for (int64_t end : cuts) {
      cpu::CausalConvBiasSilu(pool, {.in = in.data() + begin * in_stride,
                                     .in_stride = in_stride,
                                     .n = end - begin,
                                     .channels = channels,
                                     .weight = weight.data(),
                                     .bias = bias.data(),
                                     .kernel = kernel,
                                     .state = state->data(),
                                     .out = out.data() + begin * channels,
                                     .out_stride = channels});
      begin = end;
    }
    return out;
  };
  std::vector<float> state = state0;
  const std::vector<float> whole = run({}, &state);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t c = 0; c < channels; ++c) {
      double acc = bias[c];
      for (int64_t j = 0; j < kernel; ++j) {
        const int64_t s = t - (kernel - 1) + j;
        const double xin = s < 0 ? state0[(kernel - 1 + s) * channels + c] : in[s * in_stride + c];
        acc += double(weight[c * kernel + j]) * xin;
      }
      ExpectClose(whole[t * channels + c], acc / (1 + std::exp(-acc)), 1e-5, "conv");
    }
  }
  for (int64_t h = 0; h < kernel - 1; ++h) {
    for (int64_t c = 0; c < channels; ++c) {
      ASSERT_EQ(state[h * channels + c], in[(n - (kernel - 1) + h) * in_stride + c]);
    }
  }
  // Chunking the same tokens differently gives the same bits (the conv is per token).
  for (const std::vector<int64_t>& cuts : {std::vector<int64_t>{1}, {2, 3}, {1, 2, 3, 8}}) {
    std::vector<float> s = state0;
    EXPECT_EQ(run(cuts, &s), whole);
    EXPECT_EQ(s, state);
  }
  // Without a bias and with dense rows it is exactly the Gated DeltaNet conv.
  std::vector<float> dense(static_cast<size_t>(n * channels));
  for (int64_t t = 0; t < n; ++t) {
    std::memcpy(dense.data() + t * channels, in.data() + t * in_stride, channels * sizeof(float));
  }
  std::vector<float> s1 = state0, s2 = state0;
  std::vector<float> o1(dense.size()), o2(dense.size());
  cpu::CausalConvSilu(pool, dense.data(), n, channels, weight.data(), kernel, s1.data(), o1.data());
  cpu::CausalConvBiasSilu(pool, {.in = dense.data(),
                                 .in_stride = channels,
                                 .n = n,
                                 .channels = channels,
                                 .weight = weight.data(),
                                 .bias = nullptr,
                                 .kernel = kernel,
                                 .state = s2.data(),
                                 .out = o2.data(),
                                 .out_stride = channels});
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(s1, s2);
}

// ---- Norms ---------------------------------------------------------------------------------

TEST(HybridFamilyMath, NormsMatchTheirDefinitions) {
  for (const int64_t dim : {5, 16, 64, 77}) {
    const auto x = Random(static_cast<size_t>(dim), 31, -3.0f, 2.0f);
    const auto z = Random(static_cast<size_t>(dim), 32, -4.0f, 4.0f);
    const auto w = Random(static_cast<size_t>(dim), 33, 0.5f, 1.5f);
    const auto b = Random(static_cast<size_t>(dim), 34);
    const float eps = 1e-5f;
    double sum = 0, sq = 0;
    for (float v : x) {
      sum += v;
      sq += double(v) * v;
    }
    ExpectClose(cpu::Sum(x.data(), dim), sum, 1e-6, "sum");
    std::vector<float> y(static_cast<size_t>(dim));
    cpu::RmsNormRow(x.data(), w.data(), dim, eps, y.data());
    for (int64_t i = 0; i < dim; ++i) {
      ExpectClose(y[i], w[i] * x[i] / std::sqrt(sq / dim + eps), 1e-5, "rmsnorm");
    }
    const double mean = sum / dim;
    double var = 0;
    for (float v : x) var += (v - mean) * (v - mean);
    var /= dim;
    cpu::LayerNormRow(x.data(), w.data(), b.data(), dim, eps, y.data());
    for (int64_t i = 0; i < dim; ++i) {
      ExpectClose(y[i], (x[i] - mean) / std::sqrt(var + eps) * w[i] + b[i], 1e-5, "layernorm");
    }
    // In place gives the same bits.
    std::vector<float> in_place = x;
    cpu::LayerNormRow(in_place.data(), w.data(), b.data(), dim, eps, in_place.data());
    EXPECT_EQ(in_place, y);
    // Gate first: o ⊙ silu(z), then the RMSNorm of that (one group).
    std::vector<float> o = x;
    cpu::GateFirstRmsNormRow(o.data(), z.data(), w.data(), dim, 1, eps);
    std::vector<double> gated(static_cast<size_t>(dim));
    double gsq = 0;
    for (int64_t i = 0; i < dim; ++i) {
      gated[i] = double(x[i]) * z[i] / (1 + std::exp(-double(z[i])));
      gsq += gated[i] * gated[i];
    }
    for (int64_t i = 0; i < dim; ++i) {
      ExpectClose(o[i], w[i] * gated[i] / std::sqrt(gsq / dim + eps), 1e-5, "gated rmsnorm");
    }
  }
}

// mamba_ssm's RMSNormGated(group_size = dim / groups): each group's mean square is its own.
// The groups' scales differ tenfold, so a norm over all of dim (transformers' Mamba2) is far off.
TEST(HybridFamilyMath, GatedRmsNormNormalisesEachGroupOnItsOwn) {
  const float eps = 1e-5f;
  for (const int64_t groups : {1, 2, 3, 8}) {
    for (const int64_t group_size : {5, 16, 24}) {
      const int64_t dim = groups * group_size;
      auto x = Random(static_cast<size_t>(dim), 41, -3.0f, 2.0f);
      for (int64_t i = 0; i < dim; ++i) x[i] *= (i / group_size) % 2 == 0 ? 1.0f : 10.0f;
      const auto z = Random(static_cast<size_t>(dim), 42, -4.0f, 4.0f);
      const auto w = Random(static_cast<size_t>(dim), 43, 0.5f, 1.5f);
      std::vector<float> o = x;
      cpu::GateFirstRmsNormRow(o.data(), z.data(), w.data(), dim, groups, eps);
      for (int64_t g = 0; g < groups; ++g) {
        std::vector<double> gated(static_cast<size_t>(group_size));
        double sq = 0;
        for (int64_t i = 0; i < group_size; ++i) {
          const int64_t k = g * group_size + i;
          gated[i] = double(x[k]) * z[k] / (1 + std::exp(-double(z[k])));
          sq += gated[i] * gated[i];
        }
        for (int64_t i = 0; i < group_size; ++i) {
          const int64_t k = g * group_size + i;
          ExpectClose(o[k], w[k] * gated[i] / std::sqrt(sq / group_size + eps), 1e-5,
                      "group " + std::to_string(g) + " of " + std::to_string(groups));
        }
      }
      // One group is the plain gated RMSNorm over all of dim, bit for bit.
      if (groups == 1) {
        std::vector<float> plain = x;
        for (int64_t i = 0; i < dim; ++i) plain[i] *= cpu::Silu(z[i]);
        cpu::RmsNormRow(plain.data(), w.data(), dim, eps, plain.data());
        EXPECT_EQ(o, plain);
      }
    }
  }
}

}  // namespace
}  // namespace prefixd::hybrid
