#include "config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <utility>

#include "family_config.h"

namespace prefixd::hybrid {
namespace {

using Json = nlohmann::json;

// Qwen3.5's rule: every `interval`-th layer (1-based) is full attention.
std::vector<LayerKind> InterleavedLayers(int64_t n, int64_t interval) {
  std::vector<LayerKind> kinds;
  for (int64_t i = 0; i < n; ++i) {
    kinds.push_back((i + 1) % interval == 0 ? LayerKind::kFullAttention : LayerKind::kLinear);
  }
  return kinds;
}

ModelConfig Qwen35Defaults() {
  ModelConfig c;
  c.vocab_size = 248320;
  c.head_dim = 256;
  c.partial_rotary_factor = 0.25;
  c.rope_theta = 1e7;
  c.linear_num_key_heads = 16;
  c.linear_key_head_dim = 128;
  c.linear_value_head_dim = 128;
  c.linear_conv_kernel_dim = 4;
  return c;
}

}  // namespace

namespace config_json {

// Reads an integer field, keeping `*out` when absent; a present non-integer is an error.
Status ReadInt(const Json& j, const char* key, int64_t* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer()) {
    return Status::InvalidArgument(std::string("config.json: \"") + key + "\" is not an integer");
  }
  *out = it->get<int64_t>();
  return Status::Ok();
}

Status ReadDouble(const Json& j, const char* key, double* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number()) {
    return Status::InvalidArgument(std::string("config.json: \"") + key + "\" is not a number");
  }
  *out = it->get<double>();
  return Status::Ok();
}

Status ReadBool(const Json& j, const char* key, bool* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) {
    return Status::InvalidArgument(std::string("config.json: \"") + key + "\" is not a boolean");
  }
  *out = it->get<bool>();
  return Status::Ok();
}

}  // namespace config_json

using config_json::ReadBool;
using config_json::ReadDouble;
using config_json::ReadInt;

int64_t ModelConfig::num_linear_layers() const {
  int64_t n = 0;
  for (LayerKind k : layers) n += k == LayerKind::kLinear;
  return n;
}

int64_t ModelConfig::num_attention_layers() const {
  int64_t n = 0;
  for (LayerKind k : layers) n += k == LayerKind::kFullAttention;
  return n;
}

Status ModelConfig::Validate() const {
  if (family != ModelFamily::kQwen35) return ValidateFamily(*this);
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument("model config " + name + ": " + what);
  };
  if (vocab_size <= 0 || hidden_size <= 0 || intermediate_size <= 0) {
    return bad("vocab_size, hidden_size and intermediate_size must be positive");
  }
  if (vocab_size > (int64_t{1} << 31)) return bad("vocab_size does not fit a 32-bit token id");
  if (layers.empty()) return bad("no layers");
  if (!(rms_norm_eps > 0) || !(rope_theta > 0)) return bad("rms_norm_eps and rope_theta > 0");
  if (num_attention_layers() > 0) {
    if (num_attention_heads <= 0 || num_key_value_heads <= 0 || head_dim <= 0) {
      return bad("attention heads and head_dim must be positive");
    }
    if (num_attention_heads % num_key_value_heads != 0) {
      return bad("num_attention_heads must be a multiple of num_key_value_heads");
    }
    if (rope_dim() < 0 || rope_dim() > head_dim || rope_dim() % 2 != 0) {
      return bad("partial_rotary_factor * head_dim must be an even number of dims <= head_dim");
    }
  }
  if (num_linear_layers() > 0) {
    if (linear_num_key_heads <= 0 || linear_num_value_heads <= 0 || linear_key_head_dim <= 0 ||
        linear_value_head_dim <= 0 || linear_conv_kernel_dim < 1) {
      return bad("linear heads, head dims and conv kernel must be positive");
    }
    if (linear_num_value_heads % linear_num_key_heads != 0) {
      return bad("linear_num_value_heads must be a multiple of linear_num_key_heads");
    }
  }
  return Status::Ok();
}

std::string ModelConfig::Canonical() const {
  if (family != ModelFamily::kQwen35) return FamilyCanonical(*this);
  std::ostringstream out;
  out.precision(17);
  out << "qwen35-hybrid/v1 vocab=" << vocab_size << " hidden=" << hidden_size
      << " ffn=" << intermediate_size << " eps=" << rms_norm_eps << " tied=" << tie_word_embeddings
      << " heads=" << num_attention_heads << " kv_heads=" << num_key_value_heads
      << " head_dim=" << head_dim << " rope_factor=" << partial_rotary_factor
      << " rope_theta=" << rope_theta << " out_gate=" << attn_output_gate
      << " lk=" << linear_num_key_heads << " lv=" << linear_num_value_heads
      << " dk=" << linear_key_head_dim << " dv=" << linear_value_head_dim
      << " conv=" << linear_conv_kernel_dim << " layers=";
  for (LayerKind k : layers) out << (k == LayerKind::kLinear ? 'L' : 'A');
  return out.str();
}

std::string ModelConfig::Summary() const {
  if (family != ModelFamily::kQwen35) return FamilySummary(*this);
  std::ostringstream out;
  out << name << ": " << num_layers() << " layers (" << num_linear_layers() << " GDN + "
      << num_attention_layers() << " attention), hidden " << hidden_size << ", FFN "
      << intermediate_size << ", attention " << num_attention_heads << "/" << num_key_value_heads
      << " heads x " << head_dim << " (RoPE " << rope_dim() << "), GDN " << linear_num_key_heads
      << "/" << linear_num_value_heads << " heads x " << linear_key_head_dim << "/"
      << linear_value_head_dim << ", vocab " << vocab_size
      << (tie_word_embeddings ? ", tied embeddings" : "");
  return out.str();
}

std::vector<std::string> BuiltinConfigNames() {
  std::vector<std::string> names = {"tiny", "small", "qwen3.5-0.8b", "qwen3.5-4b"};
  for (std::string& n : FamilyBuiltinNames()) names.push_back(std::move(n));
  return names;
}

Result<ModelConfig> BuiltinConfig(std::string_view name) {
  if (auto family = FamilyBuiltinConfig(name); family.status().code() != StatusCode::kNotFound) {
    return family;
  }
  ModelConfig c = Qwen35Defaults();
  c.name = std::string(name);
  if (name == "tiny") {
    // Every structural feature of the real model (GQA 2:1, GDN value heads sharing key heads
    // 2:1, RoPE on a quarter of head_dim, output gate, 3:1 layout) at toy sizes.
    c.vocab_size = 512;
    c.hidden_size = 64;
    c.intermediate_size = 128;
    c.layers = InterleavedLayers(4, 4);
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 32;
    c.linear_num_key_heads = 2;
    c.linear_num_value_heads = 4;
    c.linear_key_head_dim = 16;
    c.linear_value_head_dim = 16;
  } else if (name == "small") {
    // Small enough that a 32K-token cold prefill takes about a minute on two cores.
    c.vocab_size = 32768;
    c.hidden_size = 512;
    c.intermediate_size = 1536;
    c.layers = InterleavedLayers(8, 4);
    c.num_attention_heads = 4;
    c.num_key_value_heads = 1;
    c.head_dim = 128;
    c.linear_num_key_heads = 4;
    c.linear_num_value_heads = 8;
    c.linear_key_head_dim = 64;
    c.linear_value_head_dim = 64;
  } else if (name == "qwen3.5-0.8b") {
    c.hidden_size = 1024;
    c.intermediate_size = 3584;
    c.layers = InterleavedLayers(24, 4);
    c.num_attention_heads = 8;
    c.num_key_value_heads = 2;
    c.linear_num_value_heads = 16;
  } else if (name == "qwen3.5-4b") {
    c.hidden_size = 2560;
    c.intermediate_size = 9216;
    c.layers = InterleavedLayers(32, 4);
    c.num_attention_heads = 16;
    c.num_key_value_heads = 4;
    c.linear_num_value_heads = 32;
  } else {
    return Status::NotFound("no built-in model config named '" + std::string(name) + "'");
  }
  PREFIXD_RETURN_IF_ERROR(c.Validate());
  return c;
}

namespace {

// Hugging Face transformers' Qwen3_5TextConfig defaults, for fields a config.json leaves out
// (configuration_qwen3_5.py; rope_theta is PreTrainedConfig's default_theta). They differ from
// the built-in shapes on purpose: a checkpoint must mean here what it means upstream.
ModelConfig Qwen35UpstreamDefaults() {
  ModelConfig c;
  c.vocab_size = 248320;
  c.hidden_size = 4096;
  c.intermediate_size = 12288;
  c.rms_norm_eps = 1e-6;
  c.tie_word_embeddings = false;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 4;
  c.head_dim = 256;
  c.partial_rotary_factor = 0.25;
  c.rope_theta = 10000.0;
  c.attn_output_gate = true;
  c.linear_num_key_heads = 16;
  c.linear_num_value_heads = 32;
  c.linear_key_head_dim = 128;
  c.linear_value_head_dim = 128;
  c.linear_conv_kernel_dim = 4;
  return c;
}
constexpr int64_t kUpstreamNumHiddenLayers = 32;
constexpr int64_t kUpstreamFullAttentionInterval = 4;

Status Unsupported(const std::string& field, const std::string& why) {
  return Status::InvalidArgument("config.json: \"" + field + "\" " + why +
                                 ": not implemented by this Qwen3.5 model");
}

// A string field, or "" when absent or null; a present non-string is an error.
Status ReadString(const Json& j, const char* key, std::string* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) {
    return Status::InvalidArgument(std::string("config.json: \"") + key + "\" is not a string");
  }
  *out = it->get<std::string>();
  return Status::Ok();
}

// Qwen3.5 (qwen3_5 around qwen3_5_text) only. Qwen3-Next and the Qwen3.5 MoE models share field
// names but have expert MLPs and, for Qwen3-Next, a different projection layout.
Status CheckModelType(const Json& j) {
  std::string type;
  PREFIXD_RETURN_IF_ERROR(ReadString(j, "model_type", &type));
  if (type.empty() || type == "qwen3_5" || type == "qwen3_5_text") return Status::Ok();
  return Unsupported("model_type", "is '" + type + "' (expected qwen3_5 or qwen3_5_text)");
}

// Fields whose non-default values change the math in ways this model does not compute.
Status RefuseUnimplemented(const Json& j) {
  std::string act;
  PREFIXD_RETURN_IF_ERROR(ReadString(j, "hidden_act", &act));
  // transformers' ACT2FN maps both names to the same SiLU.
  if (!act.empty() && act != "silu" && act != "swish") {
    return Unsupported("hidden_act", "is '" + act + "'");
  }
  bool flag = false;
  PREFIXD_RETURN_IF_ERROR(ReadBool(j, "attention_bias", &flag));
  if (flag) return Unsupported("attention_bias", "is true");
  flag = true;
  // Upstream's attention always has the output gate, whatever this field says.
  PREFIXD_RETURN_IF_ERROR(ReadBool(j, "attn_output_gate", &flag));
  if (!flag) return Unsupported("attn_output_gate", "is false");
  for (const char* moe : {"num_experts", "num_experts_per_tok", "moe_intermediate_size",
                          "shared_expert_intermediate_size"}) {
    int64_t n = 0;
    PREFIXD_RETURN_IF_ERROR(ReadInt(j, moe, &n));
    if (n != 0) return Unsupported(moe, "is " + std::to_string(n) + " (mixture of experts)");
  }
  return Status::Ok();
}

// RoPE settings: rope_theta and partial_rotary_factor at the top level (older files) or inside
// rope_parameters / rope_scaling (newer), which win. Only the default rotation is implemented;
// mrope_section / mrope_interleaved split frequencies among (t, h, w) positions, which are equal
// for text, so for text they compute plain RoPE.
Status ReadRope(const Json& j, ModelConfig* c) {
  PREFIXD_RETURN_IF_ERROR(ReadDouble(j, "rope_theta", &c->rope_theta));
  PREFIXD_RETURN_IF_ERROR(ReadDouble(j, "partial_rotary_factor", &c->partial_rotary_factor));
  const Json* rope = nullptr;
  std::string rope_key;
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_object()) {
      return Status::InvalidArgument(std::string("config.json: \"") + key + "\" is not an object");
    }
    if (rope != nullptr && *rope != *it) {
      return Status::InvalidArgument(
          "config.json: \"rope_scaling\" and \"rope_parameters\" disagree");
    }
    rope = &*it;
    rope_key = key;
  }
  if (rope == nullptr) return Status::Ok();
  for (const char* key : {"rope_type", "type"}) {
    std::string type;
    PREFIXD_RETURN_IF_ERROR(ReadString(*rope, key, &type));
    if (!type.empty() && type != "default") return Unsupported(key, "is '" + type + "'");
  }
  for (auto field = rope->begin(); field != rope->end(); ++field) {
    static constexpr std::string_view kKnown[] = {"rope_type",     "type",
                                                  "rope_theta",    "partial_rotary_factor",
                                                  "mrope_section", "mrope_interleaved"};
    if (std::find(std::begin(kKnown), std::end(kKnown), field.key()) == std::end(kKnown)) {
      return Unsupported(rope_key + "." + field.key(), "is set");
    }
  }
  PREFIXD_RETURN_IF_ERROR(ReadDouble(*rope, "rope_theta", &c->rope_theta));
  return ReadDouble(*rope, "partial_rotary_factor", &c->partial_rotary_factor);
}

// A VLM file may say tie_word_embeddings at the top level, in text_config, or both; upstream
// defaults it to false at both levels. Two different answers are refused rather than guessed.
Status ReadTie(const Json& root, const Json& text, bool* tied) {
  std::optional<bool> outer, inner;
  for (auto [json, slot] : {std::pair{&root, &outer}, std::pair{&text, &inner}}) {
    bool value = false;
    if (auto it = json->find("tie_word_embeddings"); it != json->end() && !it->is_null()) {
      PREFIXD_RETURN_IF_ERROR(ReadBool(*json, "tie_word_embeddings", &value));
      *slot = value;
    }
  }
  if (outer && inner && *outer != *inner) {
    return Status::InvalidArgument(
        "config.json: \"tie_word_embeddings\" is true at one level and false at the other");
  }
  *tied = inner.value_or(outer.value_or(false));
  return Status::Ok();
}

}  // namespace

Result<ModelConfig> ConfigFromJson(std::string_view json_text, std::string name) {
  Json root = Json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    // Python's json module writes float("inf") as a bare Infinity (Mamba-2's time_step_limit).
    const std::string finite = ReplaceNonFiniteJsonLiterals(json_text);
    root = Json::parse(finite, nullptr, /*allow_exceptions=*/false);
  }
  if (root.is_discarded() || !root.is_object()) {
    return Status::InvalidArgument("config.json: not a JSON object");
  }
  if (auto family = FamilyConfigFromJson(root, name); family.has_value()) return *family;
  const Json* text = &root;
  if (auto it = root.find("text_config"); it != root.end() && !it->is_null()) {
    if (!it->is_object()) return Status::InvalidArgument("config.json: text_config not an object");
    text = &*it;
  }
  const Json& j = *text;
  PREFIXD_RETURN_IF_ERROR(CheckModelType(root));
  if (text != &root) PREFIXD_RETURN_IF_ERROR(CheckModelType(j));
  PREFIXD_RETURN_IF_ERROR(RefuseUnimplemented(j));

  ModelConfig c = Qwen35UpstreamDefaults();
  c.name = std::move(name);
  int64_t n_layers = kUpstreamNumHiddenLayers;
  int64_t interval = kUpstreamFullAttentionInterval;
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "vocab_size", &c.vocab_size));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "hidden_size", &c.hidden_size));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "intermediate_size", &c.intermediate_size));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "num_hidden_layers", &n_layers));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "full_attention_interval", &interval));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "num_attention_heads", &c.num_attention_heads));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "num_key_value_heads", &c.num_key_value_heads));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "head_dim", &c.head_dim));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "linear_num_key_heads", &c.linear_num_key_heads));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "linear_num_value_heads", &c.linear_num_value_heads));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "linear_key_head_dim", &c.linear_key_head_dim));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "linear_value_head_dim", &c.linear_value_head_dim));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "linear_conv_kernel_dim", &c.linear_conv_kernel_dim));
  PREFIXD_RETURN_IF_ERROR(ReadDouble(j, "rms_norm_eps", &c.rms_norm_eps));
  PREFIXD_RETURN_IF_ERROR(ReadRope(j, &c));
  PREFIXD_RETURN_IF_ERROR(ReadTie(root, j, &c.tie_word_embeddings));

  if (n_layers <= 0) return Status::InvalidArgument("config.json: num_hidden_layers <= 0");
  if (auto it = j.find("layer_types"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return Status::InvalidArgument("config.json: layer_types not an array");
    for (const Json& t : *it) {
      if (!t.is_string()) return Status::InvalidArgument("config.json: layer_types not strings");
      const std::string s = t.get<std::string>();
      if (s == "linear_attention") {
        c.layers.push_back(LayerKind::kLinear);
      } else if (s == "full_attention") {
        c.layers.push_back(LayerKind::kFullAttention);
      } else {
        return Status::InvalidArgument("config.json: unknown layer type '" + s + "'");
      }
    }
    // Upstream checks the same; a missing num_hidden_layers means its default of 32.
    if (n_layers != c.num_layers()) {
      return Status::InvalidArgument("config.json: num_hidden_layers " + std::to_string(n_layers) +
                                     " but " + std::to_string(c.num_layers()) + " layer_types");
    }
  } else {
    if (interval <= 0) return Status::InvalidArgument("config.json: full_attention_interval <= 0");
    c.layers = InterleavedLayers(n_layers, interval);
  }
  PREFIXD_RETURN_IF_ERROR(c.Validate());
  return c;
}

Result<ModelConfig> LoadConfig(std::string_view name_or_path) {
  auto builtin = BuiltinConfig(name_or_path);
  if (builtin.ok() || builtin.status().code() != StatusCode::kNotFound) return builtin;
  std::filesystem::path path(name_or_path);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) path /= "config.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::string names;
    for (const std::string& n : BuiltinConfigNames()) {
      if (!names.empty()) names += ", ";
      names += n;
    }
    std::string message = "'";
    message.append(name_or_path);
    message += "' is neither a built-in model (" + names + ") nor a readable config.json";
    return Status::NotFound(std::move(message));
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string name = path.parent_path().filename().string();
  if (name.empty()) name = path.string();
  return ConfigFromJson(text.str(), name);
}

}  // namespace prefixd::hybrid
