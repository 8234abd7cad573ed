// Clocks shared by every module. Pure functions; any thread.
#pragma once

#include <time.h>

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

}  // namespace prefixd
