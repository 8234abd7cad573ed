#include "reply_reader.h"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <new>

#include "resp_encoding.h"

namespace prefixd::client_internal {
namespace {

constexpr size_t kReadChunkBytes = 64 * 1024;
// Longest status or error line accepted in a reply.
constexpr size_t kMaxLineBytes = 1 << 20;

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};

Reply ConvertReply(const redisReply& in) {
  Reply out;
  switch (in.type) {
    case REDIS_REPLY_STRING:
      out.type = Reply::Type::kString;
      out.str.assign(in.str, in.len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = Reply::Type::kStatus;
      out.str.assign(in.str, in.len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = Reply::Type::kError;
      out.str.assign(in.str, in.len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = Reply::Type::kInteger;
      out.integer = in.integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = Reply::Type::kArray;
      out.elements.reserve(in.elements);
      for (size_t i = 0; i < in.elements; ++i) out.elements.push_back(ConvertReply(*in.element[i]));
      break;
    default:
      out.type = Reply::Type::kNil;
      break;
  }
  return out;
}

std::string Describe(const ReplyHead& head) {
  std::string out = "'";
  out += head.type;
  out += std::string(head.text.substr(0, 64));
  out += "'";
  return out;
}

}  // namespace

std::optional<int64_t> ParseInteger(std::string_view text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// ---- Inbox ----------------------------------------------------------------------------------

Status Inbox::Fill() {
  if (tail_ == buf_.size()) {
    if (head_ > 0) {
      std::memmove(buf_.data(), buf_.data() + head_, tail_ - head_);
      tail_ -= head_;
      head_ = 0;
    } else {
      buf_.resize(std::max(kReadChunkBytes, buf_.size() * 2));
    }
  }
  auto n = Receive(buf_.data() + tail_, buf_.size() - tail_, 0);
  if (!n.ok()) return n.status();
  tail_ += *n;
  return Status::Ok();
}

Result<std::string_view> Inbox::Line() {
  size_t scanned = 0;
  for (;;) {
    std::string_view buffered(data(), available());
    size_t end = buffered.find("\r\n", scanned);
    if (end != std::string_view::npos) {
      Consume(end + 2);
      return buffered.substr(0, end);
    }
    if (buffered.size() > kMaxLineBytes) {
      return Status::ProtocolError("reply line longer than " + std::to_string(kMaxLineBytes) +
                                   " bytes");
    }
    scanned = buffered.empty() ? 0 : buffered.size() - 1;
    PREFIXD_RETURN_IF_ERROR(Fill());
  }
}

Status Inbox::ReadInto(uint8_t* dst, size_t n) {
  const size_t buffered = std::min(n, available());
  if (buffered > 0) {
    std::memcpy(dst, data(), buffered);
    Consume(buffered);
  }
  size_t done = buffered;
  while (done < n) {
    auto got = Receive(dst + done, n - done, MSG_WAITALL);
    if (!got.ok()) return got.status();
    done += *got;
  }
  return Status::Ok();
}

Status Inbox::Discard(size_t n) {
  while (n > 0) {
    if (available() == 0) PREFIXD_RETURN_IF_ERROR(Fill());
    const size_t take = std::min(n, available());
    Consume(take);
    n -= take;
  }
  return Status::Ok();
}

Status Inbox::ExpectCrlf() {
  while (available() < 2) PREFIXD_RETURN_IF_ERROR(Fill());
  if (data()[0] != '\r' || data()[1] != '\n') {
    return Status::ProtocolError("bulk reply not terminated by CRLF");
  }
  Consume(2);
  return Status::Ok();
}

Result<size_t> Inbox::Receive(void* dst, size_t n, int flags) {
  for (;;) {
    ssize_t got = ::recv(fd_, dst, n, flags);
    if (got > 0) return static_cast<size_t>(got);
    if (got == 0) return Status::IoError("connection closed by the server");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return Status::Timeout("no reply data within io_timeout");
    }
    return Status::IoError("reading a reply: " + ErrnoText(errno));
  }
}

// ---- ReplyReader ----------------------------------------------------------------------------

Result<ReplyHead> ReplyReader::Head() {
  auto line = in_.Line();
  if (!line.ok()) return fail_(line.status());
  if (line->empty()) return fail_(Status::ProtocolError("empty reply line"));
  return ReplyHead{(*line)[0], line->substr(1)};
}

Status ReplyReader::Unexpected(const ReplyHead& head, std::string_view command,
                               std::string_view wanted) {
  return fail_(Status::ProtocolError(std::string(command) + ": expected " + std::string(wanted) +
                                     ", got " + Describe(head)));
}

Status ReplyReader::ReadStatus(std::string_view expected, std::string_view command) {
  PREFIXD_ASSIGN_OR_RETURN(ReplyHead head, Head());
  if (head.type == '-') return Status::ServerError(std::string(head.text));
  if (head.type != '+' || head.text != expected) {
    return Unexpected(head, command, "+" + std::string(expected));
  }
  return Status::Ok();
}

Result<int64_t> ReplyReader::ReadArrayHead(std::string_view command) {
  PREFIXD_ASSIGN_OR_RETURN(ReplyHead head, Head());
  if (head.type == '-') return Status::ServerError(std::string(head.text));
  std::optional<int64_t> n = ParseInteger(head.text);
  if (head.type != '*' || !n.has_value() || *n < -1) return Unexpected(head, command, "an array");
  return std::max<int64_t>(*n, 0);
}

Result<int64_t> ReplyReader::ReadInteger(std::string_view command) {
  PREFIXD_ASSIGN_OR_RETURN(ReplyHead head, Head());
  if (head.type == '-') return Status::ServerError(std::string(head.text));
  std::optional<int64_t> n = ParseInteger(head.text);
  if (head.type != ':' || !n.has_value()) return Unexpected(head, command, "an integer");
  return *n;
}

Result<int64_t> ReplyReader::ReadIntegerInArray(std::string_view command) {
  PREFIXD_ASSIGN_OR_RETURN(ReplyHead head, Head());
  std::optional<int64_t> n = ParseInteger(head.text);
  if (head.type != ':' || !n.has_value()) return Unexpected(head, command, "an integer");
  return *n;
}

Result<std::optional<uint64_t>> ReplyReader::ReadBulkHead(std::string_view command, bool in_array) {
  PREFIXD_ASSIGN_OR_RETURN(ReplyHead head, Head());
  if (head.type == '-' && !in_array) return Status::ServerError(std::string(head.text));
  if (head.type == '_' && head.text.empty()) return std::optional<uint64_t>();  // RESP3 null
  std::optional<int64_t> n = ParseInteger(head.text);
  if (head.type != '$' || !n.has_value() || *n < -1) {
    return Unexpected(head, command, "a bulk string or nil");
  }
  if (*n == -1) return std::optional<uint64_t>();
  if (static_cast<uint64_t>(*n) > max_bulk_bytes_) {
    return fail_(Status::ProtocolError("bulk reply of " + std::to_string(*n) +
                                       " bytes is over max_bulk_bytes (" +
                                       std::to_string(max_bulk_bytes_) + ")"));
  }
  return std::optional<uint64_t>(static_cast<uint64_t>(*n));
}

Result<std::optional<Blob>> ReplyReader::ReadBulk(std::string_view command, bool in_array) {
  PREFIXD_ASSIGN_OR_RETURN(std::optional<uint64_t> length, ReadBulkHead(command, in_array));
  if (!length.has_value()) return std::optional<Blob>();
  Blob blob;
  try {
    blob.resize(static_cast<size_t>(*length));
  } catch (const std::bad_alloc&) {
    return fail_(
        Status::ResourceExhausted("no memory for a " + std::to_string(*length) + "-byte reply"));
  }
  Status st = in_.ReadInto(blob.data(), blob.size());
  if (st.ok()) st = in_.ExpectCrlf();
  if (!st.ok()) return fail_(std::move(st));
  return std::optional<Blob>(std::move(blob));
}

Result<BulkRead> ReplyReader::ReadBulkInto(std::span<uint8_t> dst, std::string_view command) {
  const std::array<std::span<uint8_t>, 1> pieces{dst};
  return ReadBulkScatter(pieces, command, /*in_array=*/false);
}

Result<BulkRead> ReplyReader::ReadBulkScatter(std::span<const std::span<uint8_t>> pieces,
                                              std::string_view command, bool in_array) {
  PREFIXD_ASSIGN_OR_RETURN(std::optional<uint64_t> length, ReadBulkHead(command, in_array));
  if (!length.has_value()) return BulkRead{.nil = true};
  uint64_t left = *length;
  Status st = Status::Ok();
  for (const std::span<uint8_t>& piece : pieces) {
    const size_t keep = static_cast<size_t>(std::min<uint64_t>(left, piece.size()));
    if (keep == 0 || !st.ok()) break;
    st = in_.ReadInto(piece.data(), keep);
    left -= keep;
  }
  if (st.ok()) st = in_.Discard(static_cast<size_t>(left));
  if (st.ok()) st = in_.ExpectCrlf();
  if (!st.ok()) return fail_(std::move(st));
  return BulkRead{.nil = false, .length = *length};
}

Result<Reply> ReplyReader::ReadGeneric(redisReader* reader) {
  for (;;) {
    // Everything buffered goes to hiredis's reader.
    if (in_.available() > 0) {
      if (redisReaderFeed(reader, in_.data(), in_.available()) != REDIS_OK) {
        return fail_(Status::ProtocolError(std::string("reply reader: ") + reader->errstr));
      }
      in_.Consume(in_.available());
    }
    void* raw = nullptr;
    if (redisReaderGetReply(reader, &raw) != REDIS_OK) {
      return fail_(Status::ProtocolError(std::string("malformed reply: ") + reader->errstr));
    }
    if (raw != nullptr) {
      std::unique_ptr<redisReply, ReplyDeleter> reply(static_cast<redisReply*>(raw));
      if (reader->len != reader->pos) {
        return fail_(Status::ProtocolError("the server sent bytes beyond the reply"));
      }
      if (reply->type == REDIS_REPLY_ERROR) {
        return Status::ServerError(std::string(reply->str, reply->len));
      }
      return ConvertReply(*reply);
    }
    Status st = in_.Fill();
    if (!st.ok()) return fail_(std::move(st));
  }
}

}  // namespace prefixd::client_internal
