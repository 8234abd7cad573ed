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

TEST(FamilyConfig, BuiltinsHaveThePublishedShapes) {
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

TEST(FamilyConfig, ParsesTransformersMamba2Json) {
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

TEST(FamilyConfig, ParsesFlaRwkv7Json) {
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

// ---- Weights --------------------------------------------------------------------------------

TEST(FamilyWeights, UpstreamNamesAndDeterministicSynthesis) {
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

class FamilyModel : public ::testing::TestWithParam<std::string> {};

// Prefill in one call, in chunks of 7, and one token at a time: the same function up to rounding
// (GEMM shapes differ), in the logits and in every state array.
TEST_P(FamilyModel, TokenByTokenMatchesChunkedPrefill) {
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

TEST_P(FamilyModel, ThreadCountsGiveTheSameBits) {
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

TEST_P(FamilyModel, HydratedStateContinuesBitExactly) {
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

TEST_P(FamilyModel, ActivationsStayFiniteOverLongPrompts) {
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

TEST_P(FamilyModel, RejectsBadTokens) {
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
TEST_P(FamilyModel, LoadsACheckpointWithTheUpstreamNames) {
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

INSTANTIATE_TEST_SUITE_P(Families, FamilyModel, ::testing::Values("mamba2-tiny", "rwkv7-tiny"),
                         test::ModelParamName());

}  // namespace
}  // namespace prefixd::hybrid
