// Clocks shared by every module. Pure functions; any thread.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace prefixd {

// Wall-clock milliseconds since the epoch from the coarse clock (a few ms of resolution, a
// fraction of the cost of a precise read): enough for idle times and ages.
inline int64_t CoarseNowMs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

// Wall-clock milliseconds since the epoch, precise: for expiry times and TTLs, which clients
// compare with their own clock to the millisecond (Redis's mstime).
inline int64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
}

// The clocks as a command sees them: the dispatcher reads the steady clock as a command starts
// (it times every command) and opens a Scope with that reading on its thread, so what the command
// stamps (the eviction index's last access) reuses it instead of reading the clock again, as
// Redis stamps a command's keys with the time the command started. The wall clock is read once
// per command too, when first asked (WallMs): every key a command looks up is judged expired or
// not against one instant, as Redis's lookups use the time its call() cached. Outside a Scope,
// fresh readings. Scopes nest (a transaction's commands inside EXEC): the inner one gives the
// outer's readings back when it ends.
class CommandClock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  static TimePoint Now() { return in_command_ ? started_ : std::chrono::steady_clock::now(); }
  static int64_t WallMs() {
    if (!in_command_) return NowMs();
    if (wall_ms_ == 0) wall_ms_ = NowMs();
    return wall_ms_;
  }

  class Scope {
   public:
    explicit Scope(TimePoint started)
        : outer_started_(started_), outer_wall_ms_(wall_ms_), outer_in_command_(in_command_) {
      started_ = started;
      wall_ms_ = 0;
      in_command_ = true;
    }
    ~Scope() {
      started_ = outer_started_;
      wall_ms_ = outer_wall_ms_;
      in_command_ = outer_in_command_;
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    TimePoint outer_started_;
    int64_t outer_wall_ms_;
    bool outer_in_command_;
  };

 private:
  static inline thread_local TimePoint started_{};
  static inline thread_local int64_t wall_ms_ = 0;  // 0: not read yet in this command
  static inline thread_local bool in_command_ = false;
};

}  // namespace prefixd
