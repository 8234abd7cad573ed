// Supervision: tells systemd (`supervised systemd`, a Type=notify unit) when the server is ready,
// what it is doing and when it stops, through sd_notify. Called from main's thread only.
#pragma once

#include <string>

namespace prefixd::app {

class Supervision {
 public:
  // `mode` is the supervised setting: "no", "systemd" or "auto" (systemd when NOTIFY_SOCKET is
  // set, as Redis does).
  explicit Supervision(const std::string& mode);

  bool active() const { return active_; }
  void Ready(const std::string& status);
  void Stopping();
  void Status(const std::string& status);

 private:
  bool active_ = false;
};

}  // namespace prefixd::app
