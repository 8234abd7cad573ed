// MetricsListener: the HTTP endpoint Prometheus scrapes (GET /metrics), on its own thread and
// port, one short connection at a time. Started and stopped by main; nothing else touches it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

namespace prefixd::app {

class MetricsListener {
 public:
  // `render` makes the exposition text; it runs on the listener's thread.
  explicit MetricsListener(std::function<std::string()> render) : render_(std::move(render)) {}
  ~MetricsListener() { Stop(); }

  // Binds and starts serving; returns an error text (empty on success).
  std::string Start(const std::string& bind, uint16_t port);
  void Stop();
  uint16_t port() const { return port_; }

 private:
  void Serve();
  void Answer(int fd);

  std::function<std::string()> render_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace prefixd::app
