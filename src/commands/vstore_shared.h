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
#include "store/vector_codec.h"

namespace prefixd::commands::vstore {

inline constexpr std::string_view kSessionNotFound = "ERR session not found";

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
    ctx.reply.Error("ERR invalid " + std::string(what) + ": must be 1 to " + std::to_string(most) +
                    " bytes (max-sid-len " + std::to_string(limit) + "), got " +
                    std::to_string(sid.size()));
    return false;
  }
  return true;
}

inline std::string SessionLimitError(std::string_view command, uint64_t limit) {
  return "ERR " + std::string(command) + ": session limit reached (vstore-max-sessions " +
         std::to_string(limit) +
         "); drop sessions with V.DROP or KV.PREFIX.DROP, or raise the limit with CONFIG SET";
}

// The reply for an unknown tier name, e.g. UnknownTierError("V.CREATE", "VQUANT format", x);
// Pion's rotation codecs get a pointed one.
inline std::string UnknownTierError(std::string_view command, std::string_view what,
                                    std::string_view name) {
  const std::string shown(name.substr(0, 64));
  const std::string lower = AsciiLower(shown);
  const std::string want = " (want " + std::string(store::kTierNames) + ")";
  if (lower.starts_with("turbo") || lower == "bf16_rope_fp8_body") {
    return "ERR " + std::string(command) + ": " + std::string(what) + " '" + shown +
           "' is a Pion codec prefixd does not implement" + want;
  }
  return "ERR " + std::string(command) + ": unknown " + std::string(what) + " '" + shown + "'" +
         want;
}

}  // namespace prefixd::commands::vstore
