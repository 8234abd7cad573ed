#include "prefixd/client.h"

#include <hiredis/hiredis.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <deque>
#include <new>
#include <system_error>
#include <utility>

namespace prefixd {
namespace {

// Arguments up to this size are copied into the request buffer; larger ones (blobs) go to the
// socket from the caller's memory as their own iovec.
constexpr size_t kInlineArgBytes = 16 * 1024;
constexpr size_t kMaxIovecs = 1024;  // IOV_MAX on Linux
constexpr size_t kReadChunkBytes = 64 * 1024;
// Longest status or error line accepted in a reply.
constexpr size_t kMaxLineBytes = 1 << 20;

#ifdef MSG_NOSIGNAL
constexpr int kSendFlags =
    MSG_NOSIGNAL;  // a closed peer gives EPIPE, not a process-killing SIGPIPE
#else
constexpr int kSendFlags = 0;
#endif

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

// A number rendered for the wire; lives on the caller's stack while a request is built.
class Decimal {
 public:
  explicit Decimal(uint64_t value) {
    auto [end, ec] = std::to_chars(buf_.data(), buf_.data() + buf_.size(), value);
    len_ = static_cast<size_t>(end - buf_.data());
  }
  std::string_view view() const { return {buf_.data(), len_}; }

 private:
  std::array<char, 24> buf_{};
  size_t len_ = 0;
};

std::optional<int64_t> ParseInteger(std::string_view text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view AsChars(std::span<const uint8_t> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

Status CheckLayer(uint32_t layer) {
  if (layer > kMaxLayer) {
    return Status::InvalidArgument("layer " + std::to_string(layer) + " is over the maximum " +
                                   std::to_string(kMaxLayer));
  }
  return Status::Ok();
}

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// Requests encoded as RESP arrays of bulk strings. Small arguments are copied; large ones are
// referenced, so they must stay alive until Send() returns.
class RequestBuffer {
 public:
  void Add(std::span<const std::string_view> args) {
    AppendInline("*");
    AppendInline(Decimal(args.size()).view());
    AppendInline("\r\n");
    for (std::string_view arg : args) {
      AppendInline("$");
      AppendInline(Decimal(arg.size()).view());
      AppendInline("\r\n");
      if (arg.size() <= kInlineArgBytes) {
        AppendInline(arg);
      } else {
        pieces_.push_back({arg.data(), 0, arg.size()});
      }
      AppendInline("\r\n");
    }
  }

  bool empty() const { return pieces_.empty(); }

  void Clear() {
    inline_.clear();
    pieces_.clear();
  }

  // Writes every queued request to `fd`, then clears the buffer.
  Status Send(int fd) {
    Status st = Write(fd);
    Clear();
    return st;
  }

 private:
  struct Piece {
    const char* external;  // null: `size` bytes of inline_ from `offset`
    size_t offset;
    size_t size;
  };

  Status Write(int fd) {
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

  void AppendInline(std::string_view text) {
    if (text.empty()) return;
    if (!pieces_.empty() && pieces_.back().external == nullptr) {
      pieces_.back().size += text.size();
    } else {
      pieces_.push_back({nullptr, inline_.size(), text.size()});
    }
    inline_.append(text);
  }

  std::string inline_;
  std::vector<Piece> pieces_;
};

// Bytes read from the socket and not yet consumed. Bulk payloads bypass it: whatever part of a
// payload is already buffered is copied out, the rest is received straight into its destination.
class Inbox {
 public:
  void Reset(int fd) {
    fd_ = fd;
    head_ = tail_ = 0;
  }

  size_t available() const { return tail_ - head_; }
  const char* data() const { return buf_.data() + head_; }
  void Consume(size_t n) {
    head_ += n;
    if (head_ == tail_) head_ = tail_ = 0;
  }

  // Receives at least one more byte.
  Status Fill() {
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

  // The next CRLF-terminated line without its CRLF, consumed. The view is valid until the next
  // read from this inbox.
  Result<std::string_view> Line() {
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

  // Exactly `n` bytes into `dst`.
  Status ReadInto(uint8_t* dst, size_t n) {
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

  Status Discard(size_t n) {
    while (n > 0) {
      if (available() == 0) PREFIXD_RETURN_IF_ERROR(Fill());
      const size_t take = std::min(n, available());
      Consume(take);
      n -= take;
    }
    return Status::Ok();
  }

  Status ExpectCrlf() {
    while (available() < 2) PREFIXD_RETURN_IF_ERROR(Fill());
    if (data()[0] != '\r' || data()[1] != '\n') {
      return Status::ProtocolError("bulk reply not terminated by CRLF");
    }
    Consume(2);
    return Status::Ok();
  }

 private:
  Result<size_t> Receive(void* dst, size_t n, int flags) {
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

  int fd_ = -1;
  std::vector<char> buf_;
  size_t head_ = 0;
  size_t tail_ = 0;
};

struct ContextDeleter {
  void operator()(redisContext* ctx) const { redisFree(ctx); }
};
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

// The first byte of a reply and the rest of its first line.
struct ReplyHead {
  char type;
  std::string_view text;
};

std::string Describe(const ReplyHead& head) {
  std::string out = "'";
  out += head.type;
  out += std::string(head.text.substr(0, 64));
  out += "'";
  return out;
}

// Outcome of reading one bulk-or-nil reply into a fixed buffer.
struct BulkRead {
  bool nil = false;
  uint64_t length = 0;  // the full bulk length; only the first dst.size() bytes were kept
};

}  // namespace

class Client::Impl {
 public:
  Impl(bool unix_socket, std::string address, int port, const ClientOptions& options)
      : unix_socket_(unix_socket), address_(std::move(address)), port_(port), options_(options) {}

  bool connected() const { return ctx_ != nullptr; }

  Status Open() {
    ctx_.reset();
    in_.Reset(-1);
    out_.Clear();
    redisContext* raw = nullptr;
    const bool timed = options_.connect_timeout.count() > 0;
    if (unix_socket_) {
      raw = timed
                ? redisConnectUnixWithTimeout(address_.c_str(), ToTimeval(options_.connect_timeout))
                : redisConnectUnix(address_.c_str());
    } else {
      raw = timed ? redisConnectWithTimeout(address_.c_str(), port_,
                                            ToTimeval(options_.connect_timeout))
                  : redisConnect(address_.c_str(), port_);
    }
    std::unique_ptr<redisContext, ContextDeleter> ctx(raw);
    const std::string where = unix_socket_ ? address_ : address_ + ":" + std::to_string(port_);
    if (ctx == nullptr) return Status::ResourceExhausted("connecting to " + where + ": no memory");
    if (ctx->err != 0) return Status::Unavailable("connecting to " + where + ": " + ctx->errstr);
    if (options_.io_timeout.count() > 0 &&
        redisSetTimeout(ctx.get(), ToTimeval(options_.io_timeout)) != REDIS_OK) {
      return Status::IoError("setting the socket timeout: " + std::string(ctx->errstr));
    }
    if (!unix_socket_) redisEnableKeepAlive(ctx.get());  // best effort: a dead peer is noticed
    ctx_ = std::move(ctx);
    in_.Reset(ctx_->fd);
    broken_.clear();
    if (has_auth_) {
      Status st = SendAuth(username_, password_);
      if (!st.ok()) return Fail(st);
    }
    return Status::Ok();
  }

  Status Ping() {
    const std::array<std::string_view, 1> args{"PING"};
    PREFIXD_RETURN_IF_ERROR(Send(args));
    return ReadStatus("PONG", "PING");
  }

  Status Auth(std::string_view username, std::string_view password) {
    PREFIXD_RETURN_IF_ERROR(Usable());
    PREFIXD_RETURN_IF_ERROR(SendAuth(username, password));
    username_ = username;
    password_ = password;
    has_auth_ = true;
    return Status::Ok();
  }

  Status Store(std::string_view sid, uint32_t layer, std::string_view blob) {
    PREFIXD_RETURN_IF_ERROR(CheckLayer(layer));
    const Decimal layer_text(layer);
    const std::array<std::string_view, 4> args{"SSM.PREFIX.STORE", sid, layer_text.view(), blob};
    PREFIXD_RETURN_IF_ERROR(Send(args));
    return ReadStatus("OK", "SSM.PREFIX.STORE");
  }

  Result<std::optional<Blob>> Fetch(std::string_view sid, uint32_t layer) {
    PREFIXD_RETURN_IF_ERROR(CheckLayer(layer));
    const Decimal layer_text(layer);
    const std::array<std::string_view, 3> args{"SSM.PREFIX.FETCH", sid, layer_text.view()};
    PREFIXD_RETURN_IF_ERROR(Send(args));
    return ReadBulk("SSM.PREFIX.FETCH", /*in_array=*/false);
  }

  Result<std::optional<size_t>> FetchRange(std::string_view sid, uint32_t layer, uint64_t offset,
                                           uint64_t length, std::span<uint8_t> out) {
    PREFIXD_RETURN_IF_ERROR(CheckLayer(layer));
    if (out.size() < length) {
      return Status::InvalidArgument("FetchRange: the buffer has " + std::to_string(out.size()) +
                                     " bytes, the range " + std::to_string(length));
    }
    PREFIXD_RETURN_IF_ERROR(Usable());
    AddRange(sid, layer, offset, length);
    PREFIXD_RETURN_IF_ERROR(Flush());
    PREFIXD_ASSIGN_OR_RETURN(BulkRead read, ReadBulkInto(out.first(length)));
    if (read.nil) return std::optional<size_t>();
    if (read.length > length) {
      return Fail(Status::ProtocolError("SSM.PREFIX.FETCH RANGE asked for " +
                                        std::to_string(length) + " bytes and got " +
                                        std::to_string(read.length)));
    }
    return std::optional<size_t>(read.length);
  }

  Result<std::optional<size_t>> FetchInto(std::string_view sid, uint32_t layer,
                                          std::span<uint8_t> out, size_t chunk_bytes, int depth) {
    PREFIXD_RETURN_IF_ERROR(CheckLayer(layer));
    PREFIXD_RETURN_IF_ERROR(Usable());
    const uint64_t chunk = std::max<uint64_t>(chunk_bytes, 1);
    const size_t max_in_flight = static_cast<size_t>(std::clamp(depth, 1, 1024));
    // The last request reaches one byte past `out`: that byte coming back means the blob does not
    // fit, and its absence proves it does without a separate size query.
    const uint64_t limit = uint64_t{out.size()} + 1;

    struct Pending {
      uint64_t offset;
      uint64_t length;
    };
    std::deque<Pending> pending;
    uint64_t next = 0;
    bool issuing = true;
    bool first = true;
    bool absent = false;
    std::optional<uint64_t> end;  // the blob's size, once a short chunk shows it
    Status deferred;              // a non-fatal error, returned once the pipeline has drained

    for (;;) {
      while (issuing && pending.size() < max_in_flight && next < limit) {
        const uint64_t length = std::min(chunk, limit - next);
        AddRange(sid, layer, next, length);
        pending.push_back({next, length});
        next += length;
      }
      if (!out_.empty()) PREFIXD_RETURN_IF_ERROR(Flush());
      if (pending.empty()) break;
      const Pending p = pending.front();
      pending.pop_front();
      const bool was_first = std::exchange(first, false);

      const size_t start = static_cast<size_t>(std::min<uint64_t>(p.offset, out.size()));
      const size_t room = static_cast<size_t>(std::min<uint64_t>(p.length, out.size() - start));
      auto read = ReadBulkInto(out.subspan(start, room));
      if (!read.ok()) {
        if (!connected()) return read.status();
        if (deferred.ok()) deferred = read.status();
        issuing = false;
        continue;
      }
      if (read->nil) {
        if (was_first) {
          absent = true;
        } else if (!absent && deferred.ok()) {
          deferred = Status::Aborted("layer " + std::to_string(layer) +
                                     " was dropped during FetchInto, at offset " +
                                     std::to_string(p.offset));
        }
        issuing = false;
        continue;
      }
      if (absent) continue;  // created during the transfer: the first reply decides
      if (read->length > p.length) {
        return Fail(Status::ProtocolError("SSM.PREFIX.FETCH RANGE asked for " +
                                          std::to_string(p.length) + " bytes and got " +
                                          std::to_string(read->length)));
      }
      if (read->length > room) {
        if (deferred.ok()) {
          deferred = Status::OutOfRange("layer " + std::to_string(layer) + " is larger than the " +
                                        std::to_string(out.size()) + "-byte buffer");
        }
        issuing = false;
        continue;
      }
      if (end.has_value()) {
        if (read->length > 0 && deferred.ok()) {
          deferred =
              Status::Aborted("layer " + std::to_string(layer) +
                              " grew during FetchInto, past its end at " + std::to_string(*end));
        }
        continue;
      }
      if (read->length < p.length) {
        end = p.offset + read->length;
        issuing = false;
      }
    }
    if (!deferred.ok()) return deferred;
    if (absent) return std::optional<size_t>();
    if (!end.has_value()) return Status::Internal("FetchInto finished without finding the end");
    return std::optional<size_t>(static_cast<size_t>(*end));
  }

  Status Drop(std::string_view sid, std::optional<uint32_t> layer) {
    if (layer.has_value()) {
      PREFIXD_RETURN_IF_ERROR(CheckLayer(*layer));
      const Decimal layer_text(*layer);
      const std::array<std::string_view, 3> args{"SSM.PREFIX.DROP", sid, layer_text.view()};
      PREFIXD_RETURN_IF_ERROR(Send(args));
    } else {
      const std::array<std::string_view, 2> args{"SSM.PREFIX.DROP", sid};
      PREFIXD_RETURN_IF_ERROR(Send(args));
    }
    return ReadStatus("OK", "SSM.PREFIX.DROP");
  }

  Status MStore(std::string_view sid, std::span<const LayerBlob> layers) {
    if (layers.empty()) return Status::InvalidArgument("MStore needs at least one layer");
    std::vector<Decimal> layer_texts;
    layer_texts.reserve(layers.size());
    std::vector<std::string_view> args;
    args.reserve(2 + 2 * layers.size());
    args.push_back("SSM.PREFIX.MSTORE");
    args.push_back(sid);
    for (const LayerBlob& entry : layers) {
      PREFIXD_RETURN_IF_ERROR(CheckLayer(entry.layer));
      layer_texts.emplace_back(entry.layer);
      args.push_back(layer_texts.back().view());
      args.push_back(AsChars(entry.bytes));
    }
    PREFIXD_RETURN_IF_ERROR(Send(args));
    return ReadStatus("OK", "SSM.PREFIX.MSTORE");
  }

  Result<std::vector<std::optional<Blob>>> MFetch(std::string_view sid,
                                                  std::span<const uint32_t> layers) {
    if (layers.empty()) return Status::InvalidArgument("MFetch needs at least one layer");
    std::vector<Decimal> layer_texts;
    layer_texts.reserve(layers.size());
    std::vector<std::string_view> args;
    args.reserve(2 + layers.size());
    args.push_back("SSM.PREFIX.MFETCH");
    args.push_back(sid);
    for (uint32_t layer : layers) {
      PREFIXD_RETURN_IF_ERROR(CheckLayer(layer));
      layer_texts.emplace_back(layer);
      args.push_back(layer_texts.back().view());
    }
    PREFIXD_RETURN_IF_ERROR(Send(args));
    PREFIXD_ASSIGN_OR_RETURN(int64_t count, ReadArrayHead("SSM.PREFIX.MFETCH"));
    if (count != static_cast<int64_t>(layers.size())) {
      return Fail(Status::ProtocolError("SSM.PREFIX.MFETCH asked for " +
                                        std::to_string(layers.size()) + " layers and got " +
                                        std::to_string(count) + " replies"));
    }
    std::vector<std::optional<Blob>> blobs;
    blobs.reserve(layers.size());
    for (size_t i = 0; i < layers.size(); ++i) {
      PREFIXD_ASSIGN_OR_RETURN(std::optional<Blob> blob,
                               ReadBulk("SSM.PREFIX.MFETCH", /*in_array=*/true));
      blobs.push_back(std::move(blob));
    }
    return blobs;
  }

  Result<std::vector<LayerInfo>> Layers(std::string_view sid) {
    const std::array<std::string_view, 2> args{"SSM.PREFIX.LAYERS", sid};
    PREFIXD_RETURN_IF_ERROR(Send(args));
    PREFIXD_ASSIGN_OR_RETURN(int64_t count, ReadArrayHead("SSM.PREFIX.LAYERS"));
    if (count < 0 || count % 2 != 0) {
      return Fail(Status::ProtocolError("SSM.PREFIX.LAYERS replied with " + std::to_string(count) +
                                        " elements, not layer/size pairs"));
    }
    std::vector<LayerInfo> infos;
    infos.reserve(static_cast<size_t>(count / 2));
    for (int64_t i = 0; i < count; i += 2) {
      PREFIXD_ASSIGN_OR_RETURN(int64_t layer, ReadIntegerInArray("SSM.PREFIX.LAYERS"));
      PREFIXD_ASSIGN_OR_RETURN(int64_t size, ReadIntegerInArray("SSM.PREFIX.LAYERS"));
      if (layer < 0 || layer > kMaxLayer || size < 0) {
        return Fail(Status::ProtocolError("SSM.PREFIX.LAYERS replied with layer " +
                                          std::to_string(layer) + " of size " +
                                          std::to_string(size)));
      }
      infos.push_back({static_cast<uint32_t>(layer), static_cast<uint64_t>(size)});
    }
    return infos;
  }

  Result<int64_t> VCreate(std::string_view sid, uint32_t dim, std::string_view vquant) {
    const Decimal dim_text(dim);
    std::vector<std::string_view> args{"V.CREATE", sid, dim_text.view()};
    if (!vquant.empty()) args.insert(args.end(), {"VQUANT", vquant});
    PREFIXD_RETURN_IF_ERROR(Send(args));
    return ReadInteger("V.CREATE");
  }

  Status VStoreBatch(std::string_view sid, uint32_t layer, uint64_t start, uint64_t count,
                     RowFormat format, std::span<const uint8_t> rows) {
    PREFIXD_RETURN_IF_ERROR(CheckLayer(layer));
    if (count == 0) return Status::InvalidArgument("VStoreBatch needs at least one row");
    const std::string_view element_bytes = format == RowFormat::kF32 ? "4" : "2";
    if (rows.size() % (format == RowFormat::kF32 ? 4 : 2) != 0 || rows.size() % count != 0) {
      return Status::InvalidArgument("VStoreBatch: " + std::to_string(rows.size()) +
                                     " bytes are not " + std::to_string(count) + " rows of " +
                                     std::string(element_bytes) + "-byte values");
    }
    const Decimal layer_text(layer), start_text(start), count_text(count);
    std::vector<std::string_view> args{"V.STOREBATCH",    sid,
                                       layer_text.view(), start_text.view(),
                                       count_text.view(), AsChars(rows)};
    if (format == RowFormat::kF16) args.insert(args.end(), {"FMT", "F16"});
    if (format == RowFormat::kBf16) args.insert(args.end(), {"FMT", "BF16"});
    PREFIXD_RETURN_IF_ERROR(Send(args));
    return ReadStatus("OK", "V.STOREBATCH");
  }

  Result<std::optional<size_t>> VFetchRange(std::string_view sid, uint32_t layer, uint64_t start,
                                            uint64_t end, bool native, std::span<uint8_t> out) {
    PREFIXD_RETURN_IF_ERROR(CheckLayer(layer));
    if (end <= start) {
      return Status::InvalidArgument("VFetchRange: end " + std::to_string(end) +
                                     " must exceed start " + std::to_string(start));
    }
    const Decimal layer_text(layer), start_text(start), end_text(end);
    std::vector<std::string_view> args{
        "V.FETCH", sid, layer_text.view(), "RANGE", start_text.view(), end_text.view()};
    if (native) args.insert(args.end(), {"FMT", "NATIVE"});
    PREFIXD_RETURN_IF_ERROR(Send(args));
    PREFIXD_ASSIGN_OR_RETURN(BulkRead read, ReadBulkInto(out, "V.FETCH RANGE"));
    if (read.nil) return std::optional<size_t>();
    if (read.length > out.size()) {
      return Status::OutOfRange("V.FETCH RANGE returned " + std::to_string(read.length) +
                                " bytes; the buffer holds " + std::to_string(out.size()));
    }
    return std::optional<size_t>(static_cast<size_t>(read.length));
  }

  Result<bool> VDrop(std::string_view sid) {
    const std::array<std::string_view, 2> args{"V.DROP", sid};
    PREFIXD_RETURN_IF_ERROR(Send(args));
    PREFIXD_ASSIGN_OR_RETURN(int64_t n, ReadInteger("V.DROP"));
    return n != 0;
  }

  Status KvPrefixRegister(std::string_view ns, uint32_t kv_dim, std::string_view vquant,
                          const KvPrefixOptions& options) {
    if ((options.block_size == 0) != options.block_hashes.empty()) {
      return Status::InvalidArgument(
          "KvPrefixRegister: BLOCKS needs both a block size and the block hashes");
    }
    const Decimal dim_text(kv_dim), block_text(options.block_size),
        count_text(options.block_hashes.size());
    std::vector<std::string_view> args{"KV.PREFIX.REGISTER", ns, dim_text.view(), vquant};
    if (options.block_size != 0) {
      const std::string_view hashes(reinterpret_cast<const char*>(options.block_hashes.data()),
                                    options.block_hashes.size_bytes());
      args.insert(args.end(), {"BLOCKS", block_text.view(), count_text.view(), hashes});
    }
    std::string ms;
    if (options.prefill_ms) {
      ms = MillisText(*options.prefill_ms);
      args.insert(args.end(), {"PREFILL_MS", ms});
    }
    PREFIXD_RETURN_IF_ERROR(Send(args));
    return ReadStatus("OK", "KV.PREFIX.REGISTER");
  }

  Result<bool> KvPrefixLookup(std::string_view ns, std::optional<uint64_t> tokens,
                              std::optional<double> prefill_ms) {
    const Decimal tokens_text(tokens.value_or(0));
    std::string ms;
    std::vector<std::string_view> args{"KV.PREFIX.LOOKUP", ns};
    if (tokens) args.insert(args.end(), {"TOKENS", tokens_text.view()});
    if (prefill_ms) {
      ms = MillisText(*prefill_ms);
      args.insert(args.end(), {"PREFILL_MS", ms});
    }
    PREFIXD_RETURN_IF_ERROR(Send(args));
    PREFIXD_ASSIGN_OR_RETURN(ReplyHead head, ReadHead());
    if (head.type == '-') return Status::ServerError(std::string(head.text));
    if (head.type == '+' && head.text == "HIT") return true;
    if (head.type == '+' && head.text == "MISS") return false;
    return Unexpected(head, "KV.PREFIX.LOOKUP", "+HIT or +MISS");
  }

  Result<int64_t> KvPrefixDrop(std::span<const std::string_view> namespaces) {
    if (namespaces.empty()) return Status::InvalidArgument("KvPrefixDrop needs a namespace");
    std::vector<std::string_view> args{"KV.PREFIX.DROP"};
    args.insert(args.end(), namespaces.begin(), namespaces.end());
    PREFIXD_RETURN_IF_ERROR(Send(args));
    return ReadInteger("KV.PREFIX.DROP");
  }

  Result<Reply> Command(const std::vector<std::string_view>& argv) {
    PREFIXD_RETURN_IF_ERROR(CheckCommand(argv));
    PREFIXD_RETURN_IF_ERROR(Send(argv));
    auto reply = ReadGeneric();
    if (reply.ok() && EqualsIgnoreCase(argv[0], "QUIT")) {
      static_cast<void>(Fail(Status::Unavailable("connection closed by QUIT")));
    }
    return reply;
  }

  static Status CheckCommand(const std::vector<std::string_view>& argv) {
    if (argv.empty()) return Status::InvalidArgument("Command needs a command name");
    const std::string_view name = argv[0];
    for (std::string_view refused :
         {"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "MONITOR", "SYNC", "PSYNC"}) {
      if (EqualsIgnoreCase(name, refused)) {
        return Status::InvalidArgument(std::string(name) +
                                       " streams replies; this request/reply client cannot "
                                       "carry it");
      }
    }
    if (EqualsIgnoreCase(name, "CLIENT") && argv.size() >= 2 &&
        EqualsIgnoreCase(argv[1], "REPLY")) {
      return Status::InvalidArgument(
          "CLIENT REPLY would break the one-reply-per-request rule this client relies on");
    }
    if (EqualsIgnoreCase(name, "HELLO") && argv.size() >= 2 && ParseInteger(argv[1]) == 3) {
      return Status::InvalidArgument("HELLO 3: this client speaks RESP2 only");
    }
    return Status::Ok();
  }

 private:
  Status Usable() const {
    if (ctx_ != nullptr) return Status::Ok();
    return Status::Unavailable(broken_.empty() ? std::string("not connected")
                                               : "connection closed after: " + broken_);
  }

  // Closes the connection after an error that leaves the byte stream out of step; returns `st`.
  Status Fail(Status st) {
    broken_ = st.ToString();
    ctx_.reset();
    in_.Reset(-1);
    out_.Clear();
    return st;
  }

  Status Flush() {
    Status st = out_.Send(ctx_->fd);
    return st.ok() ? st : Fail(std::move(st));
  }

  Status Send(std::span<const std::string_view> args) {
    PREFIXD_RETURN_IF_ERROR(Usable());
    out_.Add(args);
    return Flush();
  }

  void AddRange(std::string_view sid, uint32_t layer, uint64_t offset, uint64_t length) {
    const Decimal layer_text(layer);
    const Decimal offset_text(offset);
    const Decimal length_text(length);
    const std::array<std::string_view, 6> args{"SSM.PREFIX.FETCH", sid,
                                               layer_text.view(),  "RANGE",
                                               offset_text.view(), length_text.view()};
    out_.Add(args);
  }

  Status SendAuth(std::string_view username, std::string_view password) {
    if (username.empty()) {
      const std::array<std::string_view, 2> args{"AUTH", password};
      PREFIXD_RETURN_IF_ERROR(Send(args));
    } else {
      const std::array<std::string_view, 3> args{"AUTH", username, password};
      PREFIXD_RETURN_IF_ERROR(Send(args));
    }
    return ReadStatus("OK", "AUTH");
  }

  Result<ReplyHead> ReadHead() {
    auto line = in_.Line();
    if (!line.ok()) return Fail(line.status());
    if (line->empty()) return Fail(Status::ProtocolError("empty reply line"));
    return ReplyHead{(*line)[0], line->substr(1)};
  }

  Status Unexpected(const ReplyHead& head, std::string_view command, std::string_view wanted) {
    return Fail(Status::ProtocolError(std::string(command) + ": expected " + std::string(wanted) +
                                      ", got " + Describe(head)));
  }

  // A `+<expected>` reply; an error reply becomes kServerError.
  Status ReadStatus(std::string_view expected, std::string_view command) {
    PREFIXD_ASSIGN_OR_RETURN(ReplyHead head, ReadHead());
    if (head.type == '-') return Status::ServerError(std::string(head.text));
    if (head.type != '+' || head.text != expected) {
      return Unexpected(head, command, "+" + std::string(expected));
    }
    return Status::Ok();
  }

  // `*<n>`; an error reply becomes kServerError. A nil array reads as empty.
  Result<int64_t> ReadArrayHead(std::string_view command) {
    PREFIXD_ASSIGN_OR_RETURN(ReplyHead head, ReadHead());
    if (head.type == '-') return Status::ServerError(std::string(head.text));
    std::optional<int64_t> n = ParseInteger(head.text);
    if (head.type != '*' || !n.has_value() || *n < -1) return Unexpected(head, command, "an array");
    return std::max<int64_t>(*n, 0);
  }

  // `:<n>`; an error reply becomes kServerError.
  Result<int64_t> ReadInteger(std::string_view command) {
    PREFIXD_ASSIGN_OR_RETURN(ReplyHead head, ReadHead());
    if (head.type == '-') return Status::ServerError(std::string(head.text));
    std::optional<int64_t> n = ParseInteger(head.text);
    if (head.type != ':' || !n.has_value()) return Unexpected(head, command, "an integer");
    return *n;
  }

  // Milliseconds as the shortest decimal that reads back as the same double.
  static std::string MillisText(double ms) {
    std::array<char, 32> buf{};
    auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), ms);
    return std::string(buf.data(), end);
  }

  Result<int64_t> ReadIntegerInArray(std::string_view command) {
    PREFIXD_ASSIGN_OR_RETURN(ReplyHead head, ReadHead());
    std::optional<int64_t> n = ParseInteger(head.text);
    if (head.type != ':' || !n.has_value()) return Unexpected(head, command, "an integer");
    return *n;
  }

  // The length of a bulk header, nullopt for nil; an error reply outside an array becomes
  // kServerError (inside one it would leave the rest of the array unread, so it is fatal).
  Result<std::optional<uint64_t>> ReadBulkHead(std::string_view command, bool in_array) {
    PREFIXD_ASSIGN_OR_RETURN(ReplyHead head, ReadHead());
    if (head.type == '-' && !in_array) return Status::ServerError(std::string(head.text));
    if (head.type == '_' && head.text.empty()) return std::optional<uint64_t>();  // RESP3 null
    std::optional<int64_t> n = ParseInteger(head.text);
    if (head.type != '$' || !n.has_value() || *n < -1) {
      return Unexpected(head, command, "a bulk string or nil");
    }
    if (*n == -1) return std::optional<uint64_t>();
    if (static_cast<uint64_t>(*n) > options_.max_bulk_bytes) {
      return Fail(Status::ProtocolError("bulk reply of " + std::to_string(*n) +
                                        " bytes is over max_bulk_bytes (" +
                                        std::to_string(options_.max_bulk_bytes) + ")"));
    }
    return std::optional<uint64_t>(static_cast<uint64_t>(*n));
  }

  // One bulk-or-nil reply into a new buffer.
  Result<std::optional<Blob>> ReadBulk(std::string_view command, bool in_array) {
    PREFIXD_ASSIGN_OR_RETURN(std::optional<uint64_t> length, ReadBulkHead(command, in_array));
    if (!length.has_value()) return std::optional<Blob>();
    Blob blob;
    try {
      blob.resize(static_cast<size_t>(*length));
    } catch (const std::bad_alloc&) {
      return Fail(
          Status::ResourceExhausted("no memory for a " + std::to_string(*length) + "-byte reply"));
    }
    Status st = in_.ReadInto(blob.data(), blob.size());
    if (st.ok()) st = in_.ExpectCrlf();
    if (!st.ok()) return Fail(std::move(st));
    return std::optional<Blob>(std::move(blob));
  }

  // One bulk-or-nil reply; its first dst.size() bytes land in `dst`, any rest is discarded.
  Result<BulkRead> ReadBulkInto(std::span<uint8_t> dst,
                                std::string_view command = "SSM.PREFIX.FETCH RANGE") {
    PREFIXD_ASSIGN_OR_RETURN(std::optional<uint64_t> length,
                             ReadBulkHead(command, /*in_array=*/false));
    if (!length.has_value()) return BulkRead{.nil = true};
    const size_t keep = static_cast<size_t>(std::min<uint64_t>(*length, dst.size()));
    Status st = in_.ReadInto(dst.data(), keep);
    if (st.ok()) st = in_.Discard(static_cast<size_t>(*length - keep));
    if (st.ok()) st = in_.ExpectCrlf();
    if (!st.ok()) return Fail(std::move(st));
    return BulkRead{.nil = false, .length = *length};
  }

  // Any reply, parsed by hiredis. Everything buffered is handed to its reader; with one request
  // in flight nothing can follow the reply, and anything that does is a protocol error.
  Result<Reply> ReadGeneric() {
    redisReader* reader = ctx_->reader;
    for (;;) {
      if (in_.available() > 0) {
        if (redisReaderFeed(reader, in_.data(), in_.available()) != REDIS_OK) {
          return Fail(Status::ProtocolError(std::string("reply reader: ") + reader->errstr));
        }
        in_.Consume(in_.available());
      }
      void* raw = nullptr;
      if (redisReaderGetReply(reader, &raw) != REDIS_OK) {
        return Fail(Status::ProtocolError(std::string("malformed reply: ") + reader->errstr));
      }
      if (raw != nullptr) {
        std::unique_ptr<redisReply, ReplyDeleter> reply(static_cast<redisReply*>(raw));
        if (reader->len != reader->pos) {
          return Fail(Status::ProtocolError("the server sent bytes beyond the reply"));
        }
        if (reply->type == REDIS_REPLY_ERROR) {
          return Status::ServerError(std::string(reply->str, reply->len));
        }
        return ConvertReply(*reply);
      }
      Status st = in_.Fill();
      if (!st.ok()) return Fail(std::move(st));
    }
  }

  const bool unix_socket_;
  const std::string address_;
  const int port_;
  const ClientOptions options_;

  std::unique_ptr<redisContext, ContextDeleter> ctx_;
  std::string broken_;  // why the last connection was closed
  RequestBuffer out_;
  Inbox in_;

  bool has_auth_ = false;
  std::string username_;
  std::string password_;
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

Result<Client> Client::Connect(std::string_view host, int port, std::chrono::milliseconds timeout) {
  ClientOptions options;
  options.connect_timeout = timeout;
  options.io_timeout = timeout;
  return Connect(host, port, options);
}

Result<Client> Client::Connect(std::string_view host, int port, const ClientOptions& options) {
  if (port <= 0 || port > 65535) {
    return Status::InvalidArgument("port " + std::to_string(port) + " is not in 1..65535");
  }
  auto impl = std::make_unique<Impl>(false, std::string(host), port, options);
  PREFIXD_RETURN_IF_ERROR(impl->Open());
  return Client(std::move(impl));
}

Result<Client> Client::ConnectUnix(std::string_view path, const ClientOptions& options) {
  auto impl = std::make_unique<Impl>(true, std::string(path), 0, options);
  PREFIXD_RETURN_IF_ERROR(impl->Open());
  return Client(std::move(impl));
}

namespace {
Status MovedFrom() { return Status::Unavailable("this Client was moved from"); }
}  // namespace

bool Client::connected() const { return impl_ != nullptr && impl_->connected(); }

Status Client::Reconnect() { return impl_ ? impl_->Open() : MovedFrom(); }

Status Client::Ping() { return impl_ ? impl_->Ping() : MovedFrom(); }

Status Client::Auth(std::string_view password) {
  return impl_ ? impl_->Auth({}, password) : MovedFrom();
}

Status Client::Auth(std::string_view username, std::string_view password) {
  if (username.empty()) return Status::InvalidArgument("Auth: empty username");
  return impl_ ? impl_->Auth(username, password) : MovedFrom();
}

Status Client::Store(std::string_view sid, uint32_t layer, std::span<const uint8_t> blob) {
  return impl_ ? impl_->Store(sid, layer, AsChars(blob)) : MovedFrom();
}

Status Client::Store(std::string_view sid, uint32_t layer, std::string_view blob) {
  return impl_ ? impl_->Store(sid, layer, blob) : MovedFrom();
}

Result<std::optional<Blob>> Client::Fetch(std::string_view sid, uint32_t layer) {
  if (!impl_) return MovedFrom();
  return impl_->Fetch(sid, layer);
}

Result<std::optional<size_t>> Client::FetchRange(std::string_view sid, uint32_t layer,
                                                 uint64_t offset, uint64_t length,
                                                 std::span<uint8_t> out) {
  if (!impl_) return MovedFrom();
  return impl_->FetchRange(sid, layer, offset, length, out);
}

Result<std::optional<size_t>> Client::FetchInto(std::string_view sid, uint32_t layer,
                                                std::span<uint8_t> out, size_t chunk_bytes,
                                                int depth) {
  if (!impl_) return MovedFrom();
  return impl_->FetchInto(sid, layer, out, chunk_bytes, depth);
}

Status Client::Drop(std::string_view sid) {
  return impl_ ? impl_->Drop(sid, std::nullopt) : MovedFrom();
}

Status Client::Drop(std::string_view sid, uint32_t layer) {
  return impl_ ? impl_->Drop(sid, layer) : MovedFrom();
}

Status Client::MStore(std::string_view sid, std::span<const LayerBlob> layers) {
  return impl_ ? impl_->MStore(sid, layers) : MovedFrom();
}

Result<std::vector<std::optional<Blob>>> Client::MFetch(std::string_view sid,
                                                        std::span<const uint32_t> layers) {
  if (!impl_) return MovedFrom();
  return impl_->MFetch(sid, layers);
}

Result<std::vector<LayerInfo>> Client::Layers(std::string_view sid) {
  if (!impl_) return MovedFrom();
  return impl_->Layers(sid);
}

Result<int64_t> Client::VCreate(std::string_view sid, uint32_t dim, std::string_view vquant) {
  if (!impl_) return MovedFrom();
  return impl_->VCreate(sid, dim, vquant);
}

Status Client::VStoreBatch(std::string_view sid, uint32_t layer, uint64_t start, uint64_t count,
                           RowFormat format, std::span<const uint8_t> rows) {
  return impl_ ? impl_->VStoreBatch(sid, layer, start, count, format, rows) : MovedFrom();
}

Status Client::VStoreBatch(std::string_view sid, uint32_t layer, uint64_t start, uint64_t count,
                           std::span<const float> rows) {
  return VStoreBatch(
      sid, layer, start, count, RowFormat::kF32,
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(rows.data()), rows.size_bytes()));
}

Status Client::VStoreBatch(std::string_view sid, uint32_t layer, uint64_t start, uint64_t count,
                           RowFormat format, std::span<const uint16_t> rows) {
  if (format == RowFormat::kF32) {
    return Status::InvalidArgument("VStoreBatch: 16-bit values need RowFormat kF16 or kBf16");
  }
  return VStoreBatch(
      sid, layer, start, count, format,
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(rows.data()), rows.size_bytes()));
}

Result<std::optional<size_t>> Client::VFetchRange(std::string_view sid, uint32_t layer,
                                                  uint64_t start, uint64_t end,
                                                  std::span<float> out) {
  if (!impl_) return MovedFrom();
  std::span<uint8_t> bytes(reinterpret_cast<uint8_t*>(out.data()), out.size_bytes());
  PREFIXD_ASSIGN_OR_RETURN(std::optional<size_t> got,
                           impl_->VFetchRange(sid, layer, start, end, false, bytes));
  if (!got) return got;
  return std::optional<size_t>(*got / sizeof(float));
}

Result<std::optional<size_t>> Client::VFetchRangeNative(std::string_view sid, uint32_t layer,
                                                        uint64_t start, uint64_t end,
                                                        std::span<uint8_t> out) {
  if (!impl_) return MovedFrom();
  return impl_->VFetchRange(sid, layer, start, end, true, out);
}

Result<bool> Client::VDrop(std::string_view sid) {
  if (!impl_) return MovedFrom();
  return impl_->VDrop(sid);
}

Status Client::KvPrefixRegister(std::string_view ns, uint32_t kv_dim, std::string_view vquant,
                                const KvPrefixOptions& options) {
  return impl_ ? impl_->KvPrefixRegister(ns, kv_dim, vquant, options) : MovedFrom();
}

Result<bool> Client::KvPrefixLookup(std::string_view ns, std::optional<uint64_t> tokens,
                                    std::optional<double> prefill_ms) {
  if (!impl_) return MovedFrom();
  return impl_->KvPrefixLookup(ns, tokens, prefill_ms);
}

Result<int64_t> Client::KvPrefixDrop(std::span<const std::string_view> namespaces) {
  if (!impl_) return MovedFrom();
  return impl_->KvPrefixDrop(namespaces);
}

Result<Reply> Client::Command(const std::vector<std::string_view>& argv) {
  if (!impl_) return MovedFrom();
  return impl_->Command(argv);
}

}  // namespace prefixd
