// The expiry arguments of Redis 7.0.15's commands, as pure functions with Redis's exact error
// texts and overflow rules: EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT (time, NX|XX|GT|LT, what to do
// with the key), SET/GETEX's NX XX GET KEEPTTL PERSIST EX PX EXAT PXAT, and the TTL family's
// replies. Times are Unix milliseconds. Any thread.
//
// Options are compared as Redis compares them, as C strings: an argument "nx\0zz" reads as NX.
// Where Redis checks things in a given order (options, then the time, then the key), the
// parsers here check in that order too; looking the key up stays with the caller.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace prefixd::expiry {

inline constexpr std::string_view kSyntaxError = "ERR syntax error";
inline constexpr std::string_view kNotInteger = "ERR value is not an integer or out of range";
// "ERR invalid expire time in 'set' command": `command` is the lower-case command name.
std::string InvalidExpireTime(std::string_view command);

// A parsed value, or the error reply Redis gives (its text, without the leading '-').
template <class T>
struct Parsed {
  T value{};
  std::string error;
  bool ok() const { return error.empty(); }
};

// ---- EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT --------------------------------------------------

struct ExpireConditions {
  bool nx = false, xx = false, gt = false, lt = false;
};

struct ExpireRequest {
  int64_t at_ms = 0;  // absolute; may be in the past (the key is then deleted)
  ExpireConditions conditions;
};

enum class TimeUnit : uint8_t { kSeconds, kMilliseconds };

// The arguments after the key: the time, then NX|XX|GT|LT in any case and number. `relative`
// is true for EXPIRE/PEXPIRE (the time is added to `now_ms`), false for the *AT forms.
// Negative times are allowed (Redis deletes the key); only overflow is an error.
Parsed<ExpireRequest> ParseExpireArgs(std::span<const std::string_view> args, TimeUnit unit,
                                      bool relative, int64_t now_ms, std::string_view command);

enum class ExpireOutcome : uint8_t {
  kUnchanged,  // reply 0: a condition failed (or, the caller's business, no such key)
  kSet,        // reply 1: store at_ms as the key's expiry
  kDelete,     // reply 1: at_ms is not in the future; the key is deleted (as Redis's DEL)
};

// What EXPIRE does to an existing key whose expiry is `current_ms` (nullopt: none). GT treats
// "no expiry" as infinite (never greater), LT likewise (always less).
ExpireOutcome DecideExpire(const ExpireRequest& request, std::optional<int64_t> current_ms,
                           int64_t now_ms);

// ---- SET and GETEX -------------------------------------------------------------------------

enum class StringCommand : uint8_t { kSet, kGetEx };
enum class ExpiryKind : uint8_t { kNone, kEx, kPx, kExAt, kPxAt };

struct StringOptions {
  bool nx = false, xx = false, get = false, keepttl = false, persist = false;
  ExpiryKind expiry = ExpiryKind::kNone;
  std::string_view expiry_arg;  // the argument after EX/PX/EXAT/PXAT (a view into `args`)
};

// SET's options after the value, or GETEX's after the key, with Redis's conflicts (each a
// "syntax error"): NX/XX, KEEPTTL/PERSIST/EX/PX/EXAT/PXAT exclude one another; repeating one
// option is allowed, the last value counting. NX, XX, GET and KEEPTTL are SET's only,
// PERSIST is GETEX's only.
Parsed<StringOptions> ParseStringOptions(std::span<const std::string_view> args,
                                         StringCommand command);

// The absolute expiry the options ask for (options.expiry must not be kNone). Redis's rules:
// the number must be > 0 and must not overflow in ms, nor (EX/PX) once `now_ms` is added.
Parsed<int64_t> StringExpiryAt(const StringOptions& options, int64_t now_ms,
                               std::string_view command);

// ---- TTL, PTTL, EXPIRETIME, PEXPIRETIME -------------------------------------------------

inline constexpr int64_t kTtlNoKey = -2;
inline constexpr int64_t kTtlNoExpiry = -1;

// The reply for an existing key with expiry `at_ms` (nullopt: none): remaining time (TTL,
// PTTL) or the absolute time (EXPIRETIME, PEXPIRETIME), clamped at 0, seconds rounded to the
// nearest (Redis's (ms + 500) / 1000).
int64_t TtlReply(std::optional<int64_t> at_ms, int64_t now_ms, TimeUnit unit, bool absolute);

}  // namespace prefixd::expiry
