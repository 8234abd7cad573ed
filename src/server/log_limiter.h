// LogLimiter: lets a message that a client (or a flood of clients) can trigger at will reach the
// log at most a few times per interval, and says how many were held back. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>

namespace prefixd::server {

class LogLimiter {
 public:
  LogLimiter(int burst, std::chrono::milliseconds interval) : burst_(burst), interval_(interval) {}

  // True when this occurrence may be logged; `suppressed` is then how many were dropped since
  // the last one that was.
  bool Allow(uint64_t* suppressed) {
    std::lock_guard lock(mu_);
    auto now = std::chrono::steady_clock::now();
    if (now - window_start_ >= interval_) {
      window_start_ = now;
      used_ = 0;
    }
    if (used_ >= burst_) {
      ++dropped_;
      return false;
    }
    ++used_;
    *suppressed = dropped_;
    dropped_ = 0;
    return true;
  }

 private:
  const int burst_;
  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point window_start_{};
  int used_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace prefixd::server
