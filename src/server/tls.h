// TLS configuration: Redis's tls-* directives as a plain value, and the OpenSSL context built from
// them. A context is immutable once built; reloading builds a new one (any thread), and each
// connection keeps the one it was accepted with.
#pragma once

#include <memory>
#include <string>

namespace asio::ssl {
class context;
}

namespace prefixd::server {

enum class TlsClientAuth { kNo, kYes, kOptional };

struct TlsOptions {
  std::string cert_file;
  std::string key_file;
  std::string key_file_pass;
  std::string ca_cert_file;
  std::string ca_cert_dir;
  TlsClientAuth auth_clients = TlsClientAuth::kYes;
  std::string protocols;     // e.g. "TLSv1.2 TLSv1.3"; empty: those two
  std::string ciphers;       // TLSv1.2 and below; empty: OpenSSL's default
  std::string ciphersuites;  // TLSv1.3; empty: OpenSSL's default
  bool prefer_server_ciphers = false;
  bool session_caching = true;
  int session_cache_size = 20 * 1024;
  int session_cache_timeout = 300;
};

// Loads the certificates and key and applies every option. On failure returns nullptr and sets
// `error` to a message naming the file or option at fault (OpenSSL's reason appended).
std::shared_ptr<asio::ssl::context> MakeTlsContext(const TlsOptions& options, std::string* error);

// OpenSSL's reasons for the calling thread's last failures, oldest first, joined with "; ", and
// the thread's error queue cleared. Empty when the queue held nothing.
std::string TakeOpenSslErrors();

}  // namespace prefixd::server
