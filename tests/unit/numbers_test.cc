// ParseInt64 against Redis's string2ll rules, at both limits and one past them, with 18, 19 and
// 20 characters (the last digits it accepts before its one range check).
#include "common/numbers.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace prefixd {
namespace {

TEST(ParseInt64Test, AcceptsRedisIntegersUpToBothLimits) {
  EXPECT_EQ(ParseInt64("0"), 0);
  EXPECT_EQ(ParseInt64("7"), 7);
  EXPECT_EQ(ParseInt64("-7"), -7);
  EXPECT_EQ(ParseInt64("123456"), 123456);
  EXPECT_EQ(ParseInt64("999999999999999999"), 999999999999999999);    // 18 digits
  EXPECT_EQ(ParseInt64("-999999999999999999"), -999999999999999999);  // 18 digits, signed
  EXPECT_EQ(ParseInt64("1000000000000000000"), 1000000000000000000);  // 19 digits
  EXPECT_EQ(ParseInt64("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(ParseInt64("-9223372036854775808"), INT64_MIN);
}

TEST(ParseInt64Test, RefusesWhatString2llRefuses) {
  std::string with_nul = "12";
  with_nul += '\0';
  with_nul += '3';
  const std::vector<std::string> refused = {"",
                                            "-",
                                            "+1",
                                            "01",
                                            "-0",
                                            "00",
                                            " 1",
                                            "1 ",
                                            "1a",
                                            "a1",
                                            "1.0",
                                            "--1",
                                            "0x10",
                                            with_nul,
                                            "12345678901234567a",
                                            "-12345678901234567a",
                                            "9223372036854775808",
                                            "-9223372036854775809",
                                            "18446744073709551616",
                                            "9999999999999999999",
                                            "-9999999999999999999",
                                            "99999999999999999999",
                                            "123456789012345678901"};
  for (const std::string& text : refused) {
    EXPECT_EQ(ParseInt64(text), std::nullopt) << "'" << text << "'";
  }
}

}  // namespace
}  // namespace prefixd
