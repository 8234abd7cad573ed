#include "commands/migrate_link.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace prefixd::commands {

std::unique_ptr<MigrateLink> MigrateLink::Connect(const std::string& host, const std::string& port,
                                                  std::chrono::milliseconds timeout,
                                                  std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    error = gai_strerror(rc);
    return nullptr;
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, &freeaddrinfo);
  error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    std::unique_ptr<MigrateLink> link(new MigrateLink(fd, timeout));
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      error = std::strerror(errno);
      continue;
    }
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    if (!link->Wait(POLLOUT)) {
      error = "timeout";
      continue;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0 || so_error != 0) {
      error = std::strerror(so_error != 0 ? so_error : errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return link;
  }
  return nullptr;
}

MigrateLink::~MigrateLink() { close(fd_); }

bool MigrateLink::Wait(short events) const {
  pollfd p{fd_, events, 0};
  for (;;) {
    const int rc = poll(&p, 1, static_cast<int>(timeout_.count()));
    if (rc > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
    if (rc == 0 || errno != EINTR) return false;
  }
}

bool MigrateLink::Send(std::span<const Bytes> pieces) {
  constexpr size_t kRun = 64;   // pieces per writev
  size_t next = 0, offset = 0;  // the first unsent piece and how much of it went out
  std::vector<iovec> iov;
  while (next < pieces.size()) {
    iov.clear();
    for (size_t i = next; i < pieces.size() && iov.size() < kRun; ++i) {
      const size_t skip = i == next ? offset : 0;
      if (pieces[i].size() == skip) continue;
      iov.push_back(iovec{const_cast<uint8_t*>(pieces[i].data()) + skip, pieces[i].size() - skip});
    }
    if (iov.empty()) break;
    const ssize_t sent = writev(fd_, iov.data(), static_cast<int>(iov.size()));
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
      if (!Wait(POLLOUT)) return false;
      continue;
    }
    auto left = static_cast<size_t>(sent);
    while (next < pieces.size() && left >= pieces[next].size() - offset) {
      left -= pieces[next].size() - offset;
      ++next, offset = 0;
    }
    offset += left;
  }
  return true;
}

std::optional<protocol::RespValue> MigrateLink::Read() {
  char buffer[16 * 1024];
  for (;;) {
    if (!unread_.empty()) {
      const protocol::ReadResult r = reader_.Feed(unread_);
      if (r.status == protocol::ReadStatus::kMalformed) return std::nullopt;
      unread_.erase(0, r.consumed);
      if (r.status == protocol::ReadStatus::kComplete) return reader_.TakeValue();
    }
    const ssize_t got = recv(fd_, buffer, sizeof(buffer), 0);
    if (got > 0) {
      unread_.append(buffer, static_cast<size_t>(got));
    } else if (got == 0) {
      return std::nullopt;
    } else if (errno != EINTR && ((errno != EAGAIN && errno != EWOULDBLOCK) || !Wait(POLLIN))) {
      return std::nullopt;
    }
  }
}

}  // namespace prefixd::commands
