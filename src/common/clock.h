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

// The steady clock as a command sees it: the dispatcher reads the clock as a command starts (it
// times every command) and opens a Scope with that reading on its thread, so what the command
// stamps (the eviction index's last access) reuses it instead of reading the clock again, as
// Redis stamps a command's keys with the time the command started. Outside a Scope, a fresh
// reading.
class CommandClock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  static TimePoint Now() { return in_command_ ? started_ : std::chrono::steady_clock::now(); }

  class Scope {
   public:
    explicit Scope(TimePoint started) {
      started_ = started;
      in_command_ = true;
    }
    ~Scope() { in_command_ = false; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };

 private:
  static inline thread_local TimePoint started_{};
  static inline thread_local bool in_command_ = false;
};

}  // namespace prefixd
