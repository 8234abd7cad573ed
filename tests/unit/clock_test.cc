// CommandClock: one steady and one wall reading per command, scopes that nest (a transaction's
// commands inside EXEC) and give the outer command its readings back.
#include "common/clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace prefixd {
namespace {

using std::chrono::milliseconds;

TEST(CommandClockTest, ACommandSeesOneWallInstant) {
  CommandClock::Scope command(std::chrono::steady_clock::now());
  const int64_t first = CommandClock::WallMs();
  std::this_thread::sleep_for(milliseconds(3));
  EXPECT_EQ(CommandClock::WallMs(), first);
  EXPECT_GE(NowMs(), first + 2);
}

TEST(CommandClockTest, OutsideACommandTheReadingsAreFresh) {
  const int64_t before = CommandClock::WallMs();
  std::this_thread::sleep_for(milliseconds(3));
  EXPECT_GE(CommandClock::WallMs(), before + 2);
  const auto steady = CommandClock::Now();
  std::this_thread::sleep_for(milliseconds(1));
  EXPECT_GT(CommandClock::Now(), steady);
}

TEST(CommandClockTest, AnInnerScopeGivesTheOuterItsReadingsBack) {
  const auto outer_start = std::chrono::steady_clock::now();
  CommandClock::Scope outer(outer_start);
  const int64_t outer_wall = CommandClock::WallMs();
  std::this_thread::sleep_for(milliseconds(3));
  {
    const auto inner_start = std::chrono::steady_clock::now();
    CommandClock::Scope inner(inner_start);
    EXPECT_EQ(CommandClock::Now(), inner_start);
    EXPECT_GE(CommandClock::WallMs(), outer_wall + 2);
  }
  EXPECT_EQ(CommandClock::Now(), outer_start);
  EXPECT_EQ(CommandClock::WallMs(), outer_wall);
}

}  // namespace
}  // namespace prefixd
