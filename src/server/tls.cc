#include "server/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <asio/ssl.hpp>
#include <sstream>

namespace prefixd::server {
namespace {

constexpr size_t kReadAheadBytes = 128 * 1024;

bool Fail(std::string* error, const std::string& what) {
  std::string reasons = TakeOpenSslErrors();
  *error = what + ": " + (reasons.empty() ? "unknown OpenSSL error" : reasons);
  return false;
}

// "TLSv1.2 TLSv1.3" -> the SSL_OP_NO_* options that leave exactly those on, as Redis does.
bool ProtocolOptions(const std::string& protocols, long* options, std::string* error) {
  if (protocols.empty()) {
    *options = SSL_OP_NO_SSLv2 | SSL_OP_NO_SSLv3 | SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1;
    return true;
  }
  long off = SSL_OP_NO_SSLv2 | SSL_OP_NO_SSLv3 | SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1 |
             SSL_OP_NO_TLSv1_2 | SSL_OP_NO_TLSv1_3;
  std::istringstream words(protocols);
  std::string word;
  while (words >> word) {
    if (strcasecmp(word.c_str(), "tlsv1") == 0) {
      off &= ~SSL_OP_NO_TLSv1;
    } else if (strcasecmp(word.c_str(), "tlsv1.1") == 0) {
      off &= ~SSL_OP_NO_TLSv1_1;
    } else if (strcasecmp(word.c_str(), "tlsv1.2") == 0) {
      off &= ~SSL_OP_NO_TLSv1_2;
    } else if (strcasecmp(word.c_str(), "tlsv1.3") == 0) {
      off &= ~SSL_OP_NO_TLSv1_3;
    } else {
      *error =
          "Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' "
          "and 'TLSv1.3'.";
      return false;
    }
  }
  *options = off;
  return true;
}

bool Configure(asio::ssl::context& context, const TlsOptions& o, std::string* error) {
  SSL_CTX* ctx = context.native_handle();
  if (o.cert_file.empty() || o.key_file.empty()) {
    *error = "tls-cert-file and tls-key-file must both be set";
    return false;
  }
  if (o.auth_clients != TlsClientAuth::kNo && o.ca_cert_file.empty() && o.ca_cert_dir.empty()) {
    // Redis's text: a client certificate can only be checked against a CA.
    *error =
        "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, "
        "tls-replication or tls-auth-clients are enabled!";
    return false;
  }
  long protocol_options = 0;
  if (!ProtocolOptions(o.protocols, &protocol_options, error)) return false;
  SSL_CTX_set_options(ctx, protocol_options | SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_SINGLE_DH_USE | SSL_OP_SINGLE_ECDH_USE);
  if (o.prefer_server_ciphers) SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
  // One recv() brings in as many records as have arrived (a large argument is many records).
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, kReadAheadBytes);

  if (o.session_caching) {
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    SSL_CTX_sess_set_cache_size(ctx, o.session_cache_size);
    SSL_CTX_set_timeout(ctx, o.session_cache_timeout);
    static const unsigned char kSessionContext[] = "prefixd";
    SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1);
  } else {
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  }

  if (!o.key_file_pass.empty()) {
    std::string pass = o.key_file_pass;
    context.set_password_callback(
        [pass](std::size_t, asio::ssl::context::password_purpose) { return pass; });
  }
  if (SSL_CTX_use_certificate_chain_file(ctx, o.cert_file.c_str()) <= 0) {
    return Fail(error, "Failed to load certificate: " + o.cert_file);
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, o.key_file.c_str(), SSL_FILETYPE_PEM) <= 0) {
    return Fail(error, "Failed to load private key: " + o.key_file);
  }
  if (SSL_CTX_check_private_key(ctx) <= 0) {
    return Fail(error, "tls-key-file does not match tls-cert-file");
  }
  if (!o.ca_cert_file.empty() || !o.ca_cert_dir.empty()) {
    const char* file = o.ca_cert_file.empty() ? nullptr : o.ca_cert_file.c_str();
    const char* dir = o.ca_cert_dir.empty() ? nullptr : o.ca_cert_dir.c_str();
    if (SSL_CTX_load_verify_locations(ctx, file, dir) <= 0) {
      return Fail(error, "Failed to configure CA certificate(s) file/directory");
    }
  }
  if (!o.ciphers.empty() && SSL_CTX_set_cipher_list(ctx, o.ciphers.c_str()) <= 0) {
    return Fail(error, "Failed to configure ciphers: " + o.ciphers);
  }
  if (!o.ciphersuites.empty() && SSL_CTX_set_ciphersuites(ctx, o.ciphersuites.c_str()) <= 0) {
    return Fail(error, "Failed to configure ciphersuites: " + o.ciphersuites);
  }
  int verify = SSL_VERIFY_NONE;
  if (o.auth_clients == TlsClientAuth::kYes) {
    verify = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
  } else if (o.auth_clients == TlsClientAuth::kOptional) {
    verify = SSL_VERIFY_PEER;
  }
  SSL_CTX_set_verify(ctx, verify, nullptr);
  return true;
}

}  // namespace

std::shared_ptr<asio::ssl::context> MakeTlsContext(const TlsOptions& options, std::string* error) {
  ERR_clear_error();
  auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  if (!Configure(*context, options, error)) return nullptr;
  return context;
}

std::string TakeOpenSslErrors() {
  std::string out;
  while (unsigned long code = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

}  // namespace prefixd::server
