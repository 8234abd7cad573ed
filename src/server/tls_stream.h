// TlsStream: one server-side TLS session over a connected TCP socket, driven from a coroutine on
// the socket's io thread (only that thread may touch it). OpenSSL reads and writes the
// non-blocking socket itself, as Redis does: plaintext goes from the caller's buffers (a stored
// value, for a large reply) straight into SSL_write, and SSL_read decrypts straight into the
// caller's buffer (a large argument's final buffer), with read-ahead so that one recv() brings in
// many records.
#pragma once

#include <openssl/ssl.h>

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
  // Reads at least one byte of plaintext into `out`. Throws std::system_error on EOF (also a TLS
  // close_notify), a closed socket or a TLS error.
  asio::awaitable<size_t> ReadSome(asio::mutable_buffer out);
  // Writes every byte of `pieces`, in order. Throws std::system_error on failure.
  asio::awaitable<size_t> WriteAll(std::span<const asio::const_buffer> pieces);
  // Bytes received and not yet read: on the socket, or already inside OpenSSL (read-ahead);
  // the latter counts as 1 when OpenSSL does not say how many.
  size_t BytesWaiting();

 private:
  // Waits until the socket can make progress on what OpenSSL asked for; throws on a TLS error.
  asio::awaitable<void> WaitFor(int ssl_result, const char* what);

  // Encrypts `data` (records up to 16 KiB each) and sends them.
  asio::awaitable<void> Send(const char* data, size_t size);

  asio::ip::tcp::socket socket_;
  SSL* ssl_ = nullptr;
  // Small pieces of a gather write (reply headers, short replies) are joined here first, so that
  // they travel in one record rather than one record (and one send) each.
  std::string small_;
};

}  // namespace prefixd::server
