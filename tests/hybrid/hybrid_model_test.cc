// The hybrid reference model as a whole: configs (built-in and config.json), synthetic weights,
// the CPU forward pass against an independent token-by-token double-precision reference of the
// Qwen3.5 math, and the determinism the prefix cache relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "config.h"
#include "cpu_backend.h"
#include "model.h"
#include "weights.h"

namespace prefixd::hybrid {
namespace {

// ---- Configs --------------------------------------------------------------------------------

TEST(HybridConfig, BuiltinsHaveTheReferenceShapes) {
  for (const std::string& name : BuiltinConfigNames()) {
    auto c = BuiltinConfig(name);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status().ToString();
    if (c->family != ModelFamily::kQwen35) continue;  // hybrid_families_model_test
    EXPECT_EQ(c->num_layers() % 4, 0) << name;
    for (int64_t i = 0; i < c->num_layers(); ++i) {
      EXPECT_EQ(c->layers[i] == LayerKind::kFullAttention, (i + 1) % 4 == 0) << name << " " << i;
    }
    EXPECT_EQ(c->rope_dim() * 4, c->head_dim) << name;  // partial rotary factor 0.25
  }
  auto small = *BuiltinConfig("qwen3.5-0.8b");
  EXPECT_EQ(small.num_linear_layers(), 18);
  EXPECT_EQ(small.conv_dim(), 6144);
  EXPECT_EQ(small.kv_dim(), 512);
  EXPECT_EQ(small.q_proj_dim(), 4096);
  EXPECT_TRUE(small.tie_word_embeddings);
  auto four = *BuiltinConfig("qwen3.5-4b");
  EXPECT_EQ(four.num_linear_layers(), 24);
  EXPECT_EQ(four.conv_dim(), 8192);
  EXPECT_EQ(four.value_dim(), 4096);
  EXPECT_EQ(four.kv_dim(), 1024);
  EXPECT_EQ(four.vocab_size, 248320);
  EXPECT_FALSE(BuiltinConfig("qwen3.5-1t").ok());
}

TEST(HybridConfig, ParsesNestedVlmConfig) {
  const char* json = R"({
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "tie_word_embeddings": true,
    "vision_config": {"hidden_size": 1152},
    "text_config": {
      "hidden_size": 1024, "intermediate_size": 3584, "num_hidden_layers": 8,
      "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
      "linear_num_key_heads": 16, "linear_num_value_heads": 16,
      "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
      "layer_types": ["linear_attention", "linear_attention", "linear_attention",
                      "full_attention", "linear_attention", "linear_attention",
                      "linear_attention", "full_attention"],
      "rms_norm_eps": 1e-06, "vocab_size": 248320,
      "rope_parameters": {"rope_theta": 10000000, "partial_rotary_factor": 0.25,
                          "mrope_section": [11, 11, 10], "mrope_interleaved": true}
    }})";
  auto c = ConfigFromJson(json, "nested");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->hidden_size, 1024);
  EXPECT_EQ(c->num_layers(), 8);
  EXPECT_EQ(c->num_attention_layers(), 2);
  EXPECT_EQ(c->rope_dim(), 64);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e7);
  EXPECT_TRUE(c->tie_word_embeddings);
  // Same shape as the built-in apart from the name and depth.
  auto builtin = *BuiltinConfig("qwen3.5-0.8b");
  builtin.layers.resize(8);
  EXPECT_EQ(c->Canonical(), builtin.Canonical());
}

TEST(HybridConfig, FlatConfigUsesTheIntervalAndRejectsNonsense) {
  auto c = ConfigFromJson(R"({"hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 6, "full_attention_interval": 3, "num_attention_heads": 4,
      "num_key_value_heads": 2, "head_dim": 32, "linear_num_key_heads": 2,
      "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
      "vocab_size": 100, "tie_word_embeddings": false, "rope_theta": 5000000,
      "partial_rotary_factor": 0.5})",
                          "flat");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->layers[2], LayerKind::kFullAttention);
  EXPECT_EQ(c->layers[5], LayerKind::kFullAttention);
  EXPECT_EQ(c->rope_dim(), 16);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_FALSE(ConfigFromJson("not json", "x").ok());
  EXPECT_FALSE(ConfigFromJson(R"({"hidden_size": "big"})", "x").ok());
  EXPECT_FALSE(ConfigFromJson(R"({"hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 4, "num_attention_heads": 3, "num_key_value_heads": 2,
      "vocab_size": 10})",
                              "x")
                   .ok());  // 3 heads over 2 KV heads
  EXPECT_FALSE(ConfigFromJson(R"({"num_hidden_layers": 1, "layer_types": ["mamba"]})", "x").ok());
}

// Hugging Face transformers' Qwen3_5TextConfig defaults, written out independently of the loader.
struct UpstreamDefault {
  const char* field;
  int64_t ModelConfig::*member;
  int64_t value;
};
constexpr UpstreamDefault kUpstreamIntDefaults[] = {
    {"vocab_size", &ModelConfig::vocab_size, 248320},
    {"hidden_size", &ModelConfig::hidden_size, 4096},
    {"intermediate_size", &ModelConfig::intermediate_size, 12288},
    {"num_attention_heads", &ModelConfig::num_attention_heads, 16},
    {"num_key_value_heads", &ModelConfig::num_key_value_heads, 4},
    {"head_dim", &ModelConfig::head_dim, 256},
    {"linear_num_key_heads", &ModelConfig::linear_num_key_heads, 16},
    {"linear_num_value_heads", &ModelConfig::linear_num_value_heads, 32},
    {"linear_key_head_dim", &ModelConfig::linear_key_head_dim, 128},
    {"linear_value_head_dim", &ModelConfig::linear_value_head_dim, 128},
    {"linear_conv_kernel_dim", &ModelConfig::linear_conv_kernel_dim, 4},
};

// Every field the loader reads, each set to something other than upstream's default.
nlohmann::json NonDefaultTextConfig() {
  return nlohmann::json::parse(R"({
      "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 6,
      "full_attention_interval": 3, "num_attention_heads": 8, "num_key_value_heads": 2,
      "head_dim": 32, "linear_num_key_heads": 2, "linear_num_value_heads": 8,
      "linear_key_head_dim": 16, "linear_value_head_dim": 8, "linear_conv_kernel_dim": 3,
      "rms_norm_eps": 1e-5, "tie_word_embeddings": true, "rope_theta": 5e6,
      "partial_rotary_factor": 0.5})");
}

Result<ModelConfig> FromJson(const nlohmann::json& j) { return ConfigFromJson(j.dump(), "t"); }

TEST(HybridConfig, EmptyConfigIsUpstreamsDefaultModel) {
  for (const char* json : {"{}", R"({"text_config": {}})", R"({"text_config": null})"}) {
    auto c = ConfigFromJson(json, "defaults");
    ASSERT_TRUE(c.ok()) << json << ": " << c.status().ToString();
    for (const UpstreamDefault& d : kUpstreamIntDefaults) {
      EXPECT_EQ((*c).*d.member, d.value) << json << " " << d.field;
    }
    EXPECT_EQ(c->num_layers(), 32) << json;
    EXPECT_EQ(c->num_attention_layers(), 8) << json;  // every 4th
    EXPECT_EQ(c->layers[3], LayerKind::kFullAttention) << json;
    EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6) << json;
    EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0) << json;
    EXPECT_DOUBLE_EQ(c->partial_rotary_factor, 0.25) << json;
    EXPECT_FALSE(c->tie_word_embeddings) << json;
    EXPECT_TRUE(c->attn_output_gate) << json;
  }
}

TEST(HybridConfig, EachMissingFieldTakesUpstreamsDefaultFlatAndNested) {
  for (bool nested : {false, true}) {
    auto wrap = [&](nlohmann::json text) {
      return nested ? nlohmann::json{{"text_config", std::move(text)}} : text;
    };
    auto all = FromJson(wrap(NonDefaultTextConfig()));
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    for (const UpstreamDefault& d : kUpstreamIntDefaults) {
      EXPECT_NE((*all).*d.member, d.value) << d.field << ": the base config must differ";
      // Dropping one head count alone can break divisibility, so keep the pair consistent.
      nlohmann::json text = NonDefaultTextConfig();
      text.erase(d.field);
      if (std::string(d.field) == "linear_num_key_heads") text["linear_num_value_heads"] = 64;
      auto c = FromJson(wrap(text));
      ASSERT_TRUE(c.ok()) << d.field << ": " << c.status().ToString();
      EXPECT_EQ((*c).*d.member, d.value) << "nested=" << nested << " " << d.field;
    }
    nlohmann::json text = NonDefaultTextConfig();
    for (const char* f : {"rms_norm_eps", "rope_theta", "partial_rotary_factor",
                          "tie_word_embeddings", "full_attention_interval"}) {
      text.erase(f);
    }
    text["head_dim"] = 64;  // a quarter of it stays even
    auto c = FromJson(wrap(text));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
    EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
    EXPECT_EQ(c->rope_dim(), 16);
    EXPECT_FALSE(c->tie_word_embeddings);
    EXPECT_EQ(c->num_attention_layers(), 1);  // 6 layers, interval 4
    EXPECT_EQ(c->layers[3], LayerKind::kFullAttention);
    // Without num_hidden_layers upstream builds 32 layers, so 6 layer_types do not match.
    text.erase("num_hidden_layers");
    auto c32 = FromJson(wrap(text));
    ASSERT_TRUE(c32.ok()) << c32.status().ToString();
    EXPECT_EQ(c32->num_layers(), 32);
    text["layer_types"] = nlohmann::json::array();
    for (int i = 0; i < 6; ++i) text["layer_types"].push_back("linear_attention");
    auto mismatch = FromJson(wrap(text));
    ASSERT_FALSE(mismatch.ok());
    EXPECT_NE(mismatch.status().message().find("num_hidden_layers 32"), std::string::npos);
  }
}

TEST(HybridConfig, TieFlagAtEitherLevelAndConflictRefused) {
  auto tie = [](const char* json) { return ConfigFromJson(json, "tie"); };
  EXPECT_FALSE(tie(R"({"text_config": {}})")->tie_word_embeddings);
  EXPECT_TRUE(tie(R"({"tie_word_embeddings": true, "text_config": {}})")->tie_word_embeddings);
  EXPECT_TRUE(tie(R"({"text_config": {"tie_word_embeddings": true}})")->tie_word_embeddings);
  EXPECT_TRUE(tie(R"({"tie_word_embeddings": true,
                      "text_config": {"tie_word_embeddings": true}})")
                  ->tie_word_embeddings);
  auto conflict = tie(R"({"tie_word_embeddings": false,
                          "text_config": {"tie_word_embeddings": true}})");
  ASSERT_FALSE(conflict.ok());
  EXPECT_NE(conflict.status().message().find("\"tie_word_embeddings\""), std::string::npos);
}

TEST(HybridConfig, RopeParametersWinAndMropeIsAcceptedForText) {
  auto c = ConfigFromJson(R"({"rope_theta": 5, "partial_rotary_factor": 0.5,
      "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                          "mrope_section": [11, 11, 10], "mrope_interleaved": true}})",
                          "rope");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e7);
  EXPECT_EQ(c->rope_dim(), 64);
  auto legacy = ConfigFromJson(R"({"rope_scaling": {"type": "default", "rope_theta": 2e6}})", "l");
  ASSERT_TRUE(legacy.ok()) << legacy.status().ToString();
  EXPECT_DOUBLE_EQ(legacy->rope_theta, 2e6);
}

// What the model does not compute is refused, naming the field; the accepted neighbour of each
// refused value (the limit) still loads, flat and inside text_config.
TEST(HybridConfig, UnimplementedSettingsAreRefusedByName) {
  struct Case {
    const char* refused;
    const char* accepted;
    const char* field;
  };
  const Case cases[] = {
      {R"("hidden_act": "gelu")", R"("hidden_act": "silu")", "\"hidden_act\""},
      {R"("attention_bias": true)", R"("attention_bias": false)", "\"attention_bias\""},
      {R"("attn_output_gate": false)", R"("attn_output_gate": true)", "\"attn_output_gate\""},
      {R"("num_experts": 1)", R"("num_experts": 0)", "\"num_experts\""},
      {R"("num_experts_per_tok": 1)", R"("num_experts_per_tok": 0)", "\"num_experts_per_tok\""},
      {R"("moe_intermediate_size": 512)", R"("moe_intermediate_size": 0)",
       "\"moe_intermediate_size\""},
      {R"("shared_expert_intermediate_size": 512)", R"("shared_expert_intermediate_size": 0)",
       "\"shared_expert_intermediate_size\""},
      {R"("rope_parameters": {"rope_type": "yarn", "factor": 4})",
       R"("rope_parameters": {"rope_type": "default"})", "\"rope_type\""},
      {R"("rope_scaling": {"type": "linear", "factor": 2})",
       R"("rope_scaling": {"type": "default"})", "\"type\""},
      {R"("rope_scaling": {"factor": 2})", R"("rope_scaling": null)", "\"rope_scaling.factor\""},
      {R"("rope_parameters": {"factor": 2})", R"("rope_parameters": {})",
       "\"rope_parameters.factor\""},
      {R"("rope_scaling": {"rope_theta": 1}, "rope_parameters": {"rope_theta": 2})",
       R"("rope_scaling": {"rope_theta": 2}, "rope_parameters": {"rope_theta": 2})",
       "\"rope_scaling\""},
      {R"("model_type": "qwen3_next")", R"("model_type": "qwen3_5_text")", "\"model_type\""},
      {R"("model_type": "qwen3_5_moe_text")", R"("model_type": "qwen3_5")", "\"model_type\""},
      {R"("hidden_act": 1)", R"("hidden_act": null)", "\"hidden_act\""},
      {R"("hidden_act": "gelu_pytorch_tanh")", R"("hidden_act": "swish")", "\"hidden_act\""},
  };
  for (const Case& k : cases) {
    for (bool nested : {false, true}) {
      auto doc = [&](const char* field) {
        const std::string body = std::string("{") + field + "}";
        return nested ? R"({"model_type": "qwen3_5", "text_config": )" + body + "}" : body;
      };
      auto refused = ConfigFromJson(doc(k.refused), "x");
      ASSERT_FALSE(refused.ok()) << doc(k.refused);
      EXPECT_NE(refused.status().message().find(k.field), std::string::npos)
          << doc(k.refused) << " -> " << refused.status().ToString();
      auto accepted = ConfigFromJson(doc(k.accepted), "x");
      EXPECT_TRUE(accepted.ok()) << doc(k.accepted) << " -> " << accepted.status().ToString();
    }
  }
  // The outer model_type of a VLM file counts too.
  auto outer = ConfigFromJson(R"({"model_type": "qwen3_5_moe", "text_config": {}})", "x");
  ASSERT_FALSE(outer.ok());
  EXPECT_NE(outer.status().message().find("\"model_type\""), std::string::npos);
}

// ---- Weights --------------------------------------------------------------------------------

TEST(HybridWeights, SyntheticIsDeterministicAcrossThreadCounts) {
  const ModelConfig c = *BuiltinConfig("tiny");
  auto a = SyntheticWeights(c, 7, 1);
  auto b = SyntheticWeights(c, 7, 4);
  auto other = SyntheticWeights(c, 8, 2);
  ASSERT_TRUE(a.ok() && b.ok() && other.ok());
  ModelWeights wa = std::move(*a), wb = std::move(*b), wo = std::move(*other);
  const auto sa = TensorSlots(c, &wa);
  const auto sb = TensorSlots(c, &wb);
  const auto so = TensorSlots(c, &wo);
  ASSERT_EQ(sa.size(), sb.size());
  bool any_differs = false;
  for (size_t i = 0; i < sa.size(); ++i) {
    ASSERT_EQ(sa[i].dest->size(), sb[i].dest->size()) << sa[i].name;
    EXPECT_EQ(0, std::memcmp(sa[i].dest->data(), sb[i].dest->data(), sa[i].dest->bytes()))
        << sa[i].name;
    any_differs |= std::memcmp(sa[i].dest->data(), so[i].dest->data(), sa[i].dest->bytes()) != 0;
    for (float v : sa[i].dest->span()) ASSERT_TRUE(std::isfinite(v)) << sa[i].name;
  }
  EXPECT_TRUE(any_differs);
  EXPECT_EQ(wa.identity, "synthetic:v1:seed=7");
  EXPECT_TRUE(wa.lm_head.empty());  // tied
  // Decays in range: A = exp(A_log) in [1, 16], dt = softplus(dt_bias) in [1e-3, 1e-1].
  for (const LayerWeights& l : wa.layers) {
    if (l.kind != LayerKind::kLinear) continue;
    for (float v : l.linear.a_log.span()) EXPECT_TRUE(v >= 0.0f && v <= std::log(16.0f) + 1e-5f);
    for (float v : l.linear.dt_bias.span()) {
      const double dt = std::log1p(std::exp(double(v)));
      EXPECT_TRUE(dt >= 0.999e-3 && dt <= 1.001e-1) << dt;
    }
  }
}

// ---- Forward pass against a reference -------------------------------------------------------

// Token-by-token forward in double, straight from qwen35-arch.md §2 and §4.
class ReferenceModel {
 public:
  ReferenceModel(const ModelConfig& c, const ModelWeights& w) : c_(c), w_(w) {
    for (int64_t i = 0; i < c.num_layers(); ++i) {
      Layer l;
      if (c.layers[i] == LayerKind::kLinear) {
        l.conv.assign((c.linear_conv_kernel_dim - 1) * c.conv_dim(), 0.0);
        l.s.assign(c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim, 0.0);
      }
      layers_.push_back(std::move(l));
    }
  }

  std::vector<double> Step(int32_t token) {
    const int64_t hidden = c_.hidden_size;
    std::vector<double> x(w_.embed.data() + token * hidden, w_.embed.data() + (token + 1) * hidden);
    for (int64_t i = 0; i < c_.num_layers(); ++i) {
      const LayerWeights& lw = w_.layers[i];
      std::vector<double> h = NormZc(x, lw.input_norm.data());
      std::vector<double> out = lw.kind == LayerKind::kLinear ? Gdn(lw.linear, layers_[i], h)
                                                              : Attention(lw.attn, layers_[i], h);
      for (int64_t j = 0; j < hidden; ++j) x[j] += out[j];
      h = NormZc(x, lw.post_norm.data());
      std::vector<double> g = MatVec(lw.mlp_gate.data(), c_.intermediate_size, h);
      const std::vector<double> u = MatVec(lw.mlp_up.data(), c_.intermediate_size, h);
      for (size_t j = 0; j < g.size(); ++j) g[j] = Silu(g[j]) * u[j];
      const std::vector<double> down = MatVec(lw.mlp_down.data(), hidden, g);
      for (int64_t j = 0; j < hidden; ++j) x[j] += down[j];
    }
    ++position_;
    return MatVec(w_.output_embedding().data(), c_.vocab_size, NormZc(x, w_.final_norm.data()));
  }

  // Recurrent state of GDN layer i, value-major like the backend: element (h, v, k).
  std::vector<double> ValueMajorState(int64_t i) const {
    const int64_t hv = c_.linear_num_value_heads, dk = c_.linear_key_head_dim,
                  dv = c_.linear_value_head_dim;
    std::vector<double> out(hv * dv * dk);
    for (int64_t h = 0; h < hv; ++h) {
      for (int64_t v = 0; v < dv; ++v) {
        for (int64_t k = 0; k < dk; ++k)
          out[(h * dv + v) * dk + k] = layers_[i].s[(h * dk + k) * dv + v];
      }
    }
    return out;
  }
  const std::vector<double>& Keys(int64_t i) const { return layers_[i].k; }

 private:
  struct Layer {
    std::vector<double> conv;  // [K-1, conv_dim]
    std::vector<double> s;     // [Hv, Dk, Dv] key-major
    std::vector<double> k, v;  // appended rows of kv_dim
  };

  static double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
  static double Silu(double x) { return x * Sigmoid(x); }

  std::vector<double> MatVec(const float* w, int64_t out, const std::vector<double>& x) const {
    std::vector<double> y(out, 0.0);
    const int64_t in = static_cast<int64_t>(x.size());
    for (int64_t r = 0; r < out; ++r) {
      for (int64_t j = 0; j < in; ++j) y[r] += double(w[r * in + j]) * x[j];
    }
    return y;
  }

  std::vector<double> NormZc(const std::vector<double>& x, const float* w, size_t off = 0,
                             size_t n = 0) const {
    if (n == 0) n = x.size();
    double ms = 0;
    for (size_t j = 0; j < n; ++j) ms += x[off + j] * x[off + j];
    const double s = 1.0 / std::sqrt(ms / double(n) + c_.rms_norm_eps);
    std::vector<double> y(n);
    for (size_t j = 0; j < n; ++j) y[j] = x[off + j] * s * (1.0 + w[j]);
    return y;
  }

  std::vector<double> Gdn(const LinearAttentionWeights& w, Layer& l, const std::vector<double>& h) {
    const int64_t conv_dim = c_.conv_dim(), key_dim = c_.key_dim(), kk = c_.linear_conv_kernel_dim;
    const int64_t hk = c_.linear_num_key_heads, hv = c_.linear_num_value_heads;
    const int64_t dk = c_.linear_key_head_dim, dv = c_.linear_value_head_dim;
    const std::vector<double> m = MatVec(w.in_proj_qkv.data(), conv_dim, h);
    const std::vector<double> z = MatVec(w.in_proj_z.data(), c_.value_dim(), h);
    const std::vector<double> b = MatVec(w.in_proj_b.data(), hv, h);
    const std::vector<double> a = MatVec(w.in_proj_a.data(), hv, h);
    std::vector<double> mc(conv_dim);
    for (int64_t ch = 0; ch < conv_dim; ++ch) {
      double acc = 0;
      for (int64_t j = 0; j < kk; ++j) {
        const double in = j < kk - 1 ? l.conv[j * conv_dim + ch] : m[ch];
        acc += w.conv1d[ch * kk + j] * in;
      }
      mc[ch] = Silu(acc);
    }
    for (int64_t j = 0; j + 1 < kk - 1; ++j) {
      for (int64_t ch = 0; ch < conv_dim; ++ch)
        l.conv[j * conv_dim + ch] = l.conv[(j + 1) * conv_dim + ch];
    }
    for (int64_t ch = 0; ch < conv_dim; ++ch) l.conv[(kk - 2) * conv_dim + ch] = m[ch];
    auto l2 = [&](int64_t off, double scale) {
      double ss = 0;
      for (int64_t j = 0; j < dk; ++j) ss += mc[off + j] * mc[off + j];
      std::vector<double> y(dk);
      for (int64_t j = 0; j < dk; ++j) y[j] = mc[off + j] / std::sqrt(ss + 1e-6) * scale;
      return y;
    };
    std::vector<double> y(c_.value_dim());
    for (int64_t head = 0; head < hv; ++head) {
      const int64_t kh = head / (hv / hk);
      const std::vector<double> q = l2(kh * dk, 1.0 / std::sqrt(double(dk)));
      const std::vector<double> k = l2(key_dim + kh * dk, 1.0);
      const double* v = mc.data() + 2 * key_dim + head * dv;
      const double sp = std::log1p(std::exp(a[head] + w.dt_bias[head]));
      const double alpha = std::exp(-std::exp(double(w.a_log[head])) * sp);
      const double beta = Sigmoid(b[head]);
      double* s = l.s.data() + head * dk * dv;  // S[k][v]
      for (int64_t i = 0; i < dk * dv; ++i) s[i] *= alpha;
      std::vector<double> o(dv);
      for (int64_t vi = 0; vi < dv; ++vi) {
        double u = 0;
        for (int64_t ki = 0; ki < dk; ++ki) u += s[ki * dv + vi] * k[ki];
        const double delta = beta * (v[vi] - u);
        for (int64_t ki = 0; ki < dk; ++ki) s[ki * dv + vi] += k[ki] * delta;
        for (int64_t ki = 0; ki < dk; ++ki) o[vi] += s[ki * dv + vi] * q[ki];
      }
      double ms = 0;
      for (double e : o) ms += e * e;
      const double scale = 1.0 / std::sqrt(ms / double(dv) + c_.rms_norm_eps);
      for (int64_t vi = 0; vi < dv; ++vi) {
        y[head * dv + vi] = w.norm[vi] * (o[vi] * scale) * Silu(z[head * dv + vi]);
      }
    }
    return MatVec(w.out_proj.data(), c_.hidden_size, y);
  }

  std::vector<double> Attention(const FullAttentionWeights& w, Layer& l,
                                const std::vector<double>& h) {
    const int64_t heads = c_.num_attention_heads, kvh = c_.num_key_value_heads, d = c_.head_dim;
    const int64_t rope = c_.rope_dim();
    const std::vector<double> qg = MatVec(w.q_proj.data(), c_.q_proj_dim(), h);
    const std::vector<double> kr = MatVec(w.k_proj.data(), c_.kv_dim(), h);
    const std::vector<double> vr = MatVec(w.v_proj.data(), c_.kv_dim(), h);
    auto rotate = [&](std::vector<double>& x) {
      for (int64_t i = 0; i < rope / 2; ++i) {
        const double angle = double(position_) * std::pow(c_.rope_theta, -2.0 * i / rope);
        const double x1 = x[i], x2 = x[i + rope / 2];
        x[i] = x1 * std::cos(angle) - x2 * std::sin(angle);
        x[i + rope / 2] = x2 * std::cos(angle) + x1 * std::sin(angle);
      }
    };
    for (int64_t g = 0; g < kvh; ++g) {
      std::vector<double> k = NormZc(kr, w.k_norm.data(), g * d, d);
      rotate(k);
      l.k.insert(l.k.end(), k.begin(), k.end());
      l.v.insert(l.v.end(), vr.begin() + g * d, vr.begin() + (g + 1) * d);
    }
    const int64_t keys = position_ + 1;
    std::vector<double> o(heads * d);
    for (int64_t hh = 0; hh < heads; ++hh) {
      const int64_t g = hh / (heads / kvh);
      std::vector<double> q = NormZc(qg, w.q_norm.data(), hh * 2 * d, d);
      rotate(q);
      std::vector<double> s(keys);
      double mx = -1e300;
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += q[i] * l.k[(j * kvh + g) * d + i];
        s[j] = dot / std::sqrt(double(d));
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (double& e : s) sum += (e = std::exp(e - mx));
      for (int64_t i = 0; i < d; ++i) {
        double acc = 0;
        for (int64_t j = 0; j < keys; ++j) acc += s[j] * l.v[(j * kvh + g) * d + i];
        o[hh * d + i] = acc / sum * Sigmoid(qg[hh * 2 * d + d + i]);
      }
    }
    return MatVec(w.o_proj.data(), c_.hidden_size, o);
  }

  const ModelConfig& c_;
  const ModelWeights& w_;
  std::vector<Layer> layers_;
  int64_t position_ = 0;
};

struct TinyModel {
  ModelConfig config = *BuiltinConfig("tiny");
  std::shared_ptr<const ModelWeights> weights =
      std::make_shared<ModelWeights>(*SyntheticWeights(config, 3, 2));

  std::unique_ptr<Backend> Make(int threads = 2, int64_t chunk = 512) const {
    return std::move(
        *MakeCpuBackend(config, weights, {.threads = threads, .prefill_chunk = chunk}));
  }
};

double MaxRelError(std::span<const float> got, const std::vector<double>& want) {
  double worst = 0, scale = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  return worst / std::max(scale, 1e-12);
}

TEST(HybridModel, CpuForwardMatchesTheReference) {
  TinyModel tiny;
  ReferenceModel ref(tiny.config, *tiny.weights);
  auto backend = tiny.Make(2, /*chunk=*/16);  // 40 tokens in chunks of 16, 16, 8
  const std::vector<int32_t> prompt = PseudoRandomTokens(40, tiny.config.vocab_size, 9);
  std::vector<double> want;
  for (int32_t t : prompt) want = ref.Step(t);
  std::vector<float> logits(tiny.config.vocab_size);
  ASSERT_TRUE(backend->Forward(prompt, logits).ok());
  EXPECT_LT(MaxRelError(logits, want), 2e-4);
  // Decode steps continue from the same state.
  for (int step = 0; step < 3; ++step) {
    const int32_t next = Argmax(logits);
    want = ref.Step(next);
    ASSERT_TRUE(backend->Forward({&next, 1}, logits).ok());
    EXPECT_LT(MaxRelError(logits, want), 2e-4) << "decode step " << step;
  }
  // The exposed state has the documented layouts.
  const SequenceState& s = backend->host_state();
  EXPECT_EQ(s.n_tokens(), 43);
  EXPECT_LT(MaxRelError(s.layers()[0].recurrent.span(), ref.ValueMajorState(0)), 1e-4);
  EXPECT_LT(MaxRelError(s.layers()[3].k.span(), ref.Keys(3)), 1e-4);
  EXPECT_EQ(s.layers()[3].k.size(), size_t(43 * tiny.config.kv_dim()));
}

// ---- Determinism ----------------------------------------------------------------------------

TEST(HybridModel, SameInputsGiveTheSameBits) {
  TinyModel tiny;
  const std::vector<int32_t> prompt = PseudoRandomTokens(300, tiny.config.vocab_size, 4);
  std::vector<float> a(tiny.config.vocab_size), b(tiny.config.vocab_size);
  auto one = tiny.Make(1, 64);
  auto three = tiny.Make(3, 64);
  ASSERT_TRUE(one->Forward(prompt, a).ok());
  ASSERT_TRUE(three->Forward(prompt, b).ok());
  EXPECT_EQ(a, b) << "thread count changed the logits";
  EXPECT_EQ(DigestState(one->host_state()), DigestState(three->host_state()));
  one->Reset();
  ASSERT_TRUE(one->Forward(prompt, b).ok());
  EXPECT_EQ(a, b) << "a second run changed the logits";
}

// The warm path in one process: copy the prefix state into a fresh backend (what hydration
// does) and continue both; every bit and token must agree.
TEST(HybridModel, HydratedStateContinuesBitExactly) {
  TinyModel tiny;
  const std::vector<int32_t> prefix = PseudoRandomTokens(200, tiny.config.vocab_size, 5);
  const std::vector<int32_t> suffix = PseudoRandomTokens(9, tiny.config.vocab_size, 6);
  auto cold = tiny.Make();
  auto warm = tiny.Make();
  ASSERT_TRUE(cold->Forward(prefix, {}).ok());
  warm->host_state() = cold->host_state();
  EXPECT_EQ(DigestState(warm->host_state()), DigestState(cold->host_state()));
  std::vector<float> lc(tiny.config.vocab_size), lw(tiny.config.vocab_size);
  ASSERT_TRUE(cold->Forward(suffix, lc).ok());
  ASSERT_TRUE(warm->Forward(suffix, lw).ok());
  EXPECT_EQ(lc, lw);
  auto tc = GreedyContinue(*cold, Argmax(lc), 12);
  auto tw = GreedyContinue(*warm, Argmax(lw), 12);
  ASSERT_TRUE(tc.ok() && tw.ok());
  EXPECT_EQ(*tc, *tw);
  EXPECT_EQ(DigestState(cold->host_state()), DigestState(warm->host_state()));
}

// Chunking changes GEMM shapes, so prefill(a + b) and prefill(a) + prefill(b) agree to rounding
// only. This is what the code guarantees; bit-exactness needs the same calls (see model.h).
TEST(HybridModel, ChunkingChangesOnlyRounding) {
  TinyModel tiny;
  const std::vector<int32_t> prompt = PseudoRandomTokens(130, tiny.config.vocab_size, 7);
  std::vector<float> whole(tiny.config.vocab_size), split(tiny.config.vocab_size);
  auto a = tiny.Make(2, 512);
  auto b = tiny.Make(2, 512);
  ASSERT_TRUE(a->Forward(prompt, whole).ok());
  ASSERT_TRUE(b->Forward(std::span(prompt).first(50), {}).ok());
  ASSERT_TRUE(b->Forward(std::span(prompt).subspan(50), split).ok());
  std::vector<double> reference(whole.begin(), whole.end());
  EXPECT_LT(MaxRelError(split, reference), 1e-4);
}

TEST(HybridModel, ActivationsStayFiniteOverLongPrompts) {
  TinyModel tiny;
  auto backend = tiny.Make(2, 512);
  const std::vector<int32_t> prompt = PseudoRandomTokens(3000, tiny.config.vocab_size, 8);
  std::vector<float> logits(tiny.config.vocab_size);
  ASSERT_TRUE(backend->Forward(prompt, logits).ok());
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  for (const LayerState& l : backend->host_state().layers()) {
    for (const FloatBuffer* b : {&l.conv, &l.recurrent, &l.k, &l.v}) {
      for (float v : b->span()) ASSERT_TRUE(std::isfinite(v));
    }
  }
  // Greedy decoding is not stuck on one token.
  auto tokens = GreedyContinue(*backend, Argmax(logits), 16);
  ASSERT_TRUE(tokens.ok());
  EXPECT_GT(std::set<int32_t>(tokens->begin(), tokens->end()).size(), 1u);
}

TEST(HybridModel, RejectsBadTokens) {
  TinyModel tiny;
  auto backend = tiny.Make();
  const int32_t bad = static_cast<int32_t>(tiny.config.vocab_size);
  EXPECT_FALSE(backend->Forward({&bad, 1}, {}).ok());
  EXPECT_FALSE(backend->Forward({}, {}).ok());
}

}  // namespace
}  // namespace prefixd::hybrid
