// A minimal HTTP/1.1 responder: enough for Prometheus and curl, not a web server. Each request
// is read with a 2 s timeout, answered, and the connection closed.
#include "app/metrics_listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace prefixd::app {
namespace {

constexpr size_t kMaxRequestBytes = 8192;

void SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

std::string Response(std::string_view status, std::string_view type, std::string_view body) {
  return "HTTP/1.1 " + std::string(status) + "\r\nContent-Type: " + std::string(type) +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
         std::string(body);
}

}  // namespace

std::string MetricsListener::Start(const std::string& bind, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, bind.c_str(), &addr.sin_addr) != 1) {
    return "metrics-bind '" + bind + "' is not an IPv4 address";
  }
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listen_fd_, 16) != 0) {
    std::string err = std::strerror(errno);
    close(listen_fd_);
    listen_fd_ = -1;
    return "can't listen on " + bind + ":" + std::to_string(port) + ": " + err;
  }
  socklen_t len = sizeof addr;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { Serve(); });
  return {};
}

void MetricsListener::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
}

void MetricsListener::Serve() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Answer(fd);
    close(fd);
  }
}

void MetricsListener::Answer(int fd) {
  timeval timeout{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  std::string request;
  char buf[2048];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < kMaxRequestBytes) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    request.append(buf, static_cast<size_t>(n));
  }
  std::string_view line(request);
  line = line.substr(0, line.find("\r\n"));
  if (request.find("\r\n\r\n") == std::string::npos) {
    return SendAll(fd, Response("431 Request Header Fields Too Large", "text/plain", ""));
  }
  const bool get = line.starts_with("GET "), head = line.starts_with("HEAD ");
  if (!get && !head) {
    return SendAll(fd, Response("405 Method Not Allowed", "text/plain", "GET /metrics\n"));
  }
  std::string_view path = line.substr(line.find(' ') + 1);
  path = path.substr(0, path.find(' '));
  path = path.substr(0, path.find('?'));
  if (path != "/metrics") return SendAll(fd, Response("404 Not Found", "text/plain", "/metrics\n"));
  std::string body = render_();
  std::string response = Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", body);
  if (head) response.resize(response.size() - body.size());
  SendAll(fd, response);
}

}  // namespace prefixd::app
