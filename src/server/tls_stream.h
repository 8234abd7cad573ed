// TlsStream: one server-side TLS session over a connected TCP socket, driven from a coroutine on
// the socket's io thread (only that thread may touch it). OpenSSL reads and writes the
// non-blocking socket itself, as Redis does: plaintext goes from the caller's buffers (a stored
// value, for a large reply) straight into SSL_write, and SSL_read decrypts straight into the
// caller's buffer (a large argument's final buffer), with read-ahead so that one recv() brings in
// many records.
#pragma once

#include <openssl/ssl.h>
#include <sys/uio.h>

#include <asio.hpp>
#include <span>
#include <string>

namespace prefixd::server {

class TlsStream {
 public:
  // `context` must outlive the stream.
  TlsStream(asio::ip::tcp::socket socket, SSL_CTX* context);
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  asio::ip::tcp::socket& lowest_layer() { return socket_; }
  auto get_executor() { return socket_.get_executor(); }

  // Completes the server side of the handshake. Returns OpenSSL's reason on failure (a client
  // that speaks plain text, a missing or untrusted client certificate), empty on success.
  asio::awaitable<std::string> Handshake();
  // Reads the plaintext already available into `pieces`, in order, without waiting: every record
  // OpenSSL holds and whatever the socket has. 0: none yet (WaitReadable, then try again).
  // Throws std::system_error on EOF (also a TLS close_notify), a closed socket or a TLS error.
  size_t TryRead(std::span<const iovec> pieces);
  // Waits until the socket can give what the last TryRead that read nothing asked for.
  asio::awaitable<void> WaitReadable();
  // Writes every byte of `pieces`, in order. Throws std::system_error on failure.
  asio::awaitable<size_t> WriteAll(std::span<const asio::const_buffer> pieces);

 private:
  // Waits until the socket can make progress on what OpenSSL asked for; throws on a TLS error.
  asio::awaitable<void> WaitFor(int ssl_result, const char* what);
  // Throws for an SSL_get_error result other than a wish to read or write.
  [[noreturn]] void ThrowFailure(int ssl_error, const char* what);

  // Encrypts `data` (records up to 16 KiB each) and sends them.
  asio::awaitable<void> Send(const char* data, size_t size);

  asio::ip::tcp::socket socket_;
  SSL* ssl_ = nullptr;
  int read_wants_ = SSL_ERROR_WANT_READ;  // what the last empty TryRead waits for
  // Small pieces of a gather write (reply headers, short replies) are joined here first, so that
  // they travel in one record rather than one record (and one send) each.
  std::string small_;
};

}  // namespace prefixd::server
