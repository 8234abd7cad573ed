// The pure recurrent families beside Qwen3.5 (Mamba-2 and RWKV-7): their built-in shapes, their
// Hugging Face style config.json, validation and canonical form. Plain functions: any thread.
//
// Mamba-2 follows transformers' Mamba2Config (model_type "mamba2"); RWKV-7 follows
// flash-linear-attention's RWKV7Config (model_type "rwkv7"), whose checkpoints (fla-hub/rwkv7-*)
// are the Hugging Face form of BlinkDL's RWKV-7 "Goose".
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config.h"
#include "prefixd/status.h"

namespace prefixd::hybrid {

// "mamba2-tiny", "mamba2-130m", "mamba2-370m", "rwkv7-tiny", "rwkv7-0.1b".
std::vector<std::string> FamilyBuiltinNames();
// NotFound when `name` is none of them.
Result<ModelConfig> FamilyBuiltinConfig(std::string_view name);

// A config.json of a Mamba-2 or RWKV-7 model (by model_type or architectures), parsed; nullopt
// when the JSON is some other model's.
std::optional<Result<ModelConfig>> FamilyConfigFromJson(const nlohmann::json& root,
                                                        const std::string& name);

// `text` with the non-standard literals Python's json module writes (Infinity, -Infinity, NaN)
// replaced, outside strings, by ±1e308 and null, so a strict JSON parser reads it.
std::string ReplaceNonFiniteJsonLiterals(std::string_view text);

// ModelConfig::Validate / Canonical / Summary for family != kQwen35.
Status ValidateFamily(const ModelConfig& config);
std::string FamilyCanonical(const ModelConfig& config);
std::string FamilySummary(const ModelConfig& config);

// RWKV-7 heads: hidden_size / head_dim.
inline int64_t Rwkv7Heads(const ModelConfig& c) { return c.hidden_size / c.rwkv7.head_dim; }

// config.json field readers shared with config.cc: an absent or null field keeps `*out`, a
// present field of the wrong type is an error.
namespace config_json {
Status ReadInt(const nlohmann::json& j, const char* key, int64_t* out);
Status ReadDouble(const nlohmann::json& j, const char* key, double* out);
Status ReadBool(const nlohmann::json& j, const char* key, bool* out);
}  // namespace config_json

}  // namespace prefixd::hybrid
