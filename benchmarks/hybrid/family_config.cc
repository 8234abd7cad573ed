#include "family_config.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace prefixd::hybrid {
namespace {

using Json = nlohmann::json;
using config_json::ReadBool;
using config_json::ReadDouble;
using config_json::ReadInt;

ModelConfig Mamba2Base(std::string name) {
  ModelConfig c;
  c.name = std::move(name);
  c.family = ModelFamily::kMamba2;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = true;
  return c;
}

ModelConfig Rwkv7Base(std::string name) {
  ModelConfig c;
  c.name = std::move(name);
  c.family = ModelFamily::kRwkv7;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = false;
  return c;
}

void SetLayers(ModelConfig& c, int64_t n) {
  c.layers.assign(static_cast<size_t>(std::max<int64_t>(n, 0)),
                  c.family == ModelFamily::kMamba2 ? LayerKind::kMamba2 : LayerKind::kRwkv7);
}

// The ids mamba_ssm pads its GPT-NeoX vocabulary (50277) to: a multiple of 16.
constexpr int64_t kMambaVocab = 50288;

Result<ModelConfig> Mamba2FromJson(const Json& j, const std::string& name) {
  ModelConfig c = Mamba2Base(name);
  Mamba2Shape& m = c.mamba2;
  // transformers' Mamba2Config defaults.
  c.vocab_size = 32768;
  c.hidden_size = 4096;
  c.tie_word_embeddings = false;
  m.n_groups = 8;
  int64_t layers = 64;
  double expand = 2;
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "vocab_size", &c.vocab_size));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "hidden_size", &c.hidden_size));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "num_hidden_layers", &layers));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "state_size", &m.state_size));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "n_groups", &m.n_groups));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "head_dim", &m.head_dim));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "conv_kernel", &m.conv_kernel));
  PREFIXD_RETURN_IF_ERROR(ReadDouble(j, "expand", &expand));
  PREFIXD_RETURN_IF_ERROR(ReadDouble(j, "layer_norm_epsilon", &c.rms_norm_eps));
  PREFIXD_RETURN_IF_ERROR(ReadBool(j, "use_bias", &m.use_bias));
  PREFIXD_RETURN_IF_ERROR(ReadBool(j, "use_conv_bias", &m.use_conv_bias));
  PREFIXD_RETURN_IF_ERROR(ReadBool(j, "tie_word_embeddings", &c.tie_word_embeddings));
  const int64_t intermediate = static_cast<int64_t>(expand * static_cast<double>(c.hidden_size));
  m.num_heads = m.head_dim > 0 ? intermediate / m.head_dim : 0;
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "num_heads", &m.num_heads));
  if (m.num_heads * m.head_dim != intermediate) {
    return Status::InvalidArgument("config.json: num_heads * head_dim != expand * hidden_size");
  }
  if (auto it = j.find("time_step_limit"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || it->size() != 2 || !(*it)[0].is_number() || !(*it)[1].is_number()) {
      return Status::InvalidArgument("config.json: time_step_limit is not [min, max]");
    }
    m.time_step_min = (*it)[0].get<double>();
    m.time_step_max = std::min((*it)[1].get<double>(), 1e300);
  }
  if (auto it = j.find("hidden_act"); it != j.end() && it->is_string()) {
    const std::string act = it->get<std::string>();
    if (act != "silu" && act != "swish") {
      return Status::InvalidArgument("config.json: Mamba-2 hidden_act '" + act + "' (only silu)");
    }
  }
  bool rms_norm = true;
  PREFIXD_RETURN_IF_ERROR(ReadBool(j, "rms_norm", &rms_norm));
  if (!rms_norm) return Status::InvalidArgument("config.json: Mamba-2 without rms_norm");
  c.intermediate_size = intermediate;
  SetLayers(c, layers);
  PREFIXD_RETURN_IF_ERROR(c.Validate());
  return c;
}

// flash-linear-attention's rule for a LoRA rank left null: scale·√hidden (times head_dim / 64),
// rounded to a multiple of 32, at least 32.
int64_t DefaultRank(double scale, int64_t hidden, double factor) {
  const double v = scale * std::sqrt(static_cast<double>(hidden)) * factor / 32.0;
  return std::max<int64_t>(32, static_cast<int64_t>(std::nearbyint(v)) * 32);
}

Result<ModelConfig> Rwkv7FromJson(const Json& j, const std::string& name) {
  ModelConfig c = Rwkv7Base(name);
  Rwkv7Shape& r = c.rwkv7;
  // RWKV7Config defaults.
  c.vocab_size = 32000;
  c.hidden_size = 2048;
  r.v_low_rank_dim = 16;
  int64_t layers = 24;
  double hidden_ratio = 4;
  int64_t num_heads = 0;
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "vocab_size", &c.vocab_size));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "hidden_size", &c.hidden_size));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "num_hidden_layers", &layers));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "head_dim", &r.head_dim));
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "num_heads", &num_heads));
  if (auto it = j.find("head_dim"); it != j.end() && it->is_null() && num_heads > 0) {
    r.head_dim = c.hidden_size / num_heads;
  }
  const double factor = static_cast<double>(r.head_dim) / 64.0;
  const struct {
    const char* key;
    int64_t* out;
    double scale;
    double factor;
  } ranks[] = {{"decay_low_rank_dim", &r.decay_low_rank_dim, 2.5, factor},
               {"a_low_rank_dim", &r.a_low_rank_dim, 2.5, factor},
               {"v_low_rank_dim", &r.v_low_rank_dim, 1.7, factor},
               {"gate_low_rank_dim", &r.gate_low_rank_dim, 5.0, 1.0}};
  for (const auto& rank : ranks) {
    PREFIXD_RETURN_IF_ERROR(ReadInt(j, rank.key, rank.out));
    if (auto it = j.find(rank.key); it != j.end() && it->is_null()) {
      *rank.out = DefaultRank(rank.scale, c.hidden_size, rank.factor);
    }
  }
  PREFIXD_RETURN_IF_ERROR(ReadDouble(j, "hidden_ratio", &hidden_ratio));
  const auto ffn = static_cast<int64_t>(static_cast<double>(c.hidden_size) * hidden_ratio);
  c.intermediate_size = 32 * ((ffn + 31) / 32);
  PREFIXD_RETURN_IF_ERROR(ReadInt(j, "intermediate_size", &c.intermediate_size));
  PREFIXD_RETURN_IF_ERROR(ReadDouble(j, "norm_eps", &c.rms_norm_eps));
  PREFIXD_RETURN_IF_ERROR(ReadBool(j, "tie_word_embeddings", &c.tie_word_embeddings));
  for (const char* must_be_true : {"norm_first", "norm_bias"}) {
    bool v = true;
    PREFIXD_RETURN_IF_ERROR(ReadBool(j, must_be_true, &v));
    if (!v) {
      return Status::InvalidArgument(std::string("config.json: RWKV-7 with ") + must_be_true +
                                     " false is not supported");
    }
  }
  if (auto it = j.find("attn"); it != j.end() && !it->is_null()) {
    return Status::InvalidArgument("config.json: RWKV-7 with hybrid attention layers (\"attn\")");
  }
  if (auto it = j.find("value_dim"); it != j.end() && !it->is_null()) {
    const bool same =
        it->is_number_integer()
            ? it->get<int64_t>() == c.hidden_size
            : it->is_array() && std::all_of(it->begin(), it->end(), [&](const Json& v) {
                return v.is_number_integer() && v.get<int64_t>() == c.hidden_size;
              });
    if (!same) return Status::InvalidArgument("config.json: RWKV-7 value_dim != hidden_size");
  }
  if (auto it = j.find("hidden_act");
      it != j.end() && it->is_string() && it->get<std::string>() != "sqrelu") {
    return Status::InvalidArgument("config.json: RWKV-7 hidden_act must be sqrelu");
  }
  SetLayers(c, layers);
  PREFIXD_RETURN_IF_ERROR(c.Validate());
  return c;
}

bool Mentions(const Json& root, std::string_view model_type, std::string_view architecture) {
  if (auto it = root.find("model_type"); it != root.end() && it->is_string()) {
    const std::string t = it->get<std::string>();
    if (t == model_type || t == std::string(model_type) + "_fla") return true;
  }
  if (auto it = root.find("architectures"); it != root.end() && it->is_array()) {
    for (const Json& a : *it) {
      if (a.is_string() && a.get<std::string>().starts_with(architecture)) return true;
    }
  }
  return false;
}

}  // namespace

std::string ReplaceNonFiniteJsonLiterals(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      out += ch;
      if (ch == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (ch == '"') {
        in_string = false;
      }
      continue;
    }
    if (ch == '"') {
      in_string = true;
      out += ch;
    } else if (text.substr(i).starts_with("Infinity")) {
      out += "1e308";
      i += 7;
    } else if (text.substr(i).starts_with("NaN")) {
      out += "null";
      i += 2;
    } else {
      out += ch;  // "-Infinity" keeps its sign
    }
  }
  return out;
}

std::vector<std::string> FamilyBuiltinNames() {
  return {"mamba2-tiny", "mamba2-130m", "mamba2-370m", "rwkv7-tiny", "rwkv7-0.1b"};
}

Result<ModelConfig> FamilyBuiltinConfig(std::string_view name) {
  const Status not_found =
      Status::NotFound("no built-in model config named '" + std::string(name) + "'");
  ModelConfig c;
  if (name.starts_with("mamba2-")) {
    c = Mamba2Base(std::string(name));
    Mamba2Shape& m = c.mamba2;
    if (name == "mamba2-tiny") {
      // Every structural feature at toy sizes: two groups of heads sharing B and C, conv bias,
      // an untied output head.
      c.vocab_size = 512;
      c.hidden_size = 64;
      m.num_heads = 8;
      m.head_dim = 16;
      m.state_size = 16;
      m.n_groups = 2;
      c.tie_word_embeddings = false;
      SetLayers(c, 3);
    } else if (name == "mamba2-130m") {  // state-spaces/mamba2-130m
      c.vocab_size = kMambaVocab;
      c.hidden_size = 768;
      m.num_heads = 24;
      SetLayers(c, 24);
    } else if (name == "mamba2-370m") {  // state-spaces/mamba2-370m
      c.vocab_size = kMambaVocab;
      c.hidden_size = 1024;
      m.num_heads = 32;
      SetLayers(c, 48);
    } else {
      return not_found;
    }
    c.intermediate_size = m.intermediate();
  } else if (name.starts_with("rwkv7-")) {
    c = Rwkv7Base(std::string(name));
    Rwkv7Shape& r = c.rwkv7;
    if (name == "rwkv7-tiny") {
      c.vocab_size = 512;
      c.hidden_size = 64;
      c.intermediate_size = 256;
      r.head_dim = 16;
      r.decay_low_rank_dim = 16;
      r.a_low_rank_dim = 16;
      r.v_low_rank_dim = 8;
      r.gate_low_rank_dim = 16;
      SetLayers(c, 3);
    } else if (name == "rwkv7-0.1b") {  // fla-hub/rwkv7-168M-pile (BlinkDL's RWKV-7 0.1B)
      c.vocab_size = 50304;
      c.hidden_size = 768;
      c.intermediate_size = 3072;
      SetLayers(c, 12);
    } else {
      return not_found;
    }
  } else {
    return not_found;
  }
  PREFIXD_RETURN_IF_ERROR(c.Validate());
  return c;
}

std::optional<Result<ModelConfig>> FamilyConfigFromJson(const Json& root, const std::string& name) {
  if (Mentions(root, "mamba2", "Mamba2")) return Mamba2FromJson(root, name);
  if (Mentions(root, "rwkv7", "RWKV7")) return Rwkv7FromJson(root, name);
  return std::nullopt;
}

Status ValidateFamily(const ModelConfig& c) {
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument("model config " + c.name + ": " + what);
  };
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0) {
    return bad("vocab_size, hidden_size and intermediate_size must be positive");
  }
  if (c.vocab_size > (int64_t{1} << 31)) return bad("vocab_size does not fit a 32-bit token id");
  if (c.layers.empty()) return bad("no layers");
  if (!(c.rms_norm_eps > 0)) return bad("the norm epsilon must be > 0");
  const LayerKind kind = c.family == ModelFamily::kMamba2 ? LayerKind::kMamba2 : LayerKind::kRwkv7;
  for (LayerKind k : c.layers) {
    if (k != kind) return bad("every layer of this family must be of its one kind");
  }
  if (c.family == ModelFamily::kMamba2) {
    const Mamba2Shape& m = c.mamba2;
    if (m.num_heads <= 0 || m.head_dim <= 0 || m.state_size <= 0 || m.n_groups <= 0 ||
        m.conv_kernel < 1) {
      return bad("Mamba-2 heads, head_dim, state_size, n_groups and conv_kernel must be positive");
    }
    if (m.num_heads % m.n_groups != 0) return bad("num_heads must be a multiple of n_groups");
    if (c.intermediate_size != m.intermediate()) {
      return bad("intermediate_size must be num_heads * head_dim");
    }
    if (!(m.time_step_min >= 0) || !(m.time_step_max >= m.time_step_min)) {
      return bad("time_step_limit must be 0 <= min <= max");
    }
  } else if (c.family == ModelFamily::kRwkv7) {
    const Rwkv7Shape& r = c.rwkv7;
    if (r.head_dim <= 0 || r.head_dim > 256 || c.hidden_size % r.head_dim != 0) {
      return bad("RWKV-7 head_dim must divide hidden_size and be at most 256");
    }
    if (r.decay_low_rank_dim <= 0 || r.a_low_rank_dim <= 0 || r.v_low_rank_dim <= 0 ||
        r.gate_low_rank_dim <= 0) {
      return bad("RWKV-7 low-rank dims must be positive");
    }
  } else {
    return bad("not a recurrent family");
  }
  return Status::Ok();
}

std::string FamilyCanonical(const ModelConfig& c) {
  std::ostringstream out;
  out.precision(17);
  out << (c.family == ModelFamily::kMamba2 ? "mamba2/v1" : "rwkv7/v1") << " vocab=" << c.vocab_size
      << " hidden=" << c.hidden_size << " ffn=" << c.intermediate_size << " eps=" << c.rms_norm_eps
      << " tied=" << c.tie_word_embeddings << " layers=" << c.num_layers();
  if (c.family == ModelFamily::kMamba2) {
    const Mamba2Shape& m = c.mamba2;
    out << " heads=" << m.num_heads << " head_dim=" << m.head_dim << " state=" << m.state_size
        << " groups=" << m.n_groups << " conv=" << m.conv_kernel << " conv_bias=" << m.use_conv_bias
        << " bias=" << m.use_bias << " dt_limit=" << m.time_step_min << "," << m.time_step_max;
  } else {
    const Rwkv7Shape& r = c.rwkv7;
    out << " head_dim=" << r.head_dim << " lora_w=" << r.decay_low_rank_dim
        << " lora_a=" << r.a_low_rank_dim << " lora_v=" << r.v_low_rank_dim
        << " lora_g=" << r.gate_low_rank_dim;
  }
  return out.str();
}

std::string FamilySummary(const ModelConfig& c) {
  std::ostringstream out;
  out << c.name << ": ";
  if (c.family == ModelFamily::kMamba2) {
    const Mamba2Shape& m = c.mamba2;
    out << c.num_layers() << " Mamba-2 layers, hidden " << c.hidden_size << ", " << m.num_heads
        << " heads x " << m.head_dim << ", state " << m.state_size << ", " << m.n_groups
        << " group(s), conv " << m.conv_kernel;
  } else {
    out << c.num_layers() << " RWKV-7 layers, hidden " << c.hidden_size << ", " << Rwkv7Heads(c)
        << " heads x " << c.rwkv7.head_dim << ", FFN " << c.intermediate_size << ", LoRA w/a/v/g "
        << c.rwkv7.decay_low_rank_dim << "/" << c.rwkv7.a_low_rank_dim << "/"
        << c.rwkv7.v_low_rank_dim << "/" << c.rwkv7.gate_low_rank_dim;
  }
  out << ", vocab " << c.vocab_size << (c.tie_word_embeddings ? ", tied embeddings" : "");
  return out.str();
}

}  // namespace prefixd::hybrid
