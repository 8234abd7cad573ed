// prefixd-cold-fetch: fetches whole sessions as fast as the server sends them, for the disk-tier
// benchmark (disk_tier_bench.py --client): N connections, each taking the next job (a session),
// sending SSM.PREFIX.MFETCH sid 0..L-1 (or, with --vstore-dim, L pipelined
// `V.FETCH sid l RANGE 0 rows FMT NATIVE`) and reading the reply with no copy of its middle:
// the first and last 4 KiB of every layer are read and checked against the expected block, the
// bytes between are dropped in the kernel (recv with MSG_TRUNC). So the figure is the server's
// path, not the client's: a Python client spent as much CPU per byte as the server.
//
//   prefixd-cold-fetch --port P --jobs FILE --layers 4 --layer-bytes 4194304 --clients 4
//       [--vstore-dim 1024]
//
// FILE holds the jobs back to back: a u32 (little-endian) session number n (the key is "s<n>"),
// then for each layer the 4 KiB block its value's first and last 4 KiB must equal. Prints one
// JSON line: payload bytes, seconds, GB/s (10^9 bytes), the process's CPU seconds, wrong layers.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace prefixd::bench {
namespace {

constexpr size_t kBlock = 4096;

struct Options {
  int port = 0;
  std::string jobs;
  uint32_t layers = 4;
  uint64_t layer_bytes = 4 << 20;
  int clients = 4;
  uint32_t vstore_dim = 0;  // 0: SSM sessions
};

struct Job {
  uint32_t session = 0;
  const uint8_t* blocks = nullptr;  // layers × kBlock
};

[[noreturn]] void Fail(const std::string& why) {
  std::fprintf(stderr, "prefixd-cold-fetch: %s\n", why.c_str());
  std::exit(2);
}

std::string Command(const std::vector<std::string>& words) {
  std::string out = "*" + std::to_string(words.size()) + "\r\n";
  for (const std::string& w : words) out += "$" + std::to_string(w.size()) + "\r\n" + w + "\r\n";
  return out;
}

// One connection: RESP replies read through a small buffer, a bulk's middle dropped unread.
class Connection {
 public:
  explicit Connection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      Fail("cannot connect to 127.0.0.1:" + std::to_string(port));
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~Connection() { ::close(fd_); }

  void Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) Fail("send failed");
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }

  std::string Line() {
    std::string line;
    for (;;) {
      if (begin_ == end_) Fill();
      const auto* at = static_cast<const uint8_t*>(std::memchr(buf_ + begin_, '\n', end_ - begin_));
      const size_t upto = at == nullptr ? end_ : static_cast<size_t>(at - buf_) + 1;
      line.append(reinterpret_cast<const char*>(buf_ + begin_), upto - begin_);
      begin_ = upto;
      if (at != nullptr) break;
    }
    if (line.size() < 3 || line[line.size() - 2] != '\r') Fail("bad reply line");
    line.resize(line.size() - 2);
    if (line[0] == '-') Fail("error reply: " + line);
    return line;
  }

  // A bulk of `size` bytes and its CRLF: bytes [0, kBlock) into `first`, the last kBlock into
  // `last`; the rest is dropped in the kernel where it is not buffered already.
  void Bulk(uint64_t size, uint8_t* first, uint8_t* last) {
    const uint64_t total = size + 2, last_from = size - kBlock;
    uint64_t at = 0;
    while (at < total) {
      if (begin_ == end_) {
        if (at >= kBlock && at < last_from) {
          const ssize_t n =
              ::recv(fd_, nullptr, static_cast<size_t>(last_from - at), MSG_TRUNC | MSG_WAITALL);
          if (n <= 0) Fail("connection closed");
          at += static_cast<uint64_t>(n);
          continue;
        }
        Fill();
      }
      const uint64_t n = std::min<uint64_t>(end_ - begin_, total - at);
      const uint8_t* src = buf_ + begin_;
      for (uint64_t i = 0; i < n; ++i) {  // only the ends: the buffer is small
        const uint64_t pos = at + i;
        if (pos < kBlock) {
          first[pos] = src[i];
        } else if (pos >= last_from && pos < size) {
          last[pos - last_from] = src[i];
        }
      }
      begin_ += static_cast<size_t>(n);
      at += n;
    }
  }

 private:
  void Fill() {
    const ssize_t n = ::recv(fd_, buf_, sizeof(buf_), 0);
    if (n <= 0) Fail("connection closed");
    begin_ = 0, end_ = static_cast<size_t>(n);
  }

  int fd_ = -1;
  uint8_t buf_[16 * 1024];
  size_t begin_ = 0, end_ = 0;
};

// One job's requests, sent in one write.
std::string Requests(const Options& o, uint32_t session) {
  const std::string sid = "s" + std::to_string(session);
  if (o.vstore_dim == 0) {
    std::vector<std::string> words{"SSM.PREFIX.MFETCH", sid};
    for (uint32_t l = 0; l < o.layers; ++l) words.push_back(std::to_string(l));
    return Command(words);
  }
  const std::string rows = std::to_string(o.layer_bytes / (2 * uint64_t{o.vstore_dim}));
  std::string out;
  for (uint32_t l = 0; l < o.layers; ++l) {
    out += Command({"V.FETCH", sid, std::to_string(l), "RANGE", "0", rows, "FMT", "NATIVE"});
  }
  return out;
}

// Layers whose value was not what the job expects.
uint64_t RunJob(const Options& o, Connection& c, const Job& job) {
  c.Send(Requests(o, job.session));
  if (o.vstore_dim == 0 && c.Line() != "*" + std::to_string(o.layers)) Fail("bad array reply");
  uint64_t wrong = 0;
  std::vector<uint8_t> first(kBlock), last(kBlock);
  for (uint32_t l = 0; l < o.layers; ++l) {
    const std::string header = c.Line();
    if (header[0] != '$' || std::stoull(header.substr(1)) != o.layer_bytes) {
      Fail("s" + std::to_string(job.session) + " layer " + std::to_string(l) + ": " + header);
    }
    c.Bulk(o.layer_bytes, first.data(), last.data());
    const uint8_t* want = job.blocks + size_t{l} * kBlock;
    if (std::memcmp(first.data(), want, kBlock) != 0 || std::memcmp(last.data(), want, kBlock)) {
      ++wrong;
    }
  }
  return wrong;
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--port") {
      o.port = std::atoi(value);
    } else if (flag == "--jobs") {
      o.jobs = value;
    } else if (flag == "--layers") {
      o.layers = static_cast<uint32_t>(std::atoi(value));
    } else if (flag == "--layer-bytes") {
      o.layer_bytes = std::strtoull(value, nullptr, 10);
    } else if (flag == "--clients") {
      o.clients = std::atoi(value);
    } else if (flag == "--vstore-dim") {
      o.vstore_dim = static_cast<uint32_t>(std::atoi(value));
    } else {
      Fail("unknown flag " + std::string(flag));
    }
  }
  if (o.port <= 0 || o.jobs.empty() || o.layers == 0 || o.layer_bytes < 2 * kBlock ||
      o.clients < 1) {
    Fail("usage: --port P --jobs FILE --layers L --layer-bytes B --clients N [--vstore-dim D]");
  }
  return o;
}

double CpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int Main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  std::ifstream in(o.jobs, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t record = 4 + size_t{o.layers} * kBlock;
  if (file.empty() || file.size() % record != 0) Fail("the jobs file is not whole records");
  std::vector<Job> jobs;
  for (size_t at = 0; at < file.size(); at += record) {
    Job job;
    std::memcpy(&job.session, file.data() + at, 4);
    job.blocks = reinterpret_cast<const uint8_t*>(file.data() + at + 4);
    jobs.push_back(job);
  }
  // Connected before the clock starts, as a pool would be.
  std::vector<std::unique_ptr<Connection>> connections;
  for (int i = 0; i < o.clients; ++i) connections.push_back(std::make_unique<Connection>(o.port));
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> wrong{0};
  const double cpu = CpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < o.clients; ++i) {
    threads.emplace_back([&, i] {
      for (size_t j = next++; j < jobs.size(); j = next++) {
        wrong += RunJob(o, *connections[static_cast<size_t>(i)], jobs[j]);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double bytes = static_cast<double>(jobs.size()) * o.layers * o.layer_bytes;
  std::printf(
      "{\"bytes\": %.0f, \"seconds\": %.4f, \"gbps\": %.4f, \"cpu_seconds\": %.3f, "
      "\"wrong_layers\": %llu}\n",
      bytes, seconds, bytes / seconds / 1e9, CpuSeconds() - cpu,
      static_cast<unsigned long long>(wrong.load()));
  return wrong.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace prefixd::bench

int main(int argc, char** argv) { return prefixd::bench::Main(argc, argv); }
