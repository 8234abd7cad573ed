// Expiry arguments against replies read from redis-server 7.0.15: error texts, option
// conflicts, overflow at the limits and one past them, the NX|XX|GT|LT decisions, and TTL
// rounding.
#include "common/expiry_args.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace prefixd::expiry {
namespace {

using namespace std::string_literals;
constexpr int64_t kNow = 1'700'000'000'000;  // a fixed "now" in Unix ms
constexpr int64_t kMax = INT64_MAX;

Parsed<ExpireRequest> Expire(std::vector<std::string_view> args, TimeUnit unit = TimeUnit::kSeconds,
                             bool relative = true, std::string_view command = "expire") {
  return ParseExpireArgs(args, unit, relative, kNow, command);
}

TEST(ExpireArgsTest, TimesAndOverflow) {
  EXPECT_EQ(Expire({"10"}).value.at_ms, kNow + 10'000);
  EXPECT_EQ(Expire({"-5"}).value.at_ms, kNow - 5'000);  // allowed: the key is deleted
  EXPECT_EQ(Expire({"10"}, TimeUnit::kMilliseconds, true).value.at_ms, kNow + 10);
  EXPECT_EQ(Expire({"10"}, TimeUnit::kSeconds, false).value.at_ms, 10'000);
  // Seconds: LLONG_MAX / 1000 converts, then adding now overflows (EXPIRE), not for EXPIREAT.
  EXPECT_EQ(Expire({"9223372036854775"}).error, "ERR invalid expire time in 'expire' command");
  EXPECT_EQ(Expire({"9223372036854776"}).error, "ERR invalid expire time in 'expire' command");
  EXPECT_EQ(Expire({"9223372036854775"}, TimeUnit::kSeconds, false).value.at_ms,
            9223372036854775000);
  EXPECT_EQ(Expire({"-9223372036854775"}).value.at_ms, -9223372036854775000 + kNow);
  EXPECT_EQ(Expire({"-9223372036854776"}).error, "ERR invalid expire time in 'expire' command");
  EXPECT_EQ(Expire({"-9223372036854808"}, TimeUnit::kSeconds, false, "expireat").error,
            "ERR invalid expire time in 'expireat' command");
  EXPECT_EQ(Expire({"9223372036854775807"}, TimeUnit::kMilliseconds, true, "pexpire").error,
            "ERR invalid expire time in 'pexpire' command");
  EXPECT_EQ(Expire({"9223372036854775807"}, TimeUnit::kMilliseconds, false).value.at_ms, kMax);
  EXPECT_EQ(Expire({"-9223372036854775808"}, TimeUnit::kMilliseconds, true).value.at_ms,
            INT64_MIN + kNow);
  EXPECT_EQ(Expire({"-9223372036854775808"}, TimeUnit::kMilliseconds, false).value.at_ms,
            INT64_MIN);
  EXPECT_EQ(Expire({"9223372036854775808"}, TimeUnit::kMilliseconds, false).error,
            "ERR value is not an integer or out of range");
  for (const char* bad : {"abc", "1.5", " 1", "+1", "01", "-0", ""}) {
    EXPECT_EQ(Expire({bad}).error, "ERR value is not an integer or out of range") << bad;
  }
}

TEST(ExpireArgsTest, OptionsAreCheckedBeforeTheTime) {
  EXPECT_EQ(Expire({"abc", "FOO"}).error, "ERR Unsupported option FOO");
  EXPECT_EQ(Expire({"abc", "NX", "XX"}).error,
            "ERR NX and XX, GT or LT options at the same time are not compatible");
  EXPECT_EQ(Expire({"10", "NX", "GT"}).error,
            "ERR NX and XX, GT or LT options at the same time are not compatible");
  EXPECT_EQ(Expire({"10", "lt", "NX"}).error,
            "ERR NX and XX, GT or LT options at the same time are not compatible");
  EXPECT_EQ(Expire({"10", "LT", "GT"}).error,
            "ERR GT and LT options at the same time are not compatible");
  EXPECT_EQ(Expire({"10", "foo\0bar"s}).error, "ERR Unsupported option foo");
  const auto ok = Expire({"10", "nx\0zz"s, "nX"});
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok.value.conditions.nx);
  const auto xx_gt = Expire({"10", "Xx", "gT"});
  ASSERT_TRUE(xx_gt.ok());
  EXPECT_TRUE(xx_gt.value.conditions.xx && xx_gt.value.conditions.gt);
}

TEST(ExpireArgsTest, DecideFollowsRedis) {
  auto req = [](int64_t at, ExpireConditions c) { return ExpireRequest{at, c}; };
  const int64_t later = kNow + 100'000, sooner = kNow + 50'000;
  EXPECT_EQ(DecideExpire(req(later, {}), std::nullopt, kNow), ExpireOutcome::kSet);
  EXPECT_EQ(DecideExpire(req(kNow, {}), std::nullopt, kNow), ExpireOutcome::kDelete);
  EXPECT_EQ(DecideExpire(req(later, {.nx = true}), sooner, kNow), ExpireOutcome::kUnchanged);
  EXPECT_EQ(DecideExpire(req(later, {.nx = true}), std::nullopt, kNow), ExpireOutcome::kSet);
  EXPECT_EQ(DecideExpire(req(later, {.xx = true}), std::nullopt, kNow), ExpireOutcome::kUnchanged);
  // GT: no expiry counts as infinite, so GT never applies to a persistent key.
  EXPECT_EQ(DecideExpire(req(later, {.gt = true}), std::nullopt, kNow), ExpireOutcome::kUnchanged);
  EXPECT_EQ(DecideExpire(req(later, {.gt = true}), later, kNow), ExpireOutcome::kUnchanged);
  EXPECT_EQ(DecideExpire(req(later, {.gt = true}), sooner, kNow), ExpireOutcome::kSet);
  // LT: always applies to a persistent key.
  EXPECT_EQ(DecideExpire(req(later, {.lt = true}), std::nullopt, kNow), ExpireOutcome::kSet);
  EXPECT_EQ(DecideExpire(req(later, {.lt = true}), later, kNow), ExpireOutcome::kUnchanged);
  EXPECT_EQ(DecideExpire(req(sooner, {.xx = true, .lt = true}), later, kNow), ExpireOutcome::kSet);
  // A negative time with NX on a key that has an expiry: 0, and the key stays.
  EXPECT_EQ(DecideExpire(req(-1000, {.nx = true}), later, kNow), ExpireOutcome::kUnchanged);
  EXPECT_EQ(DecideExpire(req(-1000, {}), later, kNow), ExpireOutcome::kDelete);
}

Parsed<StringOptions> Set(std::vector<std::string_view> args) {
  return ParseStringOptions(args, StringCommand::kSet);
}
Parsed<StringOptions> GetEx(std::vector<std::string_view> args) {
  return ParseStringOptions(args, StringCommand::kGetEx);
}

TEST(StringOptionsTest, ConflictsAreSyntaxErrors) {
  for (auto args : std::vector<std::vector<std::string_view>>{{"EX", "10", "PX", "10"},
                                                              {"EX"},
                                                              {"NX", "XX"},
                                                              {"KEEPTTL", "EX", "10"},
                                                              {"EX", "10", "KEEPTTL"},
                                                              {"PERSIST"},
                                                              {"EX", "abc", "PX", "1"},
                                                              {"FOO"},
                                                              {"EXAT", "1", "PXAT", "1"},
                                                              {"PXAT"}}) {
    EXPECT_EQ(Set(args).error, "ERR syntax error") << args[0];
  }
  for (auto args : std::vector<std::vector<std::string_view>>{
           {"EX", "10", "PERSIST"}, {"PERSIST", "EX", "10"}, {"NX"}, {"KEEPTTL"}, {"GET"}}) {
    EXPECT_EQ(GetEx(args).error, "ERR syntax error") << args[0];
  }
}

TEST(StringOptionsTest, RepeatsAndCStringReadingAreAllowed) {
  const auto twice = Set({"EX", "10", "ex", "20"});
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice.value.expiry, ExpiryKind::kEx);
  EXPECT_EQ(twice.value.expiry_arg, "20");
  EXPECT_TRUE(Set({"GET", "GET", "NX", "NX", "KEEPTTL", "KEEPTTL"}).ok());
  EXPECT_TRUE(GetEx({"PERSIST", "persist"}).ok());
  const auto nul = Set({"ex\0x"s, "10"});
  ASSERT_TRUE(nul.ok());
  EXPECT_EQ(nul.value.expiry, ExpiryKind::kEx);
  const auto all = Set({"xx", "Get", "pxat", "123"});
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all.value.xx && all.value.get && !all.value.nx);
  EXPECT_EQ(all.value.expiry, ExpiryKind::kPxAt);
  EXPECT_TRUE(Set({}).ok());
}

Parsed<int64_t> SetAt(std::vector<std::string_view> args, std::string_view command = "set") {
  const auto parsed =
      ParseStringOptions(args, command == "set" ? StringCommand::kSet : StringCommand::kGetEx);
  EXPECT_TRUE(parsed.ok());
  return StringExpiryAt(parsed.value, kNow, command);
}

TEST(StringOptionsTest, ExpiryTimesAndLimits) {
  EXPECT_EQ(SetAt({"EX", "10"}).value, kNow + 10'000);
  EXPECT_EQ(SetAt({"PX", "10"}).value, kNow + 10);
  EXPECT_EQ(SetAt({"EXAT", "10"}).value, 10'000);
  EXPECT_EQ(SetAt({"PXAT", "10"}).value, 10);
  EXPECT_EQ(SetAt({"EXAT", "1"}).value, 1000);  // in the past: set, then expired at once
  const std::string invalid = "ERR invalid expire time in 'set' command";
  EXPECT_EQ(SetAt({"EX", "0"}).error, invalid);
  EXPECT_EQ(SetAt({"EX", "-1"}).error, invalid);
  EXPECT_EQ(SetAt({"EX", "9223372036854775"}).error, invalid);  // + now overflows
  EXPECT_EQ(SetAt({"EX", "9223372036854776"}).error, invalid);
  EXPECT_EQ(SetAt({"EXAT", "9223372036854775"}).value, 9223372036854775000);
  EXPECT_EQ(SetAt({"EXAT", "9223372036854776"}).error, invalid);
  EXPECT_EQ(SetAt({"PX", "9223372036854775807"}).error, invalid);
  EXPECT_EQ(SetAt({"PX", std::to_string(kMax - kNow)}).value, kMax);
  EXPECT_EQ(SetAt({"PX", std::to_string(kMax - kNow + 1)}).error, invalid);
  EXPECT_EQ(SetAt({"PXAT", "9223372036854775807"}).value, kMax);
  EXPECT_EQ(SetAt({"EX", "abc"}).error, "ERR value is not an integer or out of range");
  EXPECT_EQ(SetAt({"EX", "010"}).error, "ERR value is not an integer or out of range");
  EXPECT_EQ(SetAt({"EX", "0"}, "getex").error, "ERR invalid expire time in 'getex' command");
  EXPECT_EQ(SetAt({"PXAT", "-5"}, "getex").error, "ERR invalid expire time in 'getex' command");
}

TEST(TtlReplyTest, RoundsAsRedis) {
  using enum TimeUnit;
  EXPECT_EQ(TtlReply(std::nullopt, kNow, kSeconds, false), -1);
  EXPECT_EQ(TtlReply(kNow + 1499, kNow, kSeconds, false), 1);
  EXPECT_EQ(TtlReply(kNow + 1500, kNow, kSeconds, false), 2);
  EXPECT_EQ(TtlReply(kNow + 1498, kNow, kMilliseconds, false), 1498);
  EXPECT_EQ(TtlReply(kNow - 5, kNow, kMilliseconds, false), 0);  // due, not yet collected
  EXPECT_EQ(TtlReply(1'700'000'001'499, kNow, kSeconds, true), 1'700'000'001);
  EXPECT_EQ(TtlReply(1'700'000'001'500, kNow, kSeconds, true), 1'700'000'002);
  // Checked on redis-server: PXAT INT64_MAX gives EXPIRETIME 9223372036854776.
  EXPECT_EQ(TtlReply(kMax, kNow, kSeconds, true), 9223372036854776);
  EXPECT_EQ(TtlReply(kMax, kNow, kMilliseconds, true), kMax);
  EXPECT_EQ(TtlReply(9223372036854775307, kNow, kSeconds, true), 9223372036854775);
  EXPECT_EQ(TtlReply(kMax, 1'764'000'000'000, kSeconds, false), 9223370272854776);
}

}  // namespace
}  // namespace prefixd::expiry
