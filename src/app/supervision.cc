#include "app/supervision.h"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <cstdlib>

namespace prefixd::app {

Supervision::Supervision(const std::string& mode) {
  const bool socket_set = std::getenv("NOTIFY_SOCKET") != nullptr;
  if (mode == "systemd" || (mode == "auto" && socket_set)) {
    active_ = socket_set;
    if (!socket_set) {
      spdlog::warn("systemd supervision requested, but NOTIFY_SOCKET not found!");
    } else {
      spdlog::info(
          "Supervised by systemd. Please make sure you set appropriate values for "
          "TimeoutStartSec and TimeoutStopSec in your service unit.");
    }
  }
}

void Supervision::Ready(const std::string& status) {
  if (active_) sd_notifyf(0, "READY=1\nSTATUS=%s", status.c_str());
}

void Supervision::Stopping() {
  if (active_) sd_notify(0, "STOPPING=1");
}

void Supervision::Status(const std::string& status) {
  if (active_) sd_notifyf(0, "STATUS=%s", status.c_str());
}

}  // namespace prefixd::app
