// Mamba-2 and RWKV-7 as whole models: built-in and config.json shapes, synthetic weights and
// checkpoints with the upstream tensor names, the CPU forward pass token by token against chunked
// prefill, determinism across thread counts, and in-process hydration.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "config.h"
#include "cpu_backend.h"
#include "family_config.h"
#include "hybrid_test_util.h"
#include "model.h"
#include "weights.h"

namespace prefixd::hybrid {
namespace {

using Json = nlohmann::json;

// ---- Configs --------------------------------------------------------------------------------

uint64_t StateBytesPerLayer(const ModelConfig& c) {
  SequenceState s(c);
  return s.layers()[0].bytes();
}

TEST(HybridFamilyConfig, BuiltinsHaveThePublishedShapes) {
  for (const std::string& name : FamilyBuiltinNames()) {
    auto c = BuiltinConfig(name);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().ToString();
    EXPECT_NE(c->family, ModelFamily::kQwen35);
    EXPECT_EQ(c->num_attention_layers(), 0) << name;
    EXPECT_EQ(c->num_linear_layers(), 0) << name;
  }
  const ModelConfig m130 = *BuiltinConfig("mamba2-130m");
  EXPECT_EQ(m130.num_layers(), 24);
  EXPECT_EQ(m130.hidden_size, 768);
  EXPECT_EQ(m130.mamba2.intermediate(), 1536);
  EXPECT_EQ(m130.mamba2.in_proj_dim(), 3352);
  EXPECT_EQ(m130.mamba2.conv_dim(), 1792);
  EXPECT_EQ(m130.vocab_size, 50288);
  EXPECT_TRUE(m130.tie_word_embeddings);
  // conv [3, 1792] + ssm [24, 64, 128], fp32.
  EXPECT_EQ(StateBytesPerLayer(m130), (3u * 1792 + 24u * 64 * 128) * 4);
  const ModelConfig m370 = *BuiltinConfig("mamba2-370m");
  EXPECT_EQ(m370.num_layers(), 48);
  EXPECT_EQ(m370.mamba2.num_heads, 32);
  EXPECT_EQ(StateBytesPerLayer(m370), (3u * 2304 + 32u * 64 * 128) * 4);
  const ModelConfig r01 = *BuiltinConfig("rwkv7-0.1b");
  EXPECT_EQ(r01.num_layers(), 12);
  EXPECT_EQ(Rwkv7Heads(r01), 12);
  EXPECT_EQ(r01.intermediate_size, 3072);
  EXPECT_FALSE(r01.tie_word_embeddings);
  // two token shifts [768] + wkv [12, 64, 64], fp32.
  EXPECT_EQ(StateBytesPerLayer(r01), (2u * 768 + 12u * 64 * 64) * 4);
  // ~168M parameters, as published.
  ModelWeights w;
  size_t params = 0;
  for (const TensorSlot& s : TensorSlots(r01, &w)) {
    size_t n = 1;
    for (int64_t d : s.shape) n *= static_cast<size_t>(d);
    params += n;
  }
  EXPECT_GT(params, 160'000'000u);
  EXPECT_LT(params, 175'000'000u);
}

TEST(HybridFamilyConfig, ParsesTransformersMamba2Json) {
  // As transformers writes it: Python's json module spells float("inf") as a bare Infinity.
  const char* json = R"({
    "architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2",
    "hidden_size": 768, "num_hidden_layers": 24, "state_size": 128, "expand": 2,
    "head_dim": 64, "num_heads": 24, "n_groups": 1, "conv_kernel": 4, "vocab_size": 50288,
    "layer_norm_epsilon": 1e-05, "use_bias": false, "use_conv_bias": true,
    "hidden_act": "silu", "rms_norm": true, "residual_in_fp32": true, "chunk_size": 256,
    "time_step_limit": [0.0, Infinity], "tie_word_embeddings": true, "note": "Infinity"})";
  auto c = ConfigFromJson(json, "mamba2-130m");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->family, ModelFamily::kMamba2);
  EXPECT_EQ(c->Canonical(), BuiltinConfig("mamba2-130m")->Canonical());
  // Defaults fill what is absent (num_heads from expand · hidden / head_dim).
  auto d = ConfigFromJson(R"({"model_type": "mamba2", "hidden_size": 64, "num_hidden_layers": 2,
                              "state_size": 16, "head_dim": 16, "n_groups": 2, "vocab_size": 99})",
                          "d");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->mamba2.num_heads, 8);
  EXPECT_FALSE(d->tie_word_embeddings);  // Mamba2Config's default
  for (const char* bad :
       {R"({"model_type": "mamba2", "hidden_size": 64, "head_dim": 16, "num_heads": 3})",
        R"({"model_type": "mamba2", "hidden_size": 64, "head_dim": 16, "n_groups": 3})",
        R"({"model_type": "mamba2", "hidden_size": 64, "head_dim": 16, "hidden_act": "gelu"})",
        R"({"model_type": "mamba2", "hidden_size": 64, "head_dim": 16, "time_step_limit": [1]})",
        R"({"model_type": "mamba2", "hidden_size": 64, "head_dim": 16, "rms_norm": false})",
        R"({"model_type": "mamba2", "hidden_size": "wide"})"}) {
    EXPECT_FALSE(ConfigFromJson(bad, "bad").ok()) << bad;
  }
}

TEST(HybridFamilyConfig, ParsesFlaRwkv7Json) {
  const char* json = R"({
    "architectures": ["RWKV7ForCausalLM"], "model_type": "rwkv7", "attn": null,
    "attn_mode": "chunk", "hidden_size": 768, "num_hidden_layers": 12, "head_dim": 64,
    "num_heads": null, "decay_low_rank_dim": 64, "a_low_rank_dim": 64, "v_low_rank_dim": 32,
    "gate_low_rank_dim": 128, "hidden_ratio": 4.0, "intermediate_size": 3072,
    "hidden_act": "sqrelu", "norm_first": true, "norm_bias": true, "norm_eps": 1e-05,
    "value_dim": [768, 768, 768, 768, 768, 768, 768, 768, 768, 768, 768, 768],
    "vocab_size": 50304, "tie_word_embeddings": false, "fuse_norm": true})";
  auto c = ConfigFromJson(json, "rwkv7-0.1b");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->family, ModelFamily::kRwkv7);
  EXPECT_EQ(c->Canonical(), BuiltinConfig("rwkv7-0.1b")->Canonical());
  // A null LoRA rank takes fla's formula: 2.5·√768 / 32 rounds to 2 → 64.
  auto d = ConfigFromJson(R"({"model_type": "rwkv7", "hidden_size": 768, "num_hidden_layers": 1,
                              "decay_low_rank_dim": null, "gate_low_rank_dim": null})",
                          "d");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->rwkv7.decay_low_rank_dim, 64);
  EXPECT_EQ(d->rwkv7.gate_low_rank_dim, 128);
  EXPECT_EQ(d->intermediate_size, 3072);  // 4 × hidden, rounded up to 32
  for (const char* bad : {R"({"model_type": "rwkv7", "hidden_size": 100, "head_dim": 64})",
                          R"({"model_type": "rwkv7", "attn": {"layers": [1], "num_heads": 4}})",
                          R"({"model_type": "rwkv7", "norm_bias": false})",
                          R"({"model_type": "rwkv7", "hidden_act": "gelu"})",
                          R"({"model_type": "rwkv7", "hidden_size": 64, "value_dim": 128})"}) {
    EXPECT_FALSE(ConfigFromJson(bad, "bad").ok()) << bad;
  }
}

// Python's json module writes non-finite floats as bare literals; the reader rewrites them only
// outside strings, and leaves strict JSON untouched.
TEST(HybridFamilyConfig, NonFiniteLiteralsAreRewrittenOutsideStrings) {
  EXPECT_EQ(ReplaceNonFiniteJsonLiterals(R"({"a": [0.0, Infinity, -Infinity, NaN]})"),
            R"({"a": [0.0, 1e308, -1e308, null]})");
  EXPECT_EQ(ReplaceNonFiniteJsonLiterals(R"({"s": "Infinity \" NaN", "t": Infinity})"),
            R"({"s": "Infinity \" NaN", "t": 1e308})");
  const std::string strict = R"({"k": "v", "n": [1, 2.5e3, -4], "o": {"x": null}})";
  EXPECT_EQ(ReplaceNonFiniteJsonLiterals(strict), strict);
  // Arbitrary bytes: no crash, and a truncated literal stays as it was.
  EXPECT_EQ(ReplaceNonFiniteJsonLiterals("Infinit"), "Infinit");
  std::string noise;
  for (int i = 0; i < 4096; ++i) noise += static_cast<char>((i * 7919) % 256);
  (void)ReplaceNonFiniteJsonLiterals(noise);
  EXPECT_FALSE(ConfigFromJson(noise, "noise").ok());
}

// ---- Weights --------------------------------------------------------------------------------

TEST(HybridFamilyWeights, UpstreamNamesAndDeterministicSynthesis) {
  for (const char* name : {"mamba2-tiny", "rwkv7-tiny"}) {
    const ModelConfig c = *BuiltinConfig(name);
    ModelWeights slots_of;
    std::set<std::string> names;
    for (const TensorSlot& s : TensorSlots(c, &slots_of)) names.insert(s.name);
    if (c.family == ModelFamily::kMamba2) {
      for (const char* n :
           {"embeddings.weight", "layers.0.norm.weight", "layers.2.mixer.in_proj.weight",
            "layers.1.mixer.conv1d.bias", "layers.0.mixer.A_log", "layers.0.mixer.dt_bias",
            "layers.0.mixer.D", "layers.0.mixer.norm.weight", "layers.0.mixer.out_proj.weight",
            "norm_f.weight", "lm_head.weight"}) {
        EXPECT_TRUE(names.contains(n)) << n;
      }
    } else {
      for (const char* n :
           {"embeddings.weight", "layers.0.pre_norm.bias", "layers.0.attn.x_g",
            "layers.1.attn.v_lora.lora.2.bias", "layers.0.attn.w_lora.lora.0.weight",
            "layers.0.attn.g_lora.lora.2.weight", "layers.0.attn.r_k", "layers.0.attn.g_norm.bias",
            "layers.2.ffn.key.weight", "layers.2.ffn.x_k", "norm.bias", "lm_head.weight"}) {
        EXPECT_TRUE(names.contains(n)) << n;
      }
      EXPECT_FALSE(names.contains("layers.0.attn.v_lora.lora.0.weight"));  // layer 0 has none
      EXPECT_FALSE(names.contains("layers.1.pre_norm.weight"));
      EXPECT_FALSE(names.contains("layers.0.attn.g_lora.lora.2.bias"));
    }
    auto one = SyntheticWeights(c, 3, 1);
    auto three = SyntheticWeights(c, 3, 3);
    ASSERT_TRUE(one.ok() && three.ok());
    EXPECT_EQ(one->bytes(), three->bytes());
    EXPECT_GT(one->bytes(), 0u);
    ModelWeights* ws[2] = {&*one, &*three};
    std::vector<TensorSlot> a = TensorSlots(c, ws[0]);
    std::vector<TensorSlot> b = TensorSlots(c, ws[1]);
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].dest->size(), b[i].dest->size()) << a[i].name;
      EXPECT_EQ(std::memcmp(a[i].dest->data(), b[i].dest->data(), a[i].dest->bytes()), 0)
          << a[i].name;
    }
  }
}

// ---- The forward pass -----------------------------------------------------------------------

struct Model {
  explicit Model(const std::string& name, uint64_t seed = 0) : config(*BuiltinConfig(name)) {
    weights = std::make_shared<ModelWeights>(*SyntheticWeights(config, seed, 2));
  }
  std::unique_ptr<Backend> Make(int threads = 2, int64_t chunk = 512) {
    return std::move(
        *MakeCpuBackend(config, weights, {.threads = threads, .prefill_chunk = chunk}));
  }
  ModelConfig config;
  std::shared_ptr<ModelWeights> weights;
};

double MaxRelError(std::span<const float> a, std::span<const float> b) {
  double worst = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return worst / scale;
}

// ---- Independent double-precision references, token by token ------------------------------

using Vec = std::vector<double>;

// The weights by their upstream names, as doubles.
struct NamedWeights {
  NamedWeights(const ModelConfig& c, ModelWeights& w) {
    for (const TensorSlot& s : TensorSlots(c, &w)) {
      tensors[s.name] = Vec(s.dest->span().begin(), s.dest->span().end());
    }
  }
  const Vec& operator()(const std::string& name) const { return tensors.at(name); }
  std::map<std::string, Vec> tensors;
};

// y = W x, W row-major [rows, x.size()].
Vec MatVec(const Vec& w, const Vec& x) {
  Vec y(w.size() / x.size(), 0.0);
  for (size_t r = 0; r < y.size(); ++r) {
    for (size_t i = 0; i < x.size(); ++i) y[r] += w[r * x.size() + i] * x[i];
  }
  return y;
}
double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
Vec Rms(const Vec& x, const Vec& w, double eps) {
  double sq = 0;
  for (double v : x) sq += v * v;
  const double inv = 1 / std::sqrt(sq / x.size() + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = w[i] * x[i] * inv;
  return y;
}
// LayerNorm of x[begin, begin + n) with w, b at the same offsets.
void Ln(Vec& x, size_t begin, size_t n, const Vec& w, const Vec& b, double eps) {
  double mean = 0, var = 0;
  for (size_t i = begin; i < begin + n; ++i) mean += x[i];
  mean /= n;
  for (size_t i = begin; i < begin + n; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= n;
  for (size_t i = begin; i < begin + n; ++i) {
    x[i] = (x[i] - mean) / std::sqrt(var + eps) * w[i] + b[i];
  }
}

// The RMSNorm of each of `groups` equal slices of y on its own.
Vec GroupRms(const Vec& y, const Vec& w, size_t groups, double eps) {
  const size_t size = y.size() / groups;
  Vec out(y.size());
  for (size_t g = 0; g < groups; ++g) {
    const Vec part(y.begin() + g * size, y.begin() + (g + 1) * size);
    const Vec wg(w.begin() + g * size, w.begin() + (g + 1) * size);
    const Vec normed = Rms(part, wg, eps);
    std::copy(normed.begin(), normed.end(), out.begin() + g * size);
  }
  return out;
}

// Mamba-2 as transformers' Mamba2 torch path computes it, one token at a time, except the gated
// norm: that is mamba_ssm's (and llama.cpp's), over each group of inter / n_groups channels;
// transformers' norm over all of inter is an upstream bug (PR #40861). mamba2-tiny has 2 groups.
Vec Mamba2Reference(const ModelConfig& c, const NamedWeights& W, std::span<const int32_t> tokens) {
  const Mamba2Shape& s = c.mamba2;
  const size_t hidden = c.hidden_size, inter = s.intermediate(), conv_dim = s.conv_dim();
  const size_t heads = s.num_heads, p = s.head_dim, n = s.state_size, groups = s.n_groups;
  const size_t k = s.conv_kernel;
  const double eps = c.rms_norm_eps;
  std::vector<std::vector<Vec>> hist(c.num_layers(), std::vector<Vec>(k - 1, Vec(conv_dim, 0)));
  std::vector<Vec> ssm(c.num_layers(), Vec(heads * p * n, 0));
  Vec x;
  for (int32_t tok : tokens) {
    const Vec& e = W("embeddings.weight");
    x.assign(e.begin() + tok * hidden, e.begin() + (tok + 1) * hidden);
    for (int64_t l = 0; l < c.num_layers(); ++l) {
      const std::string m = "layers." + std::to_string(l) + ".mixer.";
      const Vec h = Rms(x, W("layers." + std::to_string(l) + ".norm.weight"), eps);
      const Vec proj = MatVec(W(m + "in_proj.weight"), h);
      Vec conv(conv_dim);
      for (size_t ch = 0; ch < conv_dim; ++ch) {
        double acc = W(m + "conv1d.bias")[ch];
        for (size_t j = 0; j < k; ++j) {
          const double in = j + 1 < k ? hist[l][j][ch] : proj[inter + ch];
          acc += W(m + "conv1d.weight")[ch * k + j] * in;
        }
        conv[ch] = acc * Sigmoid(acc);
      }
      for (size_t j = 0; j + 1 < k; ++j) {
        for (size_t ch = 0; ch < conv_dim; ++ch) {
          hist[l][j][ch] = j + 2 < k ? hist[l][j + 1][ch] : proj[inter + ch];
        }
      }
      Vec y(inter);
      for (size_t hd = 0; hd < heads; ++hd) {
        const double raw = proj[inter + conv_dim + hd] + W(m + "dt_bias")[hd];
        const double dt = raw > 20 ? raw : std::log1p(std::exp(raw));
        const double decay = std::exp(dt * -std::exp(W(m + "A_log")[hd]));
        const size_t g = hd / (heads / groups);
        for (size_t i = 0; i < p; ++i) {
          const double xi = conv[hd * p + i];
          double acc = W(m + "D")[hd] * xi;
          for (size_t j = 0; j < n; ++j) {
            double& st = ssm[l][(hd * p + i) * n + j];
            st = st * decay + dt * conv[inter + g * n + j] * xi;
            acc += st * conv[inter + groups * n + g * n + j];
          }
          y[hd * p + i] = acc * proj[hd * p + i] * Sigmoid(proj[hd * p + i]);
        }
      }
      const Vec out =
          MatVec(W(m + "out_proj.weight"), GroupRms(y, W(m + "norm.weight"), groups, eps));
      for (size_t i = 0; i < hidden; ++i) x[i] += out[i];
    }
  }
  const Vec head = c.tie_word_embeddings ? W("embeddings.weight") : W("lm_head.weight");
  return MatVec(head, Rms(x, W("norm_f.weight"), eps));
}

// RWKV-7 as BlinkDL's reference / fla's RWKV7 model computes it, one token at a time.
Vec Rwkv7Reference(const ModelConfig& c, const NamedWeights& W, std::span<const int32_t> tokens) {
  const size_t hidden = c.hidden_size, n = c.rwkv7.head_dim, heads = hidden / n;
  const double eps = c.rms_norm_eps;
  std::vector<Vec> att_shift(c.num_layers(), Vec(hidden, 0)), ffn_shift = att_shift;
  std::vector<Vec> wkv(c.num_layers(), Vec(heads * n * n, 0));
  Vec x;
  auto lora = [&](const std::string& name, const Vec& in, auto act, bool bias) {
    Vec low = MatVec(W(name + ".lora.0.weight"), in);
    for (double& v : low) v = act(v);
    Vec out = MatVec(W(name + ".lora.2.weight"), low);
    if (bias) {
      for (size_t i = 0; i < out.size(); ++i) out[i] += W(name + ".lora.2.bias")[i];
    }
    return out;
  };
  auto identity = [](double v) { return v; };
  for (int32_t tok : tokens) {
    const Vec& e = W("embeddings.weight");
    x.assign(e.begin() + tok * hidden, e.begin() + (tok + 1) * hidden);
    Vec v_first;
    for (int64_t l = 0; l < c.num_layers(); ++l) {
      const std::string p = "layers." + std::to_string(l) + ".", a = p + "attn.";
      if (l == 0) Ln(x, 0, hidden, W(p + "pre_norm.weight"), W(p + "pre_norm.bias"), eps);
      Vec h = x;
      Ln(h, 0, hidden, W(p + "attn_norm.weight"), W(p + "attn_norm.bias"), eps);
      auto mix = [&](const std::string& mu, const Vec& prev, const Vec& cur) {
        Vec out(hidden);
        for (size_t i = 0; i < hidden; ++i) out[i] = cur[i] + (prev[i] - cur[i]) * W(mu)[i];
        return out;
      };
      const Vec xr = mix(a + "x_r", att_shift[l], h), xw = mix(a + "x_w", att_shift[l], h),
                xk = mix(a + "x_k", att_shift[l], h), xv = mix(a + "x_v", att_shift[l], h),
                xa = mix(a + "x_a", att_shift[l], h), xg = mix(a + "x_g", att_shift[l], h);
      att_shift[l] = h;
      const Vec r = MatVec(W(a + "r_proj.weight"), xr);
      Vec k = MatVec(W(a + "k_proj.weight"), xk);
      Vec v = MatVec(W(a + "v_proj.weight"), xv);
      Vec w = lora(
          a + "w_lora", xw, [](double z) { return std::tanh(z); }, true);
      for (double& d : w) d = std::exp(-std::exp(-0.5) * Sigmoid(d));
      if (l == 0) {
        v_first = v;
      } else {
        const Vec gate = lora(a + "v_lora", xv, identity, true);
        for (size_t i = 0; i < hidden; ++i) v[i] += (v_first[i] - v[i]) * Sigmoid(gate[i]);
      }
      Vec aa = lora(a + "a_lora", xa, identity, true);
      for (double& d : aa) d = Sigmoid(d);
      const Vec g = lora(
          a + "g_lora", xg, [](double z) { return Sigmoid(z); }, false);
      Vec kk(hidden);
      for (size_t i = 0; i < hidden; ++i) kk[i] = k[i] * W(a + "k_k")[i];
      for (size_t hd = 0; hd < heads; ++hd) {
        double norm = 0;
        for (size_t i = 0; i < n; ++i) norm += kk[hd * n + i] * kk[hd * n + i];
        for (size_t i = 0; i < n; ++i) kk[hd * n + i] /= std::max(std::sqrt(norm), 1e-12);
      }
      for (size_t i = 0; i < hidden; ++i) k[i] *= 1 + (aa[i] - 1) * W(a + "k_a")[i];
      Vec o(hidden);
      for (size_t hd = 0; hd < heads; ++hd) {
        double* S = wkv[l].data() + hd * n * n;
        const size_t b = hd * n;
        for (size_t i = 0; i < n; ++i) {
          double sa = 0;
          for (size_t j = 0; j < n; ++j) sa -= S[i * n + j] * kk[b + j];
          for (size_t j = 0; j < n; ++j) {
            S[i * n + j] =
                S[i * n + j] * w[b + j] + sa * kk[b + j] * aa[b + j] + v[b + i] * k[b + j];
            o[b + i] += S[i * n + j] * r[b + j];
          }
        }
        Ln(o, b, n, W(a + "g_norm.weight"), W(a + "g_norm.bias"), eps * n);
        double bonus = 0;
        for (size_t j = 0; j < n; ++j) bonus += r[b + j] * k[b + j] * W(a + "r_k")[b + j];
        for (size_t i = 0; i < n; ++i) o[b + i] = (o[b + i] + bonus * v[b + i]) * g[b + i];
      }
      const Vec att = MatVec(W(a + "o_proj.weight"), o);
      for (size_t i = 0; i < hidden; ++i) x[i] += att[i];
      Vec f = x;
      Ln(f, 0, hidden, W(p + "ffn_norm.weight"), W(p + "ffn_norm.bias"), eps);
      const Vec fk = mix(p + "ffn.x_k", ffn_shift[l], f);
      ffn_shift[l] = f;
      Vec key = MatVec(W(p + "ffn.key.weight"), fk);
      for (double& d : key) d = d > 0 ? d * d : 0;
      const Vec ffn = MatVec(W(p + "ffn.value.weight"), key);
      for (size_t i = 0; i < hidden; ++i) x[i] += ffn[i];
    }
  }
  Ln(x, 0, hidden, W("norm.weight"), W("norm.bias"), eps);
  return MatVec(c.tie_word_embeddings ? W("embeddings.weight") : W("lm_head.weight"), x);
}

class HybridFamilyModel : public ::testing::TestWithParam<std::string> {};

// Prefill in one call, in chunks of 7, and one token at a time: the same function up to rounding
// (GEMM shapes differ), in the logits and in every state array.
TEST_P(HybridFamilyModel, TokenByTokenMatchesChunkedPrefill) {
  Model model(GetParam());
  const auto prompt = PseudoRandomTokens(100, model.config.vocab_size, 3);
  const size_t vocab = static_cast<size_t>(model.config.vocab_size);
  std::vector<float> whole(vocab), chunked(vocab), stepped(vocab);
  auto a = model.Make(2, 512);
  auto b = model.Make(2, 7);
  auto c = model.Make(2, 512);
  ASSERT_TRUE(a->Forward(prompt, whole).ok());
  ASSERT_TRUE(b->Forward(prompt, chunked).ok());
  for (size_t t = 0; t < prompt.size(); ++t) {
    ASSERT_TRUE(c->Forward({&prompt[t], 1},
                           t + 1 == prompt.size() ? std::span<float>(stepped) : std::span<float>())
                    .ok());
  }
  EXPECT_LT(MaxRelError(chunked, whole), 1e-4);
  EXPECT_LT(MaxRelError(stepped, whole), 1e-4);
  EXPECT_EQ(c->host_state().n_tokens(), 100);
  for (size_t l = 0; l < a->host_state().layers().size(); ++l) {
    const LayerState& x = a->host_state().layers()[l];
    const LayerState& y = c->host_state().layers()[l];
    for (auto [p, q] : {std::pair{&x.conv, &y.conv}, std::pair{&x.recurrent, &y.recurrent},
                        std::pair{&x.ffn_shift, &y.ffn_shift}}) {
      ASSERT_EQ(p->size(), q->size());
      EXPECT_LT(MaxRelError(q->span(), p->span()), 1e-4) << "layer " << l;
    }
  }
  // The logits are not degenerate.
  EXPECT_GT(*std::max_element(whole.begin(), whole.end()),
            *std::min_element(whole.begin(), whole.end()) + 1e-3f);
}

// The CPU backend against the independent double-precision reference of the same math.
TEST_P(HybridFamilyModel, CpuForwardMatchesTheReference) {
  Model model(GetParam(), 4);
  const NamedWeights named(model.config, *model.weights);
  const auto prompt = PseudoRandomTokens(24, model.config.vocab_size, 12);
  const Vec reference = model.config.family == ModelFamily::kMamba2
                            ? Mamba2Reference(model.config, named, prompt)
                            : Rwkv7Reference(model.config, named, prompt);
  std::vector<float> logits(model.config.vocab_size);
  ASSERT_TRUE(model.Make(2, 5)->Forward(prompt, logits).ok());
  std::vector<float> ref_f(reference.begin(), reference.end());
  EXPECT_LT(MaxRelError(logits, ref_f), 1e-4);
  EXPECT_EQ(Argmax(logits), Argmax(ref_f));
}

TEST_P(HybridFamilyModel, ThreadCountsGiveTheSameBits) {
  Model model(GetParam());
  const auto prompt = PseudoRandomTokens(150, model.config.vocab_size, 4);
  std::vector<float> a(model.config.vocab_size), b(model.config.vocab_size);
  auto one = model.Make(1, 64);
  auto three = model.Make(3, 64);
  ASSERT_TRUE(one->Forward(prompt, a).ok());
  ASSERT_TRUE(three->Forward(prompt, b).ok());
  EXPECT_EQ(a, b) << "thread count changed the logits";
  EXPECT_EQ(DigestState(one->host_state()), DigestState(three->host_state()));
  one->Reset();
  ASSERT_TRUE(one->Forward(prompt, b).ok());
  EXPECT_EQ(a, b) << "a second run changed the logits";
}

TEST_P(HybridFamilyModel, HydratedStateContinuesBitExactly) {
  Model model(GetParam());
  const auto prefix = PseudoRandomTokens(120, model.config.vocab_size, 5);
  const auto suffix = PseudoRandomTokens(9, model.config.vocab_size, 6);
  auto cold = model.Make();
  auto warm = model.Make();
  ASSERT_TRUE(cold->Forward(prefix, {}).ok());
  warm->host_state() = cold->host_state();
  std::vector<float> lc(model.config.vocab_size), lw(model.config.vocab_size);
  ASSERT_TRUE(cold->Forward(suffix, lc).ok());
  ASSERT_TRUE(warm->Forward(suffix, lw).ok());
  EXPECT_EQ(lc, lw);
  auto tc = GreedyContinue(*cold, Argmax(lc), 12);
  auto tw = GreedyContinue(*warm, Argmax(lw), 12);
  ASSERT_TRUE(tc.ok() && tw.ok());
  EXPECT_EQ(*tc, *tw);
  EXPECT_EQ(DigestState(cold->host_state()), DigestState(warm->host_state()));
  // The state is all there is: a zeroed state forgets the prefix.
  warm->Reset();
  ASSERT_TRUE(warm->Forward(suffix, lw).ok());
  EXPECT_NE(lc, lw);
}

TEST_P(HybridFamilyModel, ActivationsStayFiniteOverLongPrompts) {
  Model model(GetParam());
  auto backend = model.Make(2, 512);
  const auto prompt = PseudoRandomTokens(3000, model.config.vocab_size, 8);
  std::vector<float> logits(model.config.vocab_size);
  ASSERT_TRUE(backend->Forward(prompt, logits).ok());
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  for (const LayerState& l : backend->host_state().layers()) {
    for (const FloatBuffer* b : {&l.conv, &l.recurrent, &l.ffn_shift}) {
      for (float v : b->span()) ASSERT_TRUE(std::isfinite(v));
    }
  }
  auto tokens = GreedyContinue(*backend, Argmax(logits), 16);
  ASSERT_TRUE(tokens.ok());
  EXPECT_GT(std::set<int32_t>(tokens->begin(), tokens->end()).size(), 1u);
}

TEST_P(HybridFamilyModel, RejectsBadTokens) {
  Model model(GetParam());
  auto backend = model.Make();
  const int32_t bad = static_cast<int32_t>(model.config.vocab_size);
  EXPECT_FALSE(backend->Forward({&bad, 1}, {}).ok());
  EXPECT_FALSE(backend->Forward({}, {}).ok());
  std::vector<float> short_logits(3);
  const int32_t ok = 1;
  EXPECT_FALSE(backend->Forward({&ok, 1}, short_logits).ok());
}

// A checkpoint written with the upstream names (and prefixes: "backbone." for Mamba-2, "model."
// for RWKV-7) loads into exactly the synthetic weights it was written from.
TEST_P(HybridFamilyModel, LoadsACheckpointWithTheUpstreamNames) {
  Model model(GetParam(), 9);
  const std::string prefix = model.config.family == ModelFamily::kMamba2 ? "backbone." : "model.";
  ModelWeights& w = *model.weights;
  Json header = Json::object();
  std::string data;
  for (const TensorSlot& s : TensorSlots(model.config, &w)) {
    const std::string name = s.name == "lm_head.weight" ? s.name : prefix + s.name;
    header[name] = {{"dtype", "F32"},
                    {"shape", s.shape},
                    {"data_offsets", {data.size(), data.size() + s.dest->bytes()}}};
    data.append(reinterpret_cast<const char*>(s.dest->data()), s.dest->bytes());
  }
  const std::string text = header.dump();
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>(uint64_t{text.size()} >> (8 * i));
  file += text + data;
  const auto path = std::filesystem::temp_directory_path() /
                    ("family-ckpt-" + std::to_string(::getpid()) + ".safetensors");
  std::ofstream(path, std::ios::binary) << file;
  auto loaded = LoadWeights(model.config, path.string(), 2);
  std::filesystem::remove(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_TRUE(loaded->identity.starts_with("safetensors:"));
  auto from_file = std::move(*MakeCpuBackend(
      model.config, std::make_shared<ModelWeights>(std::move(*loaded)), {.threads = 2}));
  auto synthetic = model.Make();
  const auto prompt = PseudoRandomTokens(40, model.config.vocab_size, 10);
  std::vector<float> a(model.config.vocab_size), b(model.config.vocab_size);
  ASSERT_TRUE(from_file->Forward(prompt, a).ok());
  ASSERT_TRUE(synthetic->Forward(prompt, b).ok());
  EXPECT_EQ(a, b);
}

INSTANTIATE_TEST_SUITE_P(Families, HybridFamilyModel,
                         ::testing::Values("mamba2-tiny", "rwkv7-tiny"), test::ModelParamName());

}  // namespace
}  // namespace prefixd::hybrid
