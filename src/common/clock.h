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
//
// A Burst is a connection's run of pipelined requests between two waits (one read's worth): a
// read of the clock costs as much as a small command's parsing here (~25 ns in a VM), so within
// a burst a command starts at the instant the one before it ended (BurstStart), and its wall
// time is the burst's one wall reading moved on by the steady clock. A burst ends before every
// wait, so no reading outlives one.
class CommandClock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  static TimePoint Now() { return in_command_ ? started_ : std::chrono::steady_clock::now(); }
  static int64_t WallMs() {
    if (!in_command_) return NowMs();
    if (wall_ms_ == 0) wall_ms_ = BurstWallMs(started_);
    return wall_ms_;
  }

  // A command's start: the end of the burst's previous command, or a fresh reading.
  static TimePoint BurstStart() {
    return in_burst_ && have_end_ ? burst_end_ : std::chrono::steady_clock::now();
  }
  // A command's end, which the next command of the burst starts from.
  static void EndCommand(TimePoint end) {
    burst_end_ = end;
    have_end_ = in_burst_;
  }

  // Open while a connection runs the requests of one read; Pause before each wait and Resume
  // after it (the wait may be long, and the thread runs other work meanwhile).
  class Burst {
   public:
    Burst() { Resume(); }
    ~Burst() { Pause(); }
    Burst(const Burst&) = delete;
    Burst& operator=(const Burst&) = delete;
    static void Pause() { in_burst_ = false, have_end_ = false, have_wall_ = false; }
    static void Resume() { in_burst_ = true, have_end_ = false, have_wall_ = false; }
  };

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
  // The wall time at `at`: in a burst, its first wall reading (taken for a command that started
  // at `burst_wall_steady_`) plus the steady time since, to the nanosecond.
  static int64_t BurstWallMs(TimePoint at) {
    if (!in_burst_) return NowMs();
    if (!have_wall_) {
      timespec ts{};
      clock_gettime(CLOCK_REALTIME, &ts);
      burst_wall_ns_ = int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
      burst_wall_steady_ = at;
      have_wall_ = true;
    }
    const int64_t since =
        at > burst_wall_steady_
            ? std::chrono::duration_cast<std::chrono::nanoseconds>(at - burst_wall_steady_).count()
            : 0;
    return (burst_wall_ns_ + since) / 1000000;
  }

  static inline thread_local TimePoint started_{};
  static inline thread_local int64_t wall_ms_ = 0;  // 0: not read yet in this command
  static inline thread_local bool in_command_ = false;
  static inline thread_local bool in_burst_ = false;
  static inline thread_local bool have_end_ = false;
  static inline thread_local TimePoint burst_end_{};
  static inline thread_local bool have_wall_ = false;
  static inline thread_local TimePoint burst_wall_steady_{};
  static inline thread_local int64_t burst_wall_ns_ = 0;
};

}  // namespace prefixd
