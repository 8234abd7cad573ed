#include "app/open_files.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace prefixd::app {
namespace {

// Descriptors that are not clients': those open when the server started, plus kReservedFds.
std::atomic<uint64_t> reserved_fds{kReservedFds + 16};

// Descriptors the process holds now (listeners, io contexts, the log).
uint64_t OpenDescriptors() {
  std::error_code ec;
  uint64_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

uint64_t SoftLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  return limit.rlim_cur == RLIM_INFINITY ? UINT64_MAX : limit.rlim_cur;
}

// Raises the soft limit to `wanted` or as close to it as the hard limit allows.
uint64_t RaiseSoftLimit(uint64_t wanted) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= wanted) return SoftLimit();
  rlim_t target =
      limit.rlim_max == RLIM_INFINITY ? wanted : std::min<rlim_t>(limit.rlim_max, wanted);
  rlim_t original = limit.rlim_cur;
  limit.rlim_cur = target;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    spdlog::warn("Server can't set maximum open files to {} because of OS error: {}.", target,
                 std::strerror(errno));
  } else if (target != original) {
    spdlog::info("Increased maximum number of open files to {} (it was originally set to {}).",
                 target, original);
  }
  return SoftLimit();
}

}  // namespace

bool AdjustOpenFilesLimit(Settings& settings) {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  uint64_t hard = limit.rlim_max == RLIM_INFINITY ? UINT64_MAX : limit.rlim_max;
  uint64_t soft = RaiseSoftLimit(hard);
  uint64_t reserved = OpenDescriptors() + kReservedFds;
  reserved_fds = reserved;
  auto maxclients = static_cast<uint64_t>(settings.Int(Setting::kMaxClients));
  if (maxclients + reserved <= soft) return true;
  if (soft <= reserved) {
    spdlog::critical(
        "Your current 'ulimit -n' of {} is not enough for the server to start. Please increase "
        "your open file limit to at least {}. Exiting.",
        soft, reserved + 1);
    return false;
  }
  uint64_t fits = soft - reserved;
  spdlog::warn("You requested maxclients of {} requiring at least {} max file descriptors.",
               maxclients, maxclients + reserved);
  spdlog::warn(
      "Current maximum open files is {}. maxclients has been reduced to {} to compensate for low "
      "ulimit. If you need higher maxclients increase 'ulimit -n'.",
      soft, fits);
  settings.Set(Setting::kMaxClients, std::to_string(fits), /*at_startup=*/true);
  return true;
}

std::string CheckMaxClients(const Settings& settings) {
  auto maxclients = static_cast<uint64_t>(settings.Int(Setting::kMaxClients));
  uint64_t reserved = reserved_fds.load();
  uint64_t soft = RaiseSoftLimit(maxclients + reserved);
  if (maxclients + reserved <= soft) return {};
  uint64_t fits = soft > reserved ? soft - reserved : 1;
  return "The operating system is not able to handle the specified number of clients, try with " +
         std::to_string(fits);
}

}  // namespace prefixd::app
