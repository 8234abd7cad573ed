// prefixd-vstore-bench: V-store throughput per storage tier. For each kv_dim, prefix length and
// tier it times, over loopback through the C++ client, V.STOREBATCH of a whole layer (fp32 rows,
// as Pion's client sends them; for fp16/bf16 also rows already in that format) and V.FETCH RANGE
// of it (fp32, and FMT NATIVE where that is the stored bytes), and reports tokens/s and GB/s of
// wire payload (10^9 B). It also times the tier codec alone on one core, and reports each tier's
// stored size against fp32 and fp16.
//
//   prefixd-vstore-bench --server build/prefixd-server [--appendonly yes|no]
//   prefixd-vstore-bench --port 1974                   # a server already running
//   options: --dims 1024,4096 --tokens 2048,8192,32768 --tiers fp32,fp16,... --reps 3
//
// Every fetch is checked against the stored rows once, after the timed repetitions. Prints a
// markdown table (the V-store section of docs/benchmarks.md).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "prefixd/client.h"
#include "prefixd/float16.h"
#include "store/vector_codec.h"

extern char** environ;

namespace prefixd::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string server;  // spawn this binary instead of using --port
  std::string appendonly = "no";
  std::vector<uint32_t> dims = {1024, 4096};
  std::vector<uint64_t> tokens = {2048, 8192, 32768};
  std::vector<std::string> tiers = {"fp32", "fp16", "bf16", "int8", "fp8", "mlx4g32"};
  int reps = 3;
};

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "prefixd-vstore-bench: %s\n", message.c_str());
  std::exit(1);
}

template <typename T>
std::vector<T> SplitList(const std::string& text) {
  std::vector<T> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if constexpr (std::is_same_v<T, std::string>) {
      out.push_back(item);
    } else {
      out.push_back(static_cast<T>(std::stoull(item)));
    }
  }
  return out;
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Die("missing value after " + a);
      return argv[++i];
    };
    if (a == "--host") {
      o.host = value();
    } else if (a == "--port") {
      o.port = std::stoi(value());
    } else if (a == "--server") {
      o.server = value();
    } else if (a == "--appendonly") {
      o.appendonly = value();
    } else if (a == "--dims") {
      o.dims = SplitList<uint32_t>(value());
    } else if (a == "--tokens") {
      o.tokens = SplitList<uint64_t>(value());
    } else if (a == "--tiers") {
      o.tiers = SplitList<std::string>(value());
    } else if (a == "--reps") {
      o.reps = std::max(1, std::stoi(value()));
    } else {
      Die("unknown option " + a);
    }
  }
  if (o.port == 0 && o.server.empty()) Die("give --port of a running server or --server PATH");
  return o;
}

// A prefixd-server child on a free port with a private data directory.
class SpawnedServer {
 public:
  SpawnedServer(const std::string& binary, const std::string& appendonly) {
    char tmpl[] = "/tmp/prefixd-vbench-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) Die("mkdtemp failed");
    dir_ = tmpl;
    port_ = 20000 + static_cast<int>(::getpid() % 20000);
    std::vector<std::string> args = {binary,
                                     "--port",
                                     std::to_string(port_),
                                     "--dir",
                                     dir_ + "/data",
                                     "--appendonly",
                                     appendonly,
                                     "--loglevel",
                                     "warning",
                                     "--maxmemory",
                                     "0"};
    std::vector<char*> argv;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    // The server's log goes to a file, not into the table on stdout.
    const std::string log = dir_ + "/server.log";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) Die("cannot run " + binary);
  }
  ~SpawnedServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  int port() const { return port_; }

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

Client ConnectWithRetry(const std::string& host, int port) {
  ClientOptions options;
  options.io_timeout = std::chrono::milliseconds(120000);
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto c = Client::Connect(host, port, options);
    if (c.ok() && c->Ping().ok()) return std::move(c).value();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  Die("no server answers on " + host + ":" + std::to_string(port));
}

template <typename F>
double MedianSeconds(int reps, F&& run) {
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    auto start = Clock::now();
    run(r);
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void Check(const Status& st, const std::string& what) {
  if (!st.ok()) Die(what + ": " + st.ToString());
}

struct Row {
  uint32_t dim;
  uint64_t tokens;
  std::string tier;
  std::string input;  // F32 / F16 / BF16
  double store_s = 0, fetch_s = 0, native_s = 0;
  uint64_t in_bytes = 0, out_bytes = 0, native_bytes = 0, stored_bytes = 0;
  double encode_s = 0, decode_s = 0;
};

std::string Fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Rate(double items, double seconds, double scale, int digits) {
  return seconds > 0 ? Fixed(items / seconds / scale, digits) : "-";
}

}  // namespace

int Main(int argc, char** argv) {
  Options o = Parse(argc, argv);
  std::optional<SpawnedServer> spawned;
  if (!o.server.empty()) {
    spawned.emplace(o.server, o.appendonly);
    o.port = spawned->port();
  }
  Client client = ConnectWithRetry(o.host, o.port);
  std::vector<Row> rows;
  for (uint32_t dim : o.dims) {
    for (uint64_t n : o.tokens) {
      std::mt19937_64 rng(dim * 31 + n);
      std::normal_distribution<float> normal;
      std::vector<float> x(n * dim);
      for (float& v : x) v = normal(rng);
      std::vector<uint16_t> half(x.size()), brain(x.size());
      for (size_t i = 0; i < x.size(); ++i) half[i] = Fp32ToFp16(x[i]), brain[i] = Fp32ToBf16(x[i]);
      std::vector<float> out(x.size());
      std::vector<uint8_t> native(x.size() * 4);
      for (const std::string& tier_name : o.tiers) {
        auto tier = store::ParseTier(tier_name);
        if (!tier) Die("unknown tier " + tier_name);
        std::vector<std::string> inputs = {"F32"};
        if (*tier == store::Tier::kFp16) inputs.push_back("F16");
        if (*tier == store::Tier::kBf16) inputs.push_back("BF16");
        for (const std::string& input : inputs) {
          Row row{dim, n, tier_name, input};
          const std::string sid = "bench_" + tier_name;
          const RowFormat format = input == "F32"   ? RowFormat::kF32
                                   : input == "F16" ? RowFormat::kF16
                                                    : RowFormat::kBf16;
          const auto* data = format == RowFormat::kF32
                                 ? reinterpret_cast<const uint8_t*>(x.data())
                                 : reinterpret_cast<const uint8_t*>(
                                       format == RowFormat::kF16 ? half.data() : brain.data());
          row.in_bytes = n * dim * (format == RowFormat::kF32 ? 4 : 2);
          // A fresh session per repetition, as a new prefix would be.
          row.store_s = MedianSeconds(o.reps, [&](int) {
            static_cast<void>(client.VDrop(sid));
            Check(client.VCreate(sid, dim, tier_name).status(), "V.CREATE");
            Check(client.VStoreBatch(sid, 0, 0, n, format, std::span(data, row.in_bytes)),
                  "V.STOREBATCH");
          });
          auto info = client.Command({"V.INFO", sid});
          Check(info.status(), "V.INFO");
          if (auto at = info->str.find("payload_bytes:"); at != std::string::npos) {
            row.stored_bytes = std::stoull(info->str.substr(at + 14));
          }
          row.out_bytes = n * dim * 4;
          row.fetch_s = MedianSeconds(o.reps, [&](int) {
            auto got = client.VFetchRange(sid, 0, 0, n, out);
            Check(got.status(), "V.FETCH RANGE");
          });
          if (store::StoresValues(*tier) && *tier != store::Tier::kFp32) {
            row.native_bytes = n * dim * 2;
            row.native_s = MedianSeconds(o.reps, [&](int) {
              auto got = client.VFetchRangeNative(sid, 0, 0, n, native);
              Check(got.status(), "V.FETCH RANGE NATIVE");
            });
          }
          // The codec alone, one core: what the server spends encoding and decoding.
          std::vector<uint8_t> encoded(n * store::RowBytes(*tier, dim));
          std::vector<float> decoded(x.size());
          row.encode_s = MedianSeconds(o.reps, [&](int) {
            std::string err =
                store::EncodeRows(*tier, dim, store::InputFormat::kF32,
                                  reinterpret_cast<const uint8_t*>(x.data()), n, encoded.data());
            if (!err.empty()) Die(err);
          });
          row.decode_s = MedianSeconds(o.reps, [&](int) {
            store::DecodeRows(*tier, dim, encoded.data(), n, decoded.data());
          });
          // The last fetch must equal the codec's own round trip of the same rows.
          auto got = client.VFetchRange(sid, 0, 0, n, out);
          Check(got.status(), "V.FETCH RANGE");
          if (format == RowFormat::kF32 &&
              std::memcmp(out.data(), decoded.data(), decoded.size() * 4) != 0) {
            Die("fetched rows differ from the codec's round trip for " + tier_name);
          }
          static_cast<void>(client.VDrop(sid));
          rows.push_back(row);
          std::fprintf(stderr, "dim %u tokens %llu %s %s: store %.3f s fetch %.3f s\n", dim,
                       static_cast<unsigned long long>(n), tier_name.c_str(), input.c_str(),
                       row.store_s, row.fetch_s);
        }
      }
    }
  }
  std::printf(
      "| kv_dim | tokens | tier | input | stored MB | vs fp32 | store Mtok/s | store GB/s | "
      "fetch Mtok/s | fetch GB/s | NATIVE GB/s | encode GB/s | decode GB/s |\n"
      "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    const double fp32_bytes = static_cast<double>(r.tokens) * r.dim * 4;
    std::printf(
        "| %u | %llu | %s | %s | %s | %s× | %s | %s | %s | %s | %s | %s | %s |\n", r.dim,
        static_cast<unsigned long long>(r.tokens), r.tier.c_str(), r.input.c_str(),
        Fixed(r.stored_bytes / 1e6, 1).c_str(),
        Fixed(fp32_bytes / static_cast<double>(r.stored_bytes), 2).c_str(),
        Rate(static_cast<double>(r.tokens), r.store_s, 1e6, 2).c_str(),
        Rate(static_cast<double>(r.in_bytes), r.store_s, 1e9, 2).c_str(),
        Rate(static_cast<double>(r.tokens), r.fetch_s, 1e6, 2).c_str(),
        Rate(static_cast<double>(r.out_bytes), r.fetch_s, 1e9, 2).c_str(),
        r.native_bytes ? Rate(static_cast<double>(r.native_bytes), r.native_s, 1e9, 2).c_str()
                       : "-",
        Rate(fp32_bytes, r.encode_s, 1e9, 2).c_str(), Rate(fp32_bytes, r.decode_s, 1e9, 2).c_str());
  }
  return 0;
}

}  // namespace prefixd::bench

int main(int argc, char** argv) { return prefixd::bench::Main(argc, argv); }
