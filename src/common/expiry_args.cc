#include "common/expiry_args.h"

#include <limits>

#include "common/ascii.h"
#include "common/numbers.h"

namespace prefixd::expiry {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// Redis reads options as C strings: whatever follows a NUL byte is not seen.
std::string_view AsCString(std::string_view arg) { return arg.substr(0, arg.find('\0')); }

}  // namespace

std::string InvalidExpireTime(std::string_view command) {
  return "ERR invalid expire time in '" + std::string(command) + "' command";
}

Parsed<ExpireRequest> ParseExpireArgs(std::span<const std::string_view> args, TimeUnit unit,
                                      bool relative, int64_t now_ms, std::string_view command) {
  Parsed<ExpireRequest> out;
  // Options first: Redis reports a bad option before a bad time.
  ExpireConditions& c = out.value.conditions;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string_view opt = AsCString(args[i]);
    if (EqualsIgnoreCase(opt, "nx")) {
      c.nx = true;
    } else if (EqualsIgnoreCase(opt, "xx")) {
      c.xx = true;
    } else if (EqualsIgnoreCase(opt, "gt")) {
      c.gt = true;
    } else if (EqualsIgnoreCase(opt, "lt")) {
      c.lt = true;
    } else {
      out.error = "ERR Unsupported option " + std::string(opt);
      return out;
    }
  }
  if (c.nx && (c.xx || c.gt || c.lt)) {
    out.error = "ERR NX and XX, GT or LT options at the same time are not compatible";
    return out;
  }
  if (c.gt && c.lt) {
    out.error = "ERR GT and LT options at the same time are not compatible";
    return out;
  }
  const auto when = args.empty() ? std::nullopt : ParseInt64(args[0]);
  if (!when) {
    out.error = kNotInteger;
    return out;
  }
  int64_t at = *when;
  if (unit == TimeUnit::kSeconds) {
    if (at > kMax / 1000 || at < kMin / 1000) {
      out.error = InvalidExpireTime(command);
      return out;
    }
    at *= 1000;
  }
  const int64_t base = relative ? now_ms : 0;
  if (at > kMax - base) {
    out.error = InvalidExpireTime(command);
    return out;
  }
  out.value.at_ms = at + base;
  return out;
}

ExpireOutcome DecideExpire(const ExpireRequest& request, std::optional<int64_t> current_ms,
                           int64_t now_ms) {
  const ExpireConditions& c = request.conditions;
  if (c.nx && current_ms) return ExpireOutcome::kUnchanged;
  if (c.xx && !current_ms) return ExpireOutcome::kUnchanged;
  if (c.gt && (!current_ms || request.at_ms <= *current_ms)) return ExpireOutcome::kUnchanged;
  if (c.lt && current_ms && request.at_ms >= *current_ms) return ExpireOutcome::kUnchanged;
  return request.at_ms <= now_ms ? ExpireOutcome::kDelete : ExpireOutcome::kSet;
}

Parsed<StringOptions> ParseStringOptions(std::span<const std::string_view> args,
                                         StringCommand command) {
  Parsed<StringOptions> out;
  StringOptions& o = out.value;
  const bool set = command == StringCommand::kSet;
  auto has_expiry_other_than = [&](ExpiryKind kind) {
    return o.expiry != ExpiryKind::kNone && o.expiry != kind;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view opt = AsCString(args[i]);
    const bool has_next = i + 1 < args.size();
    auto take_expiry = [&](ExpiryKind kind) {
      if (o.keepttl || o.persist || has_expiry_other_than(kind) || !has_next) return false;
      o.expiry = kind;
      o.expiry_arg = args[++i];
      return true;
    };
    if (set && EqualsIgnoreCase(opt, "nx") && !o.xx) {
      o.nx = true;
    } else if (set && EqualsIgnoreCase(opt, "xx") && !o.nx) {
      o.xx = true;
    } else if (set && EqualsIgnoreCase(opt, "get")) {
      o.get = true;
    } else if (set && EqualsIgnoreCase(opt, "keepttl") && !o.persist &&
               o.expiry == ExpiryKind::kNone) {
      o.keepttl = true;
    } else if (!set && EqualsIgnoreCase(opt, "persist") && !o.keepttl &&
               o.expiry == ExpiryKind::kNone) {
      o.persist = true;
    } else if (EqualsIgnoreCase(opt, "ex") && take_expiry(ExpiryKind::kEx)) {
    } else if (EqualsIgnoreCase(opt, "px") && take_expiry(ExpiryKind::kPx)) {
    } else if (EqualsIgnoreCase(opt, "exat") && take_expiry(ExpiryKind::kExAt)) {
    } else if (EqualsIgnoreCase(opt, "pxat") && take_expiry(ExpiryKind::kPxAt)) {
    } else {
      out.error = kSyntaxError;
      return out;
    }
  }
  return out;
}

Parsed<int64_t> StringExpiryAt(const StringOptions& options, int64_t now_ms,
                               std::string_view command) {
  Parsed<int64_t> out;
  const auto number = ParseInt64(options.expiry_arg);
  if (!number) {
    out.error = kNotInteger;
    return out;
  }
  const bool seconds = options.expiry == ExpiryKind::kEx || options.expiry == ExpiryKind::kExAt;
  const bool relative = options.expiry == ExpiryKind::kEx || options.expiry == ExpiryKind::kPx;
  int64_t ms = *number;
  if (ms <= 0 || (seconds && ms > kMax / 1000)) {
    out.error = InvalidExpireTime(command);
    return out;
  }
  if (seconds) ms *= 1000;
  if (relative) {
    // Redis adds and then rejects a result <= 0, which is how the overflow shows there.
    if (now_ms > 0 && ms > kMax - now_ms) {
      out.error = InvalidExpireTime(command);
      return out;
    }
    ms += now_ms;
    if (ms <= 0) {
      out.error = InvalidExpireTime(command);
      return out;
    }
  }
  out.value = ms;
  return out;
}

int64_t TtlReply(std::optional<int64_t> at_ms, int64_t now_ms, TimeUnit unit, bool absolute) {
  if (!at_ms) return kTtlNoExpiry;
  int64_t ttl = absolute ? *at_ms : *at_ms - now_ms;
  if (ttl < 0) ttl = 0;
  if (unit == TimeUnit::kMilliseconds) return ttl;
  // (ttl + 500) / 1000 without overflow: Redis answers 9223372036854776 for PXAT INT64_MAX.
  return ttl / 1000 + (ttl % 1000 + 500) / 1000;
}

}  // namespace prefixd::expiry
