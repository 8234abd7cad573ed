#include "connection.h"

#include <sys/time.h>

#include <array>
#include <utility>

namespace prefixd {
namespace {

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

}  // namespace

Client::Impl::Impl(bool unix_socket, std::string address, int port, const ClientOptions& options)
    : unix_socket_(unix_socket),
      address_(std::move(address)),
      port_(port),
      options_(options),
      in_(options.max_bulk_bytes, [this](Status st) { return Fail(std::move(st)); }) {}

Status Client::Impl::Open() {
  ctx_.reset();
  in_.Reset(-1);
  out_.Clear();
  redisContext* raw = nullptr;
  const bool timed = options_.connect_timeout.count() > 0;
  if (unix_socket_) {
    raw = timed ? redisConnectUnixWithTimeout(address_.c_str(), ToTimeval(options_.connect_timeout))
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

Status Client::Impl::Auth(std::string_view username, std::string_view password) {
  PREFIXD_RETURN_IF_ERROR(Usable());
  PREFIXD_RETURN_IF_ERROR(SendAuth(username, password));
  username_ = username;
  password_ = password;
  has_auth_ = true;
  return Status::Ok();
}

Status Client::Impl::Usable() const {
  if (ctx_ != nullptr) return Status::Ok();
  return Status::Unavailable(broken_.empty() ? std::string("not connected")
                                             : "connection closed after: " + broken_);
}

Status Client::Impl::Fail(Status st) {
  broken_ = st.ToString();
  ctx_.reset();
  in_.Reset(-1);
  out_.Clear();
  return st;
}

Status Client::Impl::Flush() {
  Status st = out_.Send(ctx_->fd);
  return st.ok() ? st : Fail(std::move(st));
}

Status Client::Impl::Send(std::span<const std::string_view> args) {
  PREFIXD_RETURN_IF_ERROR(Usable());
  out_.Add(args);
  return Flush();
}

Status Client::Impl::SendAuth(std::string_view username, std::string_view password) {
  if (username.empty()) {
    const std::array<std::string_view, 2> args{"AUTH", password};
    PREFIXD_RETURN_IF_ERROR(Send(args));
  } else {
    const std::array<std::string_view, 3> args{"AUTH", username, password};
    PREFIXD_RETURN_IF_ERROR(Send(args));
  }
  return in_.ReadStatus("OK", "AUTH");
}

namespace client_internal {

Status MovedFrom() { return Status::Unavailable("this Client was moved from"); }

Status CheckLayer(uint32_t layer) {
  if (layer > kMaxLayer) {
    return Status::InvalidArgument("layer " + std::to_string(layer) + " is over the maximum " +
                                   std::to_string(kMaxLayer));
  }
  return Status::Ok();
}

}  // namespace client_internal
}  // namespace prefixd
