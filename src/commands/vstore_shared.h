// Helpers shared by the V.* and KV.PREFIX.* handlers: the limits from the settings table,
// argument parsing, and the checks whose failures both families word the same way. Pure
// functions over a handler's Context; called on the handler's io thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/ascii.h"
#include "common/numbers.h"
#include "engine/command.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "store/vector_codec.h"

namespace prefixd::commands::vstore {

struct Limits {
  uint64_t max_sessions;
  uint64_t max_layers;
  uint64_t max_tokens;
  uint64_t max_dim;
};

inline Limits LimitsOf(const Engine& e) {
  const Settings& s = e.settings();
  return {static_cast<uint64_t>(s.Int(Setting::kVstoreMaxSessions)),
          static_cast<uint64_t>(s.Int(Setting::kVstoreMaxLayers)),
          static_cast<uint64_t>(s.Int(Setting::kVstoreMaxTokens)),
          static_cast<uint64_t>(s.Int(Setting::kVstoreMaxDim))};
}

// A non-negative integer in Redis's strict form.
inline std::optional<uint64_t> ParseCount(std::string_view text) {
  auto v = ParseInt64(text);
  if (!v || *v < 0) return std::nullopt;
  return static_cast<uint64_t>(*v);
}

// Checks a session id (or namespace) against max-sid-len minus `suffix` bytes; on failure
// queues the error and returns false.
inline bool ValidSid(Context& ctx, std::string_view sid, std::string_view what = "sid",
                     size_t suffix = 0) {
  const auto limit = static_cast<size_t>(ctx.engine.settings().Int(Setting::kMaxSidLen));
  const size_t most = limit > suffix ? limit - suffix : 0;
  if (sid.empty() || sid.size() > most) {
    ctx.reply.Error(errors::InvalidSid(what, most, limit, sid.size()));
    return false;
  }
  return true;
}

inline std::string SessionLimitError(std::string_view command, uint64_t limit) {
  return errors::SessionLimit(command, limit);
}

// The reply for an unknown tier name, e.g. UnknownTierError("V.CREATE", "VQUANT format", x);
// Pion's rotation codecs get a pointed one.
inline std::string UnknownTierError(std::string_view command, std::string_view what,
                                    std::string_view name) {
  const std::string shown(name.substr(0, 64));
  const std::string lower = AsciiLower(shown);
  const bool pion_codec = lower.starts_with("turbo") || lower == "bf16_rope_fp8_body";
  return errors::UnknownTier(command, what, shown, pion_codec, store::kTierNames);
}

}  // namespace prefixd::commands::vstore
