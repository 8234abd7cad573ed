// Settings: every numeric setting at its limits and one past, Redis's error texts, memory units,
// saturating arithmetic, apply hooks, and the protected-action rule.
#include "common/settings.h"

#include <gtest/gtest.h>

#include <limits>

#include "engine/registry.h"

namespace prefixd {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

std::string Range(const SettingSpec& spec) {
  return "argument must be between " + std::to_string(spec.min) + " and " +
         std::to_string(spec.max) + " inclusive";
}

std::string Text(const SettingSpec& spec, int64_t v) {
  if (spec.name == "unixsocketperm") {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%llo", static_cast<long long>(v));
    return buf;
  }
  return std::to_string(v);
}

TEST(SettingsTest, EveryNumberIsAcceptedAtItsLimitsAndRefusedOnePast) {
  for (size_t i = 0; i < Settings::Specs().size(); ++i) {
    const SettingSpec& spec = Settings::Specs()[i];
    if (spec.type != SettingType::kInteger && spec.type != SettingType::kMemory) continue;
    SCOPED_TRACE(std::string(spec.name));
    Settings s;
    auto id = static_cast<Setting>(i);
    EXPECT_EQ(s.Set(id, Text(spec, spec.min), true), "");
    EXPECT_EQ(s.Int(id), spec.min);
    EXPECT_EQ(s.Set(id, Text(spec, spec.max), true), "");
    EXPECT_EQ(s.Int(id), spec.max);
    if (spec.min > 0) EXPECT_EQ(s.Set(id, Text(spec, spec.min - 1), true), Range(spec));
    if (spec.max < kMax) EXPECT_EQ(s.Set(id, Text(spec, spec.max + 1), true), Range(spec));
    // Refused values leave the old one in place.
    EXPECT_EQ(s.Int(id), spec.max);
  }
}

TEST(SettingsTest, RedisRangesForRedisDirectives) {
  auto spec = [](std::string_view name) {
    return Settings::Specs()[size_t(*Settings::Find(name))];
  };
  EXPECT_EQ(spec("timeout").max, 2147483647);
  EXPECT_EQ(spec("maxclients").min, 1);
  EXPECT_EQ(spec("maxclients").max, 4294967295);
  EXPECT_EQ(spec("port").max, 65535);
  EXPECT_EQ(spec("tls-port").max, 65535);
  EXPECT_EQ(spec("tcp-backlog").max, 2147483647);
  EXPECT_EQ(spec("proto-max-bulk-len").min, 1024 * 1024);
  EXPECT_EQ(spec("auto-aof-rewrite-percentage").max, 2147483647);
  EXPECT_EQ(spec("unixsocketperm").max, 0777);
}

TEST(SettingsTest, ErrorTextsAreRedis) {
  Settings s;
  EXPECT_EQ(s.Set("timeout", "9223372036854776", false),
            "argument must be between 0 and 2147483647 inclusive");
  EXPECT_EQ(s.Set("timeout", "99999999999999999999", false),
            "argument couldn't be parsed into an integer");
  EXPECT_EQ(s.Set("timeout", "1.5", false), "argument couldn't be parsed into an integer");
  EXPECT_EQ(s.Set("maxmemory", "-1", false), "argument must be a memory value");
  EXPECT_EQ(s.Set("maxmemory", "10xb", false), "argument must be a memory value");
  EXPECT_EQ(s.Set("maxmemory", "9223372036854775807gb", false), "argument must be a memory value");
  EXPECT_EQ(s.Set("protected-mode", "on", false), "argument must be 'yes' or 'no'");
  EXPECT_EQ(s.Set("appendfsync", "sometimes", false),
            "argument(s) must be one of the following: always, everysec, no");
  EXPECT_EQ(s.Set("io-threads", "2", false), "can't set immutable config");
  EXPECT_EQ(s.Set("nonesuch", "2", false), "unknown setting 'nonesuch'");
}

TEST(SettingsTest, UnixSocketPermTakesAtMostSixOctalDigits) {
  Settings s;
  EXPECT_EQ(s.Set("unixsocketperm", "000700", true), "");
  EXPECT_EQ(s.Int(Setting::kUnixSocketPerm), 0700);
  // Found by the config fuzzer: a long value of non-digits once overflowed while being read.
  EXPECT_EQ(s.Set("unixsocketperm", std::string(40, '\0'), true),
            "argument couldn't be parsed into an integer");
  EXPECT_EQ(s.Set("unixsocketperm", "7777777", true),
            "argument couldn't be parsed into an integer");
  EXPECT_EQ(s.Set("unixsocketperm", "778", true), "argument couldn't be parsed into an integer");
  EXPECT_EQ(s.Int(Setting::kUnixSocketPerm), 0700);
}

TEST(SettingsTest, BoolsAndEnumsFoldCase) {
  Settings s;
  EXPECT_EQ(s.Set("protected-mode", "NO", false), "");
  EXPECT_FALSE(s.Bool(Setting::kProtectedMode));
  EXPECT_EQ(s.Get(Setting::kProtectedMode), "no");
  EXPECT_EQ(s.Set("tls-auth-clients", "Optional", false), "");
  EXPECT_EQ(s.Get(Setting::kTlsAuthClients), "optional");
}

TEST(SettingsTest, DefaultsAreSafe) {
  Settings s;
  EXPECT_TRUE(s.Bool(Setting::kProtectedMode));
  EXPECT_EQ(s.String(Setting::kEnableProtectedConfigs), "no");
  EXPECT_EQ(s.String(Setting::kEnableDebugCommand), "no");
  EXPECT_EQ(s.Get(Setting::kBind), "127.0.0.1");
  EXPECT_EQ(s.Int(Setting::kTlsPort), 0);
  EXPECT_EQ(s.Get(Setting::kTlsAuthClients), "yes");
}

TEST(SettingsTest, MemoryUnits) {
  EXPECT_EQ(ParseMemory("1k"), 1000);
  EXPECT_EQ(ParseMemory("1KB"), 1024);
  EXPECT_EQ(ParseMemory("3mb"), 3 * 1024 * 1024);
  EXPECT_EQ(ParseMemory("2g"), 2000000000);
  EXPECT_EQ(ParseMemory("8589934591gb"), int64_t{8589934591} << 30);
  EXPECT_EQ(ParseMemory("8589934592gb"), std::nullopt);  // past int64
  EXPECT_EQ(ParseMemory("kb"), std::nullopt);
  EXPECT_EQ(ParseMemory(""), std::nullopt);
}

TEST(SettingsTest, ArithmeticSaturates) {
  EXPECT_EQ(SaturatingMul(2147483647, 1000), int64_t{2147483647000});
  EXPECT_EQ(SaturatingMul(9223372036854776, 1000), kMax);
  EXPECT_EQ(SaturatingMul(-9223372036854776, 1000), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(SaturatingAdd(kMax, 1), kMax);
  EXPECT_EQ(SaturatingAdd(kMax - 1, 1), kMax);
  EXPECT_EQ(SaturatingAdd(std::numeric_limits<int64_t>::min(), -1),
            std::numeric_limits<int64_t>::min());
}

TEST(SettingsTest, ApplyHooksRunOncePerChangeAndNameTheCulprit) {
  Settings s;
  int tls_runs = 0;
  s.AddApplyHook({Setting::kTlsCertFile, Setting::kTlsKeyFile}, [&] {
    ++tls_runs;
    return std::string();
  });
  s.AddApplyHook({Setting::kMaxClients}, [] { return std::string("no"); });
  EXPECT_EQ(s.Apply({Setting::kTlsCertFile, Setting::kTlsKeyFile}), "");
  EXPECT_EQ(tls_runs, 1);
  EXPECT_EQ(s.Apply({Setting::kTimeout}), "");
  EXPECT_EQ(tls_runs, 1);
  Setting culprit = Setting::kTimeout;
  EXPECT_EQ(s.Apply({Setting::kTimeout, Setting::kMaxClients}, &culprit), "no");
  EXPECT_EQ(culprit, Setting::kMaxClients);
}

TEST(SettingsTest, ProtectedActions) {
  EXPECT_TRUE(ProtectedActionAllowed("yes", false));
  EXPECT_TRUE(ProtectedActionAllowed("local", true));
  EXPECT_FALSE(ProtectedActionAllowed("local", false));
  EXPECT_FALSE(ProtectedActionAllowed("no", true));
}

TEST(SettingsTest, ProtectedModeDecision) {
  Settings s;
  server::ClientState remote, local;
  local.local = true;
  EXPECT_TRUE(commands::ProtectedModeRefuses(s, remote));
  EXPECT_FALSE(commands::ProtectedModeRefuses(s, local));
  s.Set(Setting::kRequirePass, "secret", false);
  EXPECT_FALSE(commands::ProtectedModeRefuses(s, remote));
  s.Set(Setting::kRequirePass, "", false);
  s.Set(Setting::kProtectedMode, "no", false);
  EXPECT_FALSE(commands::ProtectedModeRefuses(s, remote));
}

}  // namespace
}  // namespace prefixd
