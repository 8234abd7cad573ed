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

// In a burst a command starts where the one before it ended: one reading per command.
TEST(CommandClockTest, InABurstACommandStartsWhereThePreviousEnded) {
  CommandClock::Burst burst;
  const auto first_start = CommandClock::BurstStart();
  std::this_thread::sleep_for(milliseconds(2));
  const auto first_end = std::chrono::steady_clock::now();
  CommandClock::EndCommand(first_end);
  std::this_thread::sleep_for(milliseconds(2));
  EXPECT_EQ(CommandClock::BurstStart(), first_end);
  EXPECT_GT(first_end, first_start);
  // A wait ends the burst: the next command reads the clock afresh, and so after a resume.
  burst.Pause();
  EXPECT_GT(CommandClock::BurstStart(), first_end + milliseconds(1));
  CommandClock::EndCommand(std::chrono::steady_clock::now() - milliseconds(50));
  EXPECT_GT(CommandClock::BurstStart(), std::chrono::steady_clock::now() - milliseconds(10))
      << "an end recorded outside a burst was reused";
  burst.Resume();
  EXPECT_GT(CommandClock::BurstStart(), first_end + milliseconds(1));
}

TEST(CommandClockTest, OutsideABurstAnEndIsNeverReused) {
  CommandClock::EndCommand(std::chrono::steady_clock::now() - milliseconds(50));
  EXPECT_GT(CommandClock::BurstStart(), std::chrono::steady_clock::now() - milliseconds(10));
  {
    CommandClock::Burst burst;
    EXPECT_GT(CommandClock::BurstStart(), std::chrono::steady_clock::now() - milliseconds(10))
        << "a burst opened with an end from before it";
  }
}

// The wall clock is read once per burst and moved on by the steady clock: a later command of the
// burst sees the time it started at, to the millisecond, and never a time ahead of the real one.
TEST(CommandClockTest, InABurstTheWallTimeFollowsTheSteadyClock) {
  CommandClock::Burst burst;
  int64_t first = 0;
  {
    CommandClock::Scope command(CommandClock::BurstStart());
    const int64_t before = NowMs();
    first = CommandClock::WallMs();
    EXPECT_GE(first, before);
    EXPECT_LE(first, NowMs());
    CommandClock::EndCommand(std::chrono::steady_clock::now());
  }
  std::this_thread::sleep_for(milliseconds(20));
  {
    const int64_t before = NowMs();
    CommandClock::Scope command(std::chrono::steady_clock::now());
    const int64_t later = CommandClock::WallMs();
    EXPECT_GE(later, first + 19);
    EXPECT_GE(later, before - 1);
    EXPECT_LE(later, NowMs() + 1);
  }
}

}  // namespace
}  // namespace prefixd
