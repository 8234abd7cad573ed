#include "server/tls_stream.h"

#include "server/tls.h"

#include <openssl/err.h>

#include <system_error>

namespace prefixd::server {
namespace {

// Replies at least this large are written through a buffer of kCoalesceBytes.
constexpr size_t kCoalesceThreshold = 256 * 1024;
constexpr long kCoalesceBytes = 256 * 1024;

[[noreturn]] void ThrowTls(const char* what) {
  std::string reason = TakeOpenSslErrors();
  throw std::system_error(std::make_error_code(std::errc::protocol_error),
                          std::string(what) + (reason.empty() ? "" : ": " + reason));
}

}  // namespace

TlsStream::TlsStream(asio::ip::tcp::socket socket, SSL_CTX* context)
    : socket_(std::move(socket)), ssl_(SSL_new(context)) {
  if (ssl_ == nullptr) ThrowTls("SSL_new");
  asio::error_code ec;
  socket_.non_blocking(true, ec);
  SSL_set_fd(ssl_, static_cast<int>(socket_.native_handle()));
  SSL_set_accept_state(ssl_);
  // Write as much of a buffer as the socket takes and return, so the caller can wait for room
  // (the buffer may be passed again at another address); release record buffers when idle.
  SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                         SSL_MODE_RELEASE_BUFFERS);
}

TlsStream::~TlsStream() { SSL_free(ssl_); }

asio::awaitable<void> TlsStream::WaitFor(int ssl_result, const char* what) {
  const int error = SSL_get_error(ssl_, ssl_result);
  if (error == SSL_ERROR_WANT_READ) {
    co_await socket_.async_wait(asio::socket_base::wait_read, asio::use_awaitable);
  } else if (error == SSL_ERROR_WANT_WRITE) {
    co_await socket_.async_wait(asio::socket_base::wait_write, asio::use_awaitable);
  } else {
    ThrowFailure(error, what);
  }
}

void TlsStream::ThrowFailure(int ssl_error, const char* what) {
  if (ssl_error == SSL_ERROR_ZERO_RETURN) throw std::system_error(asio::error::eof);
  if (ssl_error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
    // EOF without close_notify, or a reset: the peer is gone.
    throw std::system_error(errno != 0 ? std::error_code(errno, std::system_category())
                                       : std::error_code(asio::error::eof));
  }
  ThrowTls(what);
}

asio::awaitable<std::string> TlsStream::Handshake() {
  ERR_clear_error();
  try {
    while (true) {
      int r = SSL_do_handshake(ssl_);
      if (r == 1) co_return std::string();
      co_await WaitFor(r, "TLS handshake");
    }
  } catch (const std::system_error& e) {
    co_return std::string(e.what());
  }
}

size_t TlsStream::TryRead(std::span<const iovec> pieces) {
  size_t got = 0;
  for (const iovec& piece : pieces) {
    char* data = static_cast<char*>(piece.iov_base);
    size_t filled = 0;
    while (filled < piece.iov_len) {
      size_t n = 0;
      ERR_clear_error();
      errno = 0;
      const int r = SSL_read_ex(ssl_, data + filled, piece.iov_len - filled, &n);
      if (r == 1) {
        filled += n;
        // One record at a time: take every record already received, and stop there rather
        // than ask the socket again.
        if (SSL_has_pending(ssl_)) continue;
        return got + filled;
      }
      if (got + filled > 0) return got + filled;  // what failed is reported by the next call
      const int error = SSL_get_error(ssl_, r);
      if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
        read_wants_ = error;
        return 0;
      }
      ThrowFailure(error, "TLS read");
    }
    got += filled;
  }
  return got;
}

asio::awaitable<void> TlsStream::WaitReadable() {
  const auto wait = read_wants_ == SSL_ERROR_WANT_WRITE ? asio::socket_base::wait_write
                                                        : asio::socket_base::wait_read;
  co_await socket_.async_wait(wait, asio::use_awaitable);
}

asio::awaitable<void> TlsStream::Send(const char* data, size_t size) {
  while (size > 0) {
    size_t n = 0;
    ERR_clear_error();
    errno = 0;
    int r = SSL_write_ex(ssl_, data, size, &n);
    if (r == 1) {
      data += n, size -= n;
      continue;
    }
    co_await WaitFor(r, "TLS write");
  }
}

asio::awaitable<size_t> TlsStream::WriteAll(std::span<const asio::const_buffer> pieces) {
  constexpr size_t kRecord = 16 * 1024;  // TLS's largest record
  size_t total = 0;
  for (const asio::const_buffer& piece : pieces) total += piece.size();
  // A large reply is many records; sent one send() each, every record would also wake the
  // reader. Gather them into larger writes for this reply only (no memory held between replies).
  BIO* coalescing = nullptr;
  if (total >= kCoalesceThreshold) {
    BIO* socket_bio = SSL_get_wbio(ssl_);
    coalescing = BIO_new(BIO_f_buffer());
    if (coalescing != nullptr && BIO_set_write_buffer_size(coalescing, kCoalesceBytes) == 1) {
      BIO_up_ref(socket_bio);
      BIO_push(coalescing, socket_bio);
      SSL_set0_wbio(ssl_, coalescing);  // drops the reference the SSL held on the socket BIO
    } else if (coalescing != nullptr) {
      BIO_free(coalescing);
      coalescing = nullptr;
    }
  }
  small_.clear();
  for (const asio::const_buffer& piece : pieces) {
    const char* data = static_cast<const char*>(piece.data());
    if (small_.size() + piece.size() <= kRecord) {
      small_.append(data, piece.size());
      continue;
    }
    if (!small_.empty()) {
      co_await Send(small_.data(), small_.size());
      small_.clear();
    }
    // A large piece (a stored value) is encrypted from where it lies.
    if (piece.size() >= kRecord) {
      co_await Send(data, piece.size());
    } else {
      small_.append(data, piece.size());
    }
  }
  if (!small_.empty()) co_await Send(small_.data(), small_.size());
  if (coalescing != nullptr) {
    while (true) {
      ERR_clear_error();
      if (BIO_flush(coalescing) > 0) break;
      if (!BIO_should_retry(coalescing)) ThrowTls("TLS write");
      co_await socket_.async_wait(asio::socket_base::wait_write, asio::use_awaitable);
    }
    BIO* socket_bio = BIO_next(coalescing);
    BIO_up_ref(socket_bio);
    SSL_set0_wbio(ssl_, socket_bio);  // frees the buffer, back to writing the socket directly
  }
  co_return total;
}

}  // namespace prefixd::server
