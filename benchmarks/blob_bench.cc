// prefixd-blob-bench: a raw-socket load generator for large blobs over RESP, an LMCache-shaped
// chunk workload, and a loopback TCP ceiling. redis-cli and redis-benchmark copy and format values
// themselves and become the bottleneck at megabytes per request; this client pre-encodes each
// request header, sends header and blob with one sendmsg (no client copy), and reads replies into
// a reusable, pre-faulted buffer.
//
//   prefixd-blob-bench --mode prefixd|strings --port P --size 16m --clients 4 --requests 48
//   prefixd-blob-bench --mode lmcache --port P --size 4m --clients 12 --requests 600 --seconds 20
//   prefixd-blob-bench --mode loopback --size 1m --requests 4096
//   prefixd-blob-bench --mode strings --transport unix --socket /tmp/p.sock --size 16m
//   prefixd-blob-bench --mode memcpy --size 16m --requests 48
//
// prefixd mode uses SSM.PREFIX.STORE/FETCH; strings mode (also spelled redis) uses SET/GET, which
// both servers speak.
// Each client thread owns one connection and runs its share of the stores, then (after all
// clients finish storing) its share of the fetches, on its own key. Every phase prints one JSON
// line: ops/s, payload GB/s (10^9 bytes), p50/p99 latency in ms. Fetched bytes are checked
// against the last stored blob on the first and last fetch of each client (after the timed phase,
// so checking costs no time), or on every fetch with --verify all (inline, and timed). The fetch
// line also gives server_cpu_ms: the server's CPU time (INFO cpu) over the fetch phase.
// With --tls-cacert (and --tls-cert/--tls-key for a client certificate) every connection speaks
// TLS through OpenSSL (SSL_write straight from the blob, SSL_read straight into the reply buffer).
// --transport unix (with --socket PATH) speaks over a unix socket instead of TCP; memcpy mode is
// the same-host reference: one thread copying blobs of the same size inside this process.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "prefixd/shm.h"

namespace prefixd::bench {
namespace {

using Clock = std::chrono::steady_clock;

enum class Mode { kPrefixd, kStrings, kLmcache, kLoopback, kMemcpy };

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kPrefixd:
      return "prefixd";
    case Mode::kStrings:
      return "strings";
    case Mode::kLmcache:
      return "lmcache";
    case Mode::kLoopback:
      return "loopback";
    case Mode::kMemcpy:
      return "memcpy";
  }
  return "?";
}

// shm: stores go over the unix socket; fetches are SHM.GET through the shared arenas.
enum class Transport { kTcp, kUnix, kShm };

const char* TransportName(Transport transport) {
  switch (transport) {
    case Transport::kTcp:
      return "tcp";
    case Transport::kUnix:
      return "unix";
    case Transport::kShm:
      return "shm";
  }
  return "?";
}

enum class Verify { kFirstLast, kAll, kNone };

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  Transport transport = Transport::kTcp;
  std::string socket_path;   // --transport unix
  bool store_memfd = false;  // --store memfd: stores by SHM.SET of a sealed memfd (--transport shm)
  bool memfd_filled_untimed = false;  // --store memfd-filled: memfd made outside the timed part
  bool store_call = false;  // --store call: stores by SHM.CALL, the blob in a sealed memfd
  Mode mode = Mode::kPrefixd;
  size_t size = 1 << 20;
  int clients = 1;
  int64_t requests = 100;  // in total, split over the clients
  double seconds = 0;      // per phase; 0: no time cap
  int warmup = 1;          // untimed store+fetch rounds per client
  Verify verify = Verify::kFirstLast;
  std::string key = "bench";
  int chunks = 8;      // lmcache: distinct chunk hashes per worker, cycled through
  int timeout_s = 60;  // socket send/receive timeout: a stuck server fails the run, not hangs it
  std::string tls_cacert;  // non-empty: TLS
  std::string tls_cert;
  std::string tls_key;
};

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "prefixd-blob-bench: %s\n", message.c_str());
  std::exit(1);
}

[[noreturn]] void DieErrno(const std::string& what) { Die(what + ": " + std::strerror(errno)); }

// "1048576", "64k", "16m", "1g" (binary multiples).
std::optional<size_t> ParseSize(std::string_view text) {
  size_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string_view unit(end, text.data() + text.size() - end);
  if (unit.empty() || unit == "b") return value;
  if (unit == "k" || unit == "kb") return value << 10;
  if (unit == "m" || unit == "mb") return value << 20;
  if (unit == "g" || unit == "gb") return value << 30;
  return std::nullopt;
}

void Usage() {
  std::fprintf(stderr,
               "usage: prefixd-blob-bench --mode prefixd|strings|lmcache|loopback|memcpy\n"
               "         [--transport tcp|unix|shm] [--host H] [--port P] [--socket PATH]\n"
               "         [--size BYTES[k|m|g]] [--clients N] [--requests N]\n"
               "         [--seconds S] [--warmup N] [--verify first-last|all|none] [--key PREFIX]\n"
               "         [--chunks N] [--timeout S] [--tls-cacert F [--tls-cert F --tls-key F]]\n"
               "  prefixd: SSM.PREFIX.STORE/FETCH <key>:<client> 0; strings (or redis): SET/GET\n"
               "  <key>:<client>. --requests is the total per phase, split over the clients;\n"
               "  --seconds caps each phase.\n"
               "  lmcache: each client is one LMCache worker cycling over --chunks chunk keys\n"
               "  <model>@<clients>@<worker>@<chunk hash hex>@bfloat16 (--key sets <model>,\n"
               "  by default meta-llama/Llama-3.1-8B-Instruct): SET <key>kv_bytes <size>,\n"
               "  SET <key>metadata <28 B>, EXISTS <key>metadata, GET <key>metadata,\n"
               "  GET <key>kv_bytes; --requests cycles in total. loopback: one thread sends\n"
               "  size*requests bytes over 127.0.0.1 in size-byte send() calls, another\n"
               "  receives them (the copy-path ceiling). memcpy: one thread copies a size-byte\n"
               "  blob --requests times into another buffer in this process (the same-host\n"
               "  reference; no server). --transport unix connects to --socket PATH; shm\n"
               "  (strings mode, a server with --shm-arenas yes) stores over it and fetches\n"
               "  with SHM.GET: phase \"view\" times SHM.GET to a usable pointer, \"copy\" that\n"
               "  plus a memcpy into a private buffer (SHM.RELEASE after each, untimed).\n"
               "  --store memfd (with --transport shm) stores by SHM.SET: each store makes a\n"
               "  memfd, copies the blob into it, seals it and passes it (the server adopts it\n"
               "  without a copy); the default, --store socket, sends the bytes (SET).\n"
               "  --store memfd-filled times only SHM.SET: the memfd is made, filled and\n"
               "  sealed before each timed store (the phase is the sum of SHM.SET times).\n"
               "  --store call (with --transport unix or shm) sends the store (SSM.PREFIX.STORE,\n"
               "  or SET) as SHM.CALL: each store makes a memfd, copies the blob into it, seals\n"
               "  it and passes it; fetches go as the transport says.\n");
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  bool key_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") Usage(), std::exit(0);
    if (i + 1 >= argc) Usage(), Die("missing value for " + std::string(flag));
    std::string_view value = argv[++i];
    auto integer = [&]() -> int64_t {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || end != value.data() + value.size() || v < 0) {
        Die("bad value for " + std::string(flag) + ": '" + std::string(value) + "'");
      }
      return v;
    };
    if (flag == "--host") {
      o.host = value;
    } else if (flag == "--transport") {
      if (value == "tcp") {
        o.transport = Transport::kTcp;
      } else if (value == "unix") {
        o.transport = Transport::kUnix;
      } else if (value == "shm") {
        o.transport = Transport::kShm;
      } else {
        Die("unknown transport '" + std::string(value) + "'");
      }
    } else if (flag == "--store") {
      if (value != "socket" && value != "memfd" && value != "memfd-filled" && value != "call") {
        Die("--store is socket, memfd, memfd-filled or call");
      }
      o.store_call = value == "call";
      o.store_memfd = value == "memfd" || value == "memfd-filled";
      o.memfd_filled_untimed = value == "memfd-filled";
    } else if (flag == "--socket") {
      o.socket_path = value;
    } else if (flag == "--port") {
      o.port = static_cast<int>(integer());
    } else if (flag == "--mode") {
      if (value == "prefixd") {
        o.mode = Mode::kPrefixd;
      } else if (value == "strings" || value == "redis") {
        o.mode = Mode::kStrings;
      } else if (value == "lmcache") {
        o.mode = Mode::kLmcache;
      } else if (value == "loopback") {
        o.mode = Mode::kLoopback;
      } else if (value == "memcpy") {
        o.mode = Mode::kMemcpy;
      } else {
        Die("unknown mode '" + std::string(value) + "'");
      }
    } else if (flag == "--size") {
      auto s = ParseSize(value);
      if (!s || *s == 0) Die("bad size '" + std::string(value) + "'");
      o.size = *s;
    } else if (flag == "--clients") {
      o.clients = static_cast<int>(std::max<int64_t>(1, integer()));
    } else if (flag == "--requests") {
      o.requests = std::max<int64_t>(1, integer());
    } else if (flag == "--seconds") {
      o.seconds = std::atof(std::string(value).c_str());
    } else if (flag == "--warmup") {
      o.warmup = static_cast<int>(integer());
    } else if (flag == "--verify") {
      if (value == "first-last") {
        o.verify = Verify::kFirstLast;
      } else if (value == "all") {
        o.verify = Verify::kAll;
      } else if (value == "none") {
        o.verify = Verify::kNone;
      } else {
        Die("unknown --verify '" + std::string(value) + "'");
      }
    } else if (flag == "--key") {
      o.key = value;
      key_given = true;
    } else if (flag == "--chunks") {
      o.chunks = static_cast<int>(std::max<int64_t>(1, integer()));
    } else if (flag == "--timeout") {
      o.timeout_s = static_cast<int>(integer());
    } else if (flag == "--tls-cacert") {
      o.tls_cacert = value;
    } else if (flag == "--tls-cert") {
      o.tls_cert = value;
    } else if (flag == "--tls-key") {
      o.tls_key = value;
    } else {
      Usage();
      Die("unknown flag " + std::string(flag));
    }
  }
  const bool served = o.mode != Mode::kLoopback && o.mode != Mode::kMemcpy;
  if (served && o.transport == Transport::kTcp && o.port == 0) Die("--port is required");
  if (served && o.transport != Transport::kTcp && o.socket_path.empty()) {
    Die("--transport " + std::string(TransportName(o.transport)) + " needs --socket PATH");
  }
  if (o.transport != Transport::kTcp && !o.tls_cacert.empty()) Die("TLS is over TCP only");
  if (o.store_memfd && o.transport != Transport::kShm) Die("--store memfd needs --transport shm");
  if (o.store_call && o.transport == Transport::kTcp) Die("--store call needs the unix socket");
  if (o.transport == Transport::kShm && o.mode != Mode::kStrings) {
    Die("--transport shm reads strings (SHM.GET): use --mode strings");
  }
  if (o.mode == Mode::kLmcache && !key_given) o.key = "meta-llama/Llama-3.1-8B-Instruct";
  if (o.requests < o.clients) o.requests = o.clients;
  return o;
}

void SetTimeouts(int fd, const Options& o) {
  timeval tv{o.timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

int ConnectUnix(const Options& o) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) DieErrno("socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (o.socket_path.size() >= sizeof addr.sun_path) Die("socket path too long");
  std::memcpy(addr.sun_path, o.socket_path.data(), o.socket_path.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    DieErrno("connect " + o.socket_path);
  }
  SetTimeouts(fd, o);
  return fd;
}

int Connect(const Options& o) {
  if (o.transport != Transport::kTcp) return ConnectUnix(o);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) DieErrno("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(o.port));
  if (::inet_pton(AF_INET, o.host.c_str(), &addr.sin_addr) != 1) Die("bad host " + o.host);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    DieErrno("connect " + o.host + ":" + std::to_string(o.port));
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  SetTimeouts(fd, o);
  return fd;
}

// Sends every byte of `iov` (modified in place as it goes).
void SendAll(int fd, iovec* iov, int count) {
  while (count > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      DieErrno("send");
    }
    auto left = static_cast<size_t>(n);
    while (count > 0 && left >= iov->iov_len) left -= iov->iov_len, ++iov, --count;
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
}

// Receives into buf[have, cap); returns the new fill. MSG_WAITALL when `exact`.
size_t RecvSome(int fd, char* buf, size_t have, size_t want, bool exact) {
  while (true) {
    ssize_t n = ::recv(fd, buf + have, want - have, exact ? MSG_WAITALL : 0);
    if (n > 0) return have + static_cast<size_t>(n);
    if (n == 0) Die("server closed the connection");
    if (errno != EINTR) DieErrno("recv");
  }
}

[[noreturn]] void DieTls(const std::string& what) {
  char buf[256] = "unknown error";
  if (unsigned long code = ERR_get_error()) ERR_error_string_n(code, buf, sizeof buf);
  Die(what + ": " + buf);
}

// One client socket, plain or TLS.
struct Link {
  int fd = -1;
  SSL* ssl = nullptr;
};

SSL_CTX* TlsContext(const Options& o) {
  static SSL_CTX* ctx = [&] {
    SSL_CTX* c = SSL_CTX_new(TLS_client_method());
    if (c == nullptr) DieTls("SSL_CTX_new");
    if (SSL_CTX_load_verify_locations(c, o.tls_cacert.c_str(), nullptr) != 1) {
      DieTls("loading " + o.tls_cacert);
    }
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);
    // Read-ahead: one recv() for many records instead of two per record, so that the client's
    // system calls do not hide the server's cost (the same for both servers).
    SSL_CTX_set_read_ahead(c, 1);
    SSL_CTX_set_default_read_buffer_len(c, 256 * 1024);
    if (!o.tls_cert.empty()) {
      if (SSL_CTX_use_certificate_chain_file(c, o.tls_cert.c_str()) != 1 ||
          SSL_CTX_use_PrivateKey_file(c, o.tls_key.c_str(), SSL_FILETYPE_PEM) != 1) {
        DieTls("loading the client certificate");
      }
    }
    return c;
  }();
  return ctx;
}

Link ConnectLink(const Options& o) {
  Link link{Connect(o), nullptr};
  if (o.tls_cacert.empty()) return link;
  link.ssl = SSL_new(TlsContext(o));
  SSL_set_fd(link.ssl, link.fd);
  if (SSL_connect(link.ssl) != 1) DieTls("TLS handshake");
  return link;
}

void CloseLink(Link& link) {
  if (link.ssl != nullptr) SSL_free(link.ssl);
  ::close(link.fd);
}

void SendAll(Link& link, iovec* iov, int count) {
  if (link.ssl == nullptr) return SendAll(link.fd, iov, count);
  for (int i = 0; i < count; ++i) {
    size_t sent = 0;
    while (sent < iov[i].iov_len) {
      size_t n = 0;
      if (SSL_write_ex(link.ssl, static_cast<char*>(iov[i].iov_base) + sent, iov[i].iov_len - sent,
                       &n) != 1) {
        DieTls("TLS send");
      }
      sent += n;
    }
  }
}

size_t RecvSome(Link& link, char* buf, size_t have, size_t want, bool exact) {
  if (link.ssl == nullptr) return RecvSome(link.fd, buf, have, want, exact);
  do {
    size_t n = 0;
    if (SSL_read_ex(link.ssl, buf + have, want - have, &n) != 1) DieTls("TLS receive");
    have += n;
  } while (exact && have < want);
  return have;
}

// Reads one reply (a status, error or integer line, or a bulk) into `buf`, which has room for
// every reply the caller expects; returns the whole reply with its CRLFs. Requests are never
// pipelined, so a recv never returns bytes of a later reply.
std::string_view ReadReply(Link& link, std::vector<char>& buf) {
  size_t have = 0, header = 0;
  while (header == 0) {
    have = RecvSome(link, buf.data(), have, buf.size(), false);
    auto crlf = std::string_view(buf.data(), have).find("\r\n");
    if (crlf != std::string_view::npos) header = crlf + 2;
  }
  if (buf[0] != '$' || buf[1] == '-') return {buf.data(), header};
  size_t length = 0;
  auto [end, ec] = std::from_chars(buf.data() + 1, buf.data() + header - 2, length);
  if (ec != std::errc() || end != buf.data() + header - 2) {
    Die("bad bulk header '" + std::string(buf.data(), header - 2) + "'");
  }
  size_t total = header + length + 2;
  if (total > buf.size())
    Die("a reply of " + std::to_string(total) + " bytes is larger than asked");
  while (have < total) have = RecvSome(link, buf.data(), have, total, true);
  return {buf.data(), total};
}

// The payload of a bulk reply of exactly `size` bytes; dies naming `what` on anything else.
std::string_view BulkOf(std::string_view reply, size_t size, const char* what) {
  const std::string header = "$" + std::to_string(size) + "\r\n";
  if (reply.substr(0, header.size()) != header || reply.size() != header.size() + size + 2) {
    Die(std::string(what) + " returned '" +
        std::string(reply.substr(0, std::min<size_t>(reply.find('\r'), 200))) + "', wanted " +
        std::to_string(size) + " bytes");
  }
  return reply.substr(header.size(), size);
}

// Dies naming `what` unless `reply` is exactly `wanted`.
void Expect(std::string_view reply, std::string_view wanted, const char* what) {
  if (reply != wanted) {
    Die(std::string(what) + " returned '" + std::string(reply.substr(0, 200)) + "'");
  }
}

std::string Bulk(std::string_view s) {
  std::string out = "$";
  out.append(std::to_string(s.size())).append("\r\n").append(s).append("\r\n");
  return out;
}

// A blob of `size` pseudo-random bytes, different per `seed`, pre-faulted so that no page fault
// lands in a timed request.
std::vector<char> MakeBlob(size_t size, int seed) {
  std::vector<char> blob(size);
  uint64_t x = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(seed + 1);
  for (size_t i = 0; i < blob.size(); i += 8) {
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;  // xorshift64
    uint64_t v = x * 0x2545f4914f6cdd1dULL;
    std::memcpy(&blob[i], &v, std::min<size_t>(8, blob.size() - i));
  }
  return blob;
}

// Writes `round` over both ends of `blob`, so that a stale value fails verification.
void Stamp(std::vector<char>& blob, uint64_t round) {
  size_t tail = std::min<size_t>(8, blob.size());
  std::memcpy(blob.data(), &round, tail);
  std::memcpy(blob.data() + blob.size() - tail, &round, tail);
}

// One connection's requests and reply buffer.
class Client {
 public:
  Client(const Options& o, int id) : o_(o), link_(ConnectLink(o)) {
    std::string key = o.key + ":" + std::to_string(id);
    std::string size = std::to_string(o.size);
    if (o.mode == Mode::kPrefixd) {
      store_header_ =
          "*4\r\n$16\r\nSSM.PREFIX.STORE\r\n" + Bulk(key) + "$1\r\n0\r\n$" + size + "\r\n";
      fetch_ = "*3\r\n$16\r\nSSM.PREFIX.FETCH\r\n" + Bulk(key) + "$1\r\n0\r\n";
    } else {
      store_header_ = "*3\r\n$3\r\nSET\r\n" + Bulk(key) + "$" + size + "\r\n";
      fetch_ = "*2\r\n$3\r\nGET\r\n" + Bulk(key);
    }
    blob_ = MakeBlob(o.size, id);
    for (auto& r : reply_) r.assign(o.size + 4096, 0);  // room for the header or an error line
    if (o.transport == Transport::kShm || o.store_call) {
      key_ = key;
      if (Status st = shm_.Connect(o.socket_path); !st.ok()) Die("SHM: " + st.ToString());
    }
  }
  ~Client() {
    if (next_memfd_ >= 0) ::close(next_memfd_);
    CloseLink(link_);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Stamps the blob with `round` at both ends (so a stale value fails verification), then sends
  // header + blob + CRLF in one gather write and waits for +OK.
  // --store memfd-filled: the next store's memfd, made, filled and sealed ahead (untimed).
  void PrepareStore(uint64_t round) {
    if (!o_.memfd_filled_untimed) return;
    Stamp(blob_, round);
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(blob_.data()),
                                         blob_.size());
    next_memfd_ = ShmClient::SealedMemfd(bytes);
    if (next_memfd_ < 0) DieErrno("memfd");
  }

  void Store(uint64_t round) {
    if (o_.memfd_filled_untimed) {
      if (next_memfd_ < 0) PrepareStore(round);
      bool adopted = false;
      Status st = shm_.SetFromFd(key_, next_memfd_, blob_.size(), 0, &adopted);
      ::close(next_memfd_);
      next_memfd_ = -1;
      if (!st.ok()) Die("SHM.SET: " + st.ToString());
      if (!adopted && o_.size >= (size_t{32} << 10)) Die("SHM.SET copied the memfd");
      return;
    }
    Stamp(blob_, round);
    if (o_.store_call) {
      const std::string_view blob(blob_.data(), blob_.size());
      auto reply = o_.mode == Mode::kPrefixd ? shm_.Call({"SSM.PREFIX.STORE", key_, "0", blob}, {3})
                                             : shm_.Call({"SET", key_, blob}, {2});
      if (!reply.ok()) Die("SHM.CALL: " + reply.status().ToString());
      if (reply.value().str != "OK") Die("SHM.CALL: the store did not answer OK");
      return;
    }
    if (o_.store_memfd) {
      bool adopted = false;
      const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(blob_.data()),
                                           blob_.size());
      if (Status st = shm_.Set(key_, bytes, &adopted); !st.ok()) Die("SHM.SET: " + st.ToString());
      if (!adopted && o_.size >= (size_t{32} << 10)) Die("SHM.SET copied the memfd");
      return;
    }
    iovec iov[3] = {{store_header_.data(), store_header_.size()},
                    {blob_.data(), blob_.size()},
                    {const_cast<char*>("\r\n"), 2}};
    SendAll(link_, iov, 3);
    Expect(ReadReply(link_, reply_[0]), "+OK\r\n", "STORE");
  }

  // Sends a fetch and reads the bulk reply into reply buffer `slot` (0 or 1, both reused);
  // returns the payload, valid until the next fetch into the same slot.
  std::string_view Fetch(int slot) {
    iovec iov[1] = {{fetch_.data(), fetch_.size()}};
    SendAll(link_, iov, 1);
    return BulkOf(ReadReply(link_, reply_[slot]), o_.size, "FETCH");
  }

  // SHM.GET into a view (`view_ms`: the time until it was usable), then a copy of it into reply
  // buffer `slot` (`copy_ms`: the time until the copy was complete, from the same start); the
  // lease is released after, untimed. Returns the copy.
  std::string_view ShmFetch(int slot, double& view_ms, double& copy_ms) {
    auto t0 = Clock::now();
    ShmView view;
    if (Status st = shm_.Get(key_, view); !st.ok()) Die("SHM.GET: " + st.ToString());
    auto t1 = Clock::now();
    if (view.size != o_.size) Die("SHM.GET returned " + std::to_string(view.size) + " bytes");
    std::memcpy(reply_[slot].data(), view.data, view.size);
    auto t2 = Clock::now();
    view_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    copy_ms = std::chrono::duration<double, std::milli>(t2 - t0).count();
    // An adopted value (--store memfd) is not in an arena: SHM.GET answers its bytes.
    if (view.lease == 0 && !o_.store_memfd) {
      Die("SHM.GET answered bytes, not a place: is --shm-arenas yes?");
    }
    if (Status st = shm_.Release(view); !st.ok()) Die("SHM.RELEASE: " + st.ToString());
    return {reply_[slot].data(), o_.size};
  }

  bool Matches(std::string_view fetched) const {
    return fetched.size() == blob_.size() &&
           std::memcmp(fetched.data(), blob_.data(), blob_.size()) == 0;
  }

 private:
  const Options& o_;
  Link link_;
  ShmClient shm_;
  std::string key_;
  int next_memfd_ = -1;
  std::string store_header_;
  std::string fetch_;
  std::vector<char> blob_;
  std::vector<char> reply_[2];  // [1] keeps a phase's first fetch for checking afterwards
};

// The server's CPU time so far (INFO cpu: used_cpu_sys + used_cpu_user, every thread), over a
// connection of its own; a negative value when the reply has no such fields.
double ServerCpuSeconds(const Options& o) {
  Link link = ConnectLink(o);
  const std::string request = "*2\r\n$4\r\nINFO\r\n$3\r\ncpu\r\n";
  iovec iov[1] = {{const_cast<char*>(request.data()), request.size()}};
  SendAll(link, iov, 1);
  std::vector<char> buffer(64 * 1024);
  const std::string reply(ReadReply(link, buffer));
  CloseLink(link);
  double total = 0;
  int found = 0;
  for (const char* field : {"used_cpu_sys:", "used_cpu_user:"}) {
    const size_t at = reply.find(field);
    if (at == std::string::npos) return -1;
    total += std::atof(reply.c_str() + at + std::strlen(field));
    ++found;
  }
  return found == 2 ? total : -1;
}

struct PhaseResult {
  std::vector<double> latencies_ms;
  Clock::time_point start, end;
  bool verified = true;
  // The phase's time is the sum of its latencies, not start to end (the shm phases, whose
  // operations are interleaved with untimed releases).
  bool timed_by_latencies = false;
};

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1)));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// `bytes_per_op`: payload bytes one operation moves (GB/s counts 10^9 of them per second).
// `server_cpu_s`: the server's CPU time over the phase, printed as server_cpu_ms when not
// negative.
void PrintPhase(const Options& o, const char* op, std::vector<PhaseResult>& results,
                double bytes_per_op, double server_cpu_s = -1) {
  std::vector<double> all;
  auto start = results[0].start, end = results[0].end;
  bool verified = true;
  double busy_ms = 0;  // the busiest client's sum of latencies
  for (auto& r : results) {
    all.insert(all.end(), r.latencies_ms.begin(), r.latencies_ms.end());
    start = std::min(start, r.start);
    end = std::max(end, r.end);
    verified = verified && r.verified;
    double sum = 0;
    for (double ms : r.latencies_ms) sum += ms;
    busy_ms = std::max(busy_ms, sum);
  }
  double seconds = results[0].timed_by_latencies
                       ? busy_ms / 1000
                       : std::chrono::duration<double>(end - start).count();
  double ops = static_cast<double>(all.size());
  const char* mode = ModeName(o.mode);
  const char* check = o.verify == Verify::kNone  ? "none"
                      : o.verify == Verify::kAll ? "all"
                                                 : "first-last";
  double p50 = Percentile(all, 0.50), p99 = Percentile(all, 0.99);
  const std::string cpu =
      server_cpu_s < 0 ? "" : ",\"server_cpu_ms\":" + std::to_string(server_cpu_s * 1e3);
  std::printf(
      "{\"mode\":\"%s\",\"transport\":\"%s\",\"op\":\"%s\",\"size\":%zu,\"clients\":%d,"
      "\"requests\":%zu,"
      "\"seconds\":%.4f,\"ops_per_s\":%.1f,\"gb_per_s\":%.3f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
      "\"verify\":\"%s\",\"verified\":%s%s}\n",
      mode, o.mode == Mode::kMemcpy ? "none" : TransportName(o.transport), op, o.size, o.clients,
      all.size(), seconds, ops / seconds, ops * bytes_per_op / seconds / 1e9, p50, p99, check,
      verified ? "true" : "false", cpu.c_str());
  std::fflush(stdout);
}

// Client `id`'s part of --requests.
int64_t ShareOf(const Options& o, int id) {
  return o.requests / o.clients + (id < o.requests % o.clients ? 1 : 0);
}

// Runs `body(id)` on `count` threads and waits for them.
template <class Body>
void RunThreads(int count, const Body& body) {
  std::vector<std::thread> threads;
  for (int i = 0; i < count; ++i) threads.emplace_back(body, i);
  for (auto& t : threads) t.join();
}

// When a phase that began at `start` stops: --seconds later, or never.
Clock::time_point PhaseDeadline(const Options& o, Clock::time_point start) {
  return o.seconds > 0 ? start + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(o.seconds))
                       : Clock::time_point::max();
}

int RunBlobs(const Options& o) {
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < o.clients; ++i) clients.push_back(std::make_unique<Client>(o, i));
  std::vector<PhaseResult> stores(static_cast<size_t>(o.clients));
  std::vector<PhaseResult> fetches(static_cast<size_t>(o.clients));
  std::vector<PhaseResult> views(static_cast<size_t>(o.clients));
  const bool shm = o.transport == Transport::kShm;
  // The server's CPU time is read as the fetch phase starts and once every client has finished
  // it (the barrier's completion runs while all clients wait).
  int phases_begun = 0;
  double cpu_before = -1, cpu_after = -1;
  auto on_phase = [&]() noexcept {
    ++phases_begun;
    if (phases_begun == 2) cpu_before = ServerCpuSeconds(o);
    if (phases_begun == 3) cpu_after = ServerCpuSeconds(o);
  };
  std::barrier sync(o.clients, on_phase);
  std::atomic<bool> failed{false};

  auto worker = [&](int id) {
    Client& c = *clients[static_cast<size_t>(id)];
    const int64_t share = ShareOf(o, id);
    uint64_t round = 0;
    double view_ms = 0, copy_ms = 0;
    for (int i = 0; i < o.warmup; ++i) {
      c.Store(++round);
      shm ? c.ShmFetch(0, view_ms, copy_ms) : c.Fetch(0);
    }
    auto deadline = [&](Clock::time_point start) { return PhaseDeadline(o, start); };

    PhaseResult& s = stores[static_cast<size_t>(id)];
    s.latencies_ms.reserve(static_cast<size_t>(share));
    sync.arrive_and_wait();
    s.start = Clock::now();
    s.timed_by_latencies = o.memfd_filled_untimed;
    for (int64_t i = 0; i < share && Clock::now() < deadline(s.start); ++i) {
      c.PrepareStore(round + 1);
      auto t0 = Clock::now();
      c.Store(++round);
      s.latencies_ms.push_back(
          std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    s.end = Clock::now();

    PhaseResult& f = fetches[static_cast<size_t>(id)];
    PhaseResult& v = views[static_cast<size_t>(id)];
    f.latencies_ms.reserve(static_cast<size_t>(share));
    v.latencies_ms.reserve(static_cast<size_t>(share));
    f.timed_by_latencies = v.timed_by_latencies = shm;
    sync.arrive_and_wait();
    f.start = v.start = Clock::now();
    std::string_view first, last;
    for (int64_t i = 0; i < share && Clock::now() < deadline(f.start); ++i) {
      if (shm) {
        last = c.ShmFetch(i == 0 ? 1 : 0, view_ms, copy_ms);
        v.latencies_ms.push_back(view_ms);
        f.latencies_ms.push_back(copy_ms);
      } else {
        auto t0 = Clock::now();
        last = c.Fetch(i == 0 ? 1 : 0);
        f.latencies_ms.push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      }
      if (i == 0) first = last;
      if (o.verify == Verify::kAll) f.verified = f.verified && c.Matches(last);
    }
    f.end = v.end = Clock::now();
    sync.arrive_and_wait();
    if (o.verify == Verify::kFirstLast) f.verified = c.Matches(first) && c.Matches(last);
    v.verified = f.verified;
    if (!f.verified) failed = true;
  };

  RunThreads(o.clients, worker);
  PrintPhase(o, "store", stores, static_cast<double>(o.size));
  const double fetch_cpu = cpu_before < 0 || cpu_after < 0 ? -1 : cpu_after - cpu_before;
  if (shm) {
    PrintPhase(o, "view", views, static_cast<double>(o.size), fetch_cpu);
    PrintPhase(o, "copy", fetches, static_cast<double>(o.size), fetch_cpu);
  } else {
    PrintPhase(o, "fetch", fetches, static_cast<double>(o.size), fetch_cpu);
  }
  if (failed) {
    std::fprintf(stderr, "prefixd-blob-bench: fetched bytes differ from the stored blob\n");
    return 2;
  }
  return 0;
}

// One LMCache worker, as its redis connector drives one pooled connection: it cycles over
// `--chunks` chunk keys, each cycle storing a chunk and its metadata (the store path), checking
// that the metadata exists (the lookup path) and reading metadata then chunk (the load path).
// Every reply is checked byte for byte except the chunk's payload, which is compared with what
// was stored on the first and last cycle (or every cycle with --verify all).
class LmcacheWorker {
 public:
  LmcacheWorker(const Options& o, int id)
      : o_(o), link_(ConnectLink(o)), blob_(MakeBlob(o.size, id)) {
    const std::string size = std::to_string(o.size);
    for (int c = 0; c < o.chunks; ++c) {
      char hash[17];
      std::snprintf(hash, sizeof hash, "%016llx",
                    static_cast<unsigned long long>(0x9e3779b97f4a7c15ULL *
                                                    static_cast<uint64_t>(id * 1000003 + c + 1)));
      const std::string key = o.key + "@" + std::to_string(o.clients) + "@" + std::to_string(id) +
                              "@" + hash + "@bfloat16";
      Chunk chunk;
      chunk.metadata = Metadata(o.size, c);
      chunk.set_kv = "*3\r\n$3\r\nSET\r\n" + Bulk(key + "kv_bytes") + "$" + size + "\r\n";
      chunk.set_metadata = "*3\r\n$3\r\nSET\r\n" + Bulk(key + "metadata") + Bulk(chunk.metadata);
      chunk.exists = "*2\r\n$6\r\nEXISTS\r\n" + Bulk(key + "metadata");
      chunk.get_metadata = "*2\r\n$3\r\nGET\r\n" + Bulk(key + "metadata");
      chunk.get_kv = "*2\r\n$3\r\nGET\r\n" + Bulk(key + "kv_bytes");
      chunks_.push_back(std::move(chunk));
    }
    reply_.assign(o.size + 4096, 0);
  }
  ~LmcacheWorker() { CloseLink(link_); }
  LmcacheWorker(const LmcacheWorker&) = delete;
  LmcacheWorker& operator=(const LmcacheWorker&) = delete;

  // One chunk cycle on chunk `round` modulo --chunks; returns the chunk payload read back, valid
  // until the next cycle.
  std::string_view Cycle(uint64_t round) {
    const Chunk& c = chunks_[round % chunks_.size()];
    Stamp(blob_, round);
    iovec store[3] = {{const_cast<char*>(c.set_kv.data()), c.set_kv.size()},
                      {blob_.data(), blob_.size()},
                      {const_cast<char*>("\r\n"), 2}};
    SendAll(link_, store, 3);
    Expect(ReadReply(link_, reply_), "+OK\r\n", "SET kv_bytes");
    Expect(Ask(c.set_metadata), "+OK\r\n", "SET metadata");
    Expect(Ask(c.exists), ":1\r\n", "EXISTS metadata");
    if (BulkOf(Ask(c.get_metadata), c.metadata.size(), "GET metadata") != c.metadata) {
      Die("GET metadata returned other bytes than were stored");
    }
    return BulkOf(Ask(c.get_kv), o_.size, "GET kv_bytes");
  }

  bool Matches(std::string_view fetched) const {
    return fetched.size() == blob_.size() &&
           std::memcmp(fetched.data(), blob_.data(), blob_.size()) == 0;
  }

 private:
  struct Chunk {
    std::string metadata, set_kv, set_metadata, exists, get_metadata, get_kv;
  };

  // LMCache's 28-byte metadata: seven little-endian 32-bit fields (chunk bytes, format, dtype
  // and a 4-dimensional shape); only the size matters to the servers.
  static std::string Metadata(size_t size, int chunk) {
    const uint32_t fields[7] = {static_cast<uint32_t>(size), 1, 2, 2, 32, 256,
                                static_cast<uint32_t>(chunk)};
    return {reinterpret_cast<const char*>(fields), sizeof fields};
  }

  std::string_view Ask(const std::string& request) {
    iovec iov[1] = {{const_cast<char*>(request.data()), request.size()}};
    SendAll(link_, iov, 1);
    return ReadReply(link_, reply_);
  }

  const Options& o_;
  Link link_;
  std::vector<char> blob_;
  std::vector<Chunk> chunks_;
  std::vector<char> reply_;
};

// --requests chunk cycles split over --clients workers, after each worker has written every one
// of its chunk keys once (untimed), so the timed cycles replace values as a full cache does.
int RunLmcache(const Options& o) {
  std::vector<std::unique_ptr<LmcacheWorker>> workers;
  for (int i = 0; i < o.clients; ++i) workers.push_back(std::make_unique<LmcacheWorker>(o, i));
  std::vector<PhaseResult> cycles(static_cast<size_t>(o.clients));
  std::barrier sync(o.clients);
  std::atomic<bool> failed{false};

  auto worker = [&](int id) {
    LmcacheWorker& w = *workers[static_cast<size_t>(id)];
    const int64_t share = ShareOf(o, id);
    uint64_t round = 0;
    for (int i = 0; i < std::max(o.warmup, o.chunks); ++i) w.Cycle(round++);
    PhaseResult& r = cycles[static_cast<size_t>(id)];
    r.latencies_ms.reserve(static_cast<size_t>(share));
    sync.arrive_and_wait();
    r.start = Clock::now();
    const auto deadline = PhaseDeadline(o, r.start);
    std::string_view last;
    for (int64_t i = 0; i < share && Clock::now() < deadline; ++i) {
      auto t0 = Clock::now();
      last = w.Cycle(round++);
      r.latencies_ms.push_back(
          std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      if (o.verify == Verify::kAll || (o.verify == Verify::kFirstLast && i == 0)) {
        r.verified = r.verified && w.Matches(last);
      }
    }
    r.end = Clock::now();
    if (o.verify == Verify::kFirstLast && !last.empty()) r.verified = r.verified && w.Matches(last);
    if (!r.verified) failed = true;
  };

  RunThreads(o.clients, worker);
  // A cycle moves the chunk twice (stored, loaded); the metadata's bytes are not counted.
  PrintPhase(o, "cycle", cycles, 2.0 * static_cast<double>(o.size));
  if (failed) {
    std::fprintf(stderr, "prefixd-blob-bench: a loaded chunk differs from the stored one\n");
    return 2;
  }
  return 0;
}

// The physical ceiling for a copy-based TCP path on this machine: per --clients, one thread
// writes its share of size*requests bytes into a loopback connection in size-byte send() calls
// and another reads them out with size-byte MSG_WAITALL recv() calls, as the blob client reads
// replies. No protocol, no allocation: two kernel copies per byte.
int RunLoopback(const Options& o) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) DieErrno("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) DieErrno("bind");
  if (::listen(listener, o.clients) != 0) DieErrno("listen");
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  Options to = o;
  to.port = ntohs(addr.sin_port);
  to.transport = Transport::kTcp;

  struct Pair {
    int sender = -1, receiver = -1;
    int64_t chunks = 0;
    std::vector<char> out, in;
    Clock::time_point end;
  };
  std::vector<Pair> pairs(static_cast<size_t>(o.clients));
  for (int i = 0; i < o.clients; ++i) {
    Pair& p = pairs[static_cast<size_t>(i)];
    p.sender = Connect(to);
    p.receiver = ::accept(listener, nullptr, nullptr);
    if (p.receiver < 0) DieErrno("accept");
    p.chunks = o.requests / o.clients + (i < o.requests % o.clients ? 1 : 0);
    p.out.assign(o.size, 'x');
    p.in.assign(o.size, 0);
  }
  ::close(listener);

  std::barrier sync(2 * o.clients + 1);
  std::vector<std::thread> threads;
  for (Pair& p : pairs) {
    threads.emplace_back([&sync, &p] {
      const uint64_t total = p.out.size() * static_cast<uint64_t>(p.chunks);
      sync.arrive_and_wait();
      for (uint64_t got = 0; got < total;) {
        got += RecvSome(p.receiver, p.in.data(), 0, std::min<uint64_t>(p.in.size(), total - got),
                        true);
      }
      p.end = Clock::now();
    });
    threads.emplace_back([&sync, &p] {
      sync.arrive_and_wait();
      for (int64_t i = 0; i < p.chunks; ++i) {
        iovec iov[1] = {{p.out.data(), p.out.size()}};
        SendAll(p.sender, iov, 1);
      }
    });
  }
  sync.arrive_and_wait();
  auto start = Clock::now();
  for (auto& t : threads) t.join();
  auto end = start;
  for (Pair& p : pairs) {
    end = std::max(end, p.end);
    ::close(p.sender);
    ::close(p.receiver);
  }
  double seconds = std::chrono::duration<double>(end - start).count();
  double bytes = static_cast<double>(o.size) * static_cast<double>(o.requests);
  std::printf(
      "{\"mode\":\"loopback\",\"op\":\"stream\",\"size\":%zu,\"clients\":%d,"
      "\"requests\":%lld,\"seconds\":%.4f,\"ops_per_s\":%.1f,\"gb_per_s\":%.3f}\n",
      o.size, o.clients, static_cast<long long>(o.requests), seconds,
      static_cast<double>(o.requests) / seconds, bytes / seconds / 1e9);
  return 0;
}

// The same-host reference: one thread copying a size-byte blob --requests times into a private
// buffer of this process, both pre-faulted, as a client would copy a value it can read in place.
// Prints one "copy" phase; checks the last copy byte for byte.
int RunMemcpy(const Options& o) {
  std::vector<char> source = MakeBlob(o.size, 0);
  std::vector<char> target(o.size, 1);  // pre-faulted
  std::vector<PhaseResult> copies(1);
  PhaseResult& r = copies[0];
  for (int i = 0; i < o.warmup; ++i) std::memcpy(target.data(), source.data(), o.size);
  r.latencies_ms.reserve(static_cast<size_t>(o.requests));
  r.start = Clock::now();
  const auto deadline = PhaseDeadline(o, r.start);
  for (int64_t i = 0; i < o.requests && Clock::now() < deadline; ++i) {
    auto t0 = Clock::now();
    Stamp(source, static_cast<uint64_t>(i));  // each copy reads a value it has not read before
    std::memcpy(target.data(), source.data(), o.size);
    r.latencies_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  r.end = Clock::now();
  r.verified = o.verify == Verify::kNone || source == target;
  PrintPhase(o, "copy", copies, static_cast<double>(o.size));
  return r.verified ? 0 : 2;
}

}  // namespace
}  // namespace prefixd::bench

int main(int argc, char** argv) {
  auto options = prefixd::bench::ParseOptions(argc, argv);
  if (options.mode == prefixd::bench::Mode::kLoopback) return prefixd::bench::RunLoopback(options);
  if (options.mode == prefixd::bench::Mode::kLmcache) return prefixd::bench::RunLmcache(options);
  if (options.mode == prefixd::bench::Mode::kMemcpy) return prefixd::bench::RunMemcpy(options);
  return prefixd::bench::RunBlobs(options);
}
