#include "resp_encoding.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <system_error>

#include "protocol/command_encoding.h"

namespace prefixd::client_internal {
namespace {

// Arguments up to this size are copied into the request buffer; larger ones (blobs) go to the
// socket from the caller's memory as their own iovec.
constexpr size_t kInlineArgBytes = 16 * 1024;
constexpr size_t kMaxIovecs = 1024;  // IOV_MAX on Linux

#ifdef MSG_NOSIGNAL
constexpr int kSendFlags =
    MSG_NOSIGNAL;  // a closed peer gives EPIPE, not a process-killing SIGPIPE
#else
constexpr int kSendFlags = 0;
#endif

}  // namespace

Decimal::Decimal(uint64_t value) {
  auto [end, ec] = std::to_chars(buf_.data(), buf_.data() + buf_.size(), value);
  len_ = static_cast<size_t>(end - buf_.data());
}

std::string MillisText(double ms) {
  std::array<char, 32> buf{};
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), ms);
  return std::string(buf.data(), end);
}

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

void RequestBuffer::Add(std::span<const std::string_view> args) {
  AppendInline(protocol::FrameHeader::Array(args.size()).view());
  for (std::string_view arg : args) {
    AppendInline(protocol::FrameHeader::Bulk(arg.size()).view());
    if (arg.size() <= kInlineArgBytes) {
      AppendInline(arg);
    } else {
      pieces_.push_back({arg.data(), 0, arg.size()});
    }
    AppendInline("\r\n");
  }
}

Status RequestBuffer::Send(int fd) {
  Status st = Write(fd);
  Clear();
  return st;
}

Status RequestBuffer::Write(int fd) {
  std::vector<iovec> iov;
  iov.reserve(pieces_.size());
  for (const Piece& piece : pieces_) {
    const char* base = piece.external != nullptr ? piece.external : inline_.data() + piece.offset;
    iov.push_back({const_cast<char*>(base), piece.size});
  }
  size_t next = 0;
  while (next < iov.size()) {
    msghdr msg{};
    msg.msg_iov = iov.data() + next;
    msg.msg_iovlen = std::min(iov.size() - next, kMaxIovecs);
    ssize_t n = ::sendmsg(fd, &msg, kSendFlags);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return Status::Timeout("sending a request timed out (io_timeout)");
      }
      return Status::IoError("sending a request: " + ErrnoText(errno));
    }
    // Step over what was written; a partial write resumes inside an iovec.
    auto written = static_cast<size_t>(n);
    while (written > 0 && next < iov.size()) {
      if (written >= iov[next].iov_len) {
        written -= iov[next].iov_len;
        ++next;
      } else {
        iov[next].iov_base = static_cast<char*>(iov[next].iov_base) + written;
        iov[next].iov_len -= written;
        written = 0;
      }
    }
    while (next < iov.size() && iov[next].iov_len == 0) ++next;
  }
  return Status::Ok();
}

void RequestBuffer::AppendInline(std::string_view text) {
  if (text.empty()) return;
  if (!pieces_.empty() && pieces_.back().external == nullptr) {
    pieces_.back().size += text.size();
  } else {
    pieces_.push_back({nullptr, inline_.size(), text.size()});
  }
  inline_.append(text);
}

}  // namespace prefixd::client_internal
