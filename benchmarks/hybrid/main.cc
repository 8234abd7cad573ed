// prefixd-hybrid: the reference client. `sweep` measures, for each prefix length, the time to
// first token of a cold prefill against a warm start that fetches the prefix state from prefixd
// in a separate process (`warm`, which the sweep spawns), and checks the two agree bit for bit.
// Models: Qwen3.5 (Gated DeltaNet + attention), Mamba-2 and RWKV-7 (CPU only).
// Single-threaded driver; the model's own pool does the parallel work.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "chat.h"
#include "compare.h"
#include "config.h"
#include "cpu_backend.h"
#include "model.h"
#include "prefix_cache.h"
#include "prefixd/client.h"
#include "prefixd/cluster_client.h"
#include "prefixd_link.h"
#include "report.h"
#include "weights.h"
#ifdef PREFIXD_HYBRID_HAVE_CUDA
#include "cuda_backend.h"
#endif

extern char** environ;

namespace prefixd::hybrid {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Settings shared by `sweep` and `warm`; the sweep passes its own to the warm process.
struct Common {
  std::string model = "tiny";
  std::string weights = "synthetic";
  std::string backend = "cpu";
  std::string host = "127.0.0.1";
  int port = 1974;
  std::string cluster;             // a cluster node's host:port, instead of host and port
  std::string unix_socket;         // the server's unix socket (same host)
  std::string transport = "auto";  // auto | tcp | unix | shm
  int threads = 0;
  int64_t chunk = 512;
  std::string kv_via = "auto";
  bool verify = true;
};

struct SweepArgs {
  std::string lengths = "512,1024,2048,4096,8192";
  int suffix_tokens = 16;
  int decode_tokens = 16;
  uint64_t prompt_seed = 1;
  std::string csv;
  std::string chart;
  std::string markdown;
  bool keep = false;
  int loopback_mb = 512;
  int repeats = 1;
};

struct ChatArgs {
  ChatOptions options;
  std::string csv;
  std::string markdown;
  std::string chart;
  std::string compare_csv;
  std::string json;
};

struct WarmArgs {
  std::string request;
  std::string result;
};

void Die(const std::string& what) {
  std::fprintf(stderr, "prefixd-hybrid: %s\n", what.c_str());
  std::exit(2);
}

template <typename T>
T OrDie(Result<T> r, const std::string& what) {
  if (!r.ok()) Die(what + ": " + r.status().ToString());
  return std::move(r).value();
}

void OrDie(const Status& st, const std::string& what) {
  if (!st.ok()) Die(what + ": " + st.ToString());
}

// The model, loaded and warmed up: what both processes have before any timing starts.
struct Loaded {
  ModelConfig config;
  std::string weights_identity;
  std::unique_ptr<Backend> backend;
  double load_ms = 0;
};

// Fails before any weights are made when the CUDA backend was asked for and no GPU is usable.
void CheckBackendAvailable(const std::string& backend) {
#ifdef PREFIXD_HYBRID_HAVE_CUDA
  if (backend == "cuda") OrDie(CudaDeviceDescription(0), "CUDA device");
#else
  if (backend == "cuda")
    Die("this build has no CUDA backend (nvcc was not found at configure time)");
#endif
}

// The CUDA backend has the Qwen3.5 kernels only; Mamba-2 and RWKV-7 run on the CPU for now.
void RequireCudaFamily(const ModelConfig& config) {
  if (config.family != ModelFamily::kQwen35) {
    Die("the CUDA backend runs the Qwen3.5 family only; use --backend cpu for " + config.name);
  }
}

Loaded LoadModel(const Common& common) {
  CheckBackendAvailable(common.backend);
  Loaded out;
  const auto start = Clock::now();
  out.config = OrDie(LoadConfig(common.model), "model config");
  const int threads = common.threads > 0
                          ? common.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  auto weights = std::make_shared<ModelWeights>(
      OrDie(LoadWeights(out.config, common.weights, threads), "weights"));
  out.weights_identity = weights->identity;
  if (common.backend == "cpu") {
    out.backend = OrDie(MakeCpuBackend(out.config, weights,
                                       {.threads = common.threads, .prefill_chunk = common.chunk}),
                        "CPU backend");
  } else if (common.backend == "cuda") {
    RequireCudaFamily(out.config);
#ifdef PREFIXD_HYBRID_HAVE_CUDA
    out.backend = OrDie(MakeCudaBackend(out.config, *weights, {.prefill_chunk = common.chunk}),
                        "CUDA backend");
#else
    Die("this build has no CUDA backend (nvcc was not found at configure time)");
#endif
  } else {
    Die("unknown backend '" + common.backend + "' (cpu|cuda)");
  }
  weights.reset();  // a device backend holds its own copy
  // One short forward pass touches every weight page and allocates scratch, so neither process
  // pays first-use costs inside a timed region.
  const std::vector<int32_t> warmup = PseudoRandomTokens(8, out.config.vocab_size, 12345);
  std::vector<float> logits(static_cast<size_t>(out.config.vocab_size));
  OrDie(out.backend->Forward(warmup, logits), "warm-up forward pass");
  out.backend->Reset();
  out.load_ms = MsSince(start);
  return out;
}

// What --transport asks for: `auto` is the shared path when the server's address is its unix
// socket, TCP otherwise.
LinkTransport AskedTransport(const Common& common) {
  if (common.transport == "auto") {
    return common.unix_socket.empty() ? LinkTransport::kTcp : LinkTransport::kShm;
  }
  if (common.transport == "tcp") return LinkTransport::kTcp;
  LinkTransport asked = LinkTransport::kShm;
  if (common.transport == "unix") {
    asked = LinkTransport::kUnix;
  } else if (common.transport != "shm") {
    Die("--transport must be auto, tcp, unix or shm");
  }
  if (common.unix_socket.empty()) Die("--transport " + common.transport + " needs --unix-socket");
  return asked;
}

PrefixdLink Connect(const Common& common) {
  ClientOptions options;
  options.io_timeout = std::chrono::milliseconds(600000);
  if (!common.cluster.empty()) {
    if (common.transport != "auto" && common.transport != "tcp") {
      Die("--cluster speaks TCP only (--transport tcp)");
    }
    ClusterOptions cluster;
    cluster.client = options;
    return PrefixdLink(OrDie(ClusterClient::Connect(common.cluster, cluster),
                             "connecting to the prefixd cluster at " + common.cluster));
  }
  const LinkTransport asked = AskedTransport(common);
  if (asked == LinkTransport::kTcp) {
    return PrefixdLink(
        OrDie(Client::Connect(common.host, common.port, options),
              "connecting to prefixd at " + common.host + ":" + std::to_string(common.port)));
  }
  Client client = OrDie(Client::ConnectUnix(common.unix_socket, options),
                        "connecting to prefixd at " + common.unix_socket);
  if (asked == LinkTransport::kUnix) return PrefixdLink(std::move(client), LinkTransport::kUnix);
  auto shm = std::make_unique<ShmClient>();
  const Status hello = shm->Connect(common.unix_socket, {}, options.io_timeout);
  if (hello.ok()) return PrefixdLink(std::move(client), std::move(shm));
  // Refused (shm-arenas off, a uid not in shm-allow-uids, an older server): the socket serves
  // the same bytes. Said once, here; the report names the path taken.
  std::fprintf(stderr,
               "prefixd-hybrid: the shared path is refused (%s); fetching over the unix socket\n",
               hello.message().c_str());
  PrefixdLink link(std::move(client), LinkTransport::kUnix);
  link.set_shm_refused(hello.message());
  return link;
}

KvTransport ResolveTransport(const Common& common, PrefixdLink& link) {
  if (common.kv_via == "ssm") return KvTransport::kSsm;
  // Any node knows the command table; the empty key names one.
  const bool has = OrDie(link.WithKey({}, [](Client& c) { return ServerHasVStore(c); }),
                         "asking the server for V-store commands");
  if (common.kv_via == "vstore") {
    if (!has) Die("the server has no V-store commands (V.STOREBATCH/V.FETCH/KV.PREFIX.REGISTER)");
    return KvTransport::kVStore;
  }
  if (common.kv_via != "auto") Die("--kv-via must be auto, vstore or ssm");
  if (!has) {
    std::fprintf(stderr,
                 "prefixd-hybrid: the server has no V-store; attention K/V go through "
                 "SSM.PREFIX (--kv-via ssm)\n");
  }
  return has ? KvTransport::kVStore : KvTransport::kSsm;
}

// A comma-separated list of integers in [min, max]; `what` names an item in errors.
std::vector<int64_t> ParseIntList(const std::string& text, const std::string& what, int64_t min,
                                  int64_t max) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno != 0 || v < min || v > max) {
      Die("bad " + what + " '" + item + "'");
    }
    out.push_back(v);
  }
  if (out.empty()) Die("no " + what + " given");
  return out;
}

std::vector<int64_t> ParseLengths(const std::string& text) {
  std::vector<int64_t> out =
      ParseIntList(text, "prefix length", 1, std::numeric_limits<int64_t>::max());
  std::sort(out.begin(), out.end());
  return out;
}

std::string TempPath(const std::string& stem) {
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + stem + "-XXXXXX";
  const int fd = ::mkstemp(path.data());
  if (fd < 0) Die("cannot create a temporary file in " + path);
  ::close(fd);
  return path;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) Die("cannot write " + path);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string SelfExe() {
  std::string path(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (n <= 0) Die("cannot find this executable (/proc/self/exe)");
  path.resize(static_cast<size_t>(n));
  return path;
}

// Runs `prefixd-hybrid warm ...` and waits for it; false if it failed.
bool RunWarmProcess(const Common& common, KvTransport kv, const std::string& request,
                    const std::string& result) {
  std::vector<std::string> args = {SelfExe(),   "warm",
                                   "--model",   common.model,
                                   "--weights", common.weights,
                                   "--backend", common.backend,
                                   "--threads", std::to_string(common.threads),
                                   "--chunk",   std::to_string(common.chunk),
                                   "--kv-via",  std::string(KvTransportName(kv)),
                                   "--verify",  common.verify ? "true" : "false",
                                   "--request", request,
                                   "--result",  result};
  if (common.cluster.empty()) {
    args.insert(args.end(), {"--host", common.host, "--port", std::to_string(common.port),
                             "--transport", common.transport});
    if (!common.unix_socket.empty()) args.insert(args.end(), {"--unix-socket", common.unix_socket});
  } else {
    args.insert(args.end(), {"--cluster", common.cluster});
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return false;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return false;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// One row from repeated trials of a length: the median cold TTFT, and the warm trial with the
// median warm TTFT (so its fetch / hydrate / suffix split stays consistent). Correctness counts
// take the worst trial.
SweepRow CombineTrials(const std::vector<SweepRow>& trials) {
  auto median_by = [&](auto key) {
    std::vector<SweepRow> sorted = trials;
    std::sort(sorted.begin(), sorted.end(),
              [&](const SweepRow& a, const SweepRow& b) { return key(a) < key(b); });
    return sorted[sorted.size() / 2];
  };
  const SweepRow cold = median_by([](const SweepRow& r) { return r.cold_ttft_ms; });
  SweepRow row = median_by([](const SweepRow& r) { return r.warm_ttft_ms; });
  row.cold_ttft_ms = cold.cold_ttft_ms;
  row.cold_prefill_ms = cold.cold_prefill_ms;
  row.store_ms = cold.store_ms;
  for (const SweepRow& t : trials) {
    row.bitexact_layers = std::min(row.bitexact_layers, t.bitexact_layers);
    row.agreeing_tokens = std::min(row.agreeing_tokens, t.agreeing_tokens);
    if (!t.warm_hit) {
      row.warm_hit = false;
      row.miss_reason = t.miss_reason;
    }
  }
  return row;
}

int RunSweep(const Common& common, const SweepArgs& args) {
  const std::vector<int64_t> lengths = ParseLengths(args.lengths);
  if (args.suffix_tokens < 1) Die("--suffix-tokens must be at least 1 (the first token needs it)");
  if (args.decode_tokens < 1) Die("--decode-tokens must be at least 1");
  std::fprintf(stderr, "prefixd-hybrid: loading %s (%s weights, %s backend)...\n",
               common.model.c_str(), common.weights.c_str(), common.backend.c_str());
  Loaded model = LoadModel(common);
  const ModelConfig& config = model.config;
  Backend& backend = *model.backend;
  std::fprintf(stderr, "prefixd-hybrid: %s\nprefixd-hybrid: loaded in %.1f s\n",
               config.Summary().c_str(), model.load_ms / 1000);
#ifdef PREFIXD_HYBRID_HAVE_CUDA
  if (common.backend == "cuda") {
    std::fprintf(stderr, "prefixd-hybrid: GPU %s\n",
                 OrDie(CudaDeviceDescription(0), "CUDA device").c_str());
  }
#endif
  if (common.backend == "cpu") {
    std::fprintf(stderr, "prefixd-hybrid: OpenBLAS kernels: %s\n", BlasCoreName().c_str());
    if (const std::string hint = BlasCoreHint(); !hint.empty()) {
      std::fprintf(stderr, "prefixd-hybrid: note: %s\n", hint.c_str());
    }
  }
  PrefixdLink link = Connect(common);
  const KvTransport kv = ResolveTransport(common, link);
  HybridPrefixCache cache(config, {.kv = kv, .verify_digests = common.verify});
  const double loopback = MeasureLoopbackGbps(static_cast<uint64_t>(args.loopback_mb) << 20, 3);
  std::fprintf(stderr, "prefixd-hybrid: loopback TCP %.2f GB/s; K/V via %s\n", loopback,
               std::string(KvTransportName(kv)).c_str());

  std::vector<SweepRow> rows;
  std::vector<float> logits(static_cast<size_t>(config.vocab_size));
  const int repeats = std::max(args.repeats, 1);
  std::string warm_transport;  // the path the warm processes' fetches took
  ProgressBar bar(static_cast<int>(lengths.size()) * repeats);
  bool all_good = true;
  for (size_t step = 0; step < lengths.size(); ++step) {
    const int64_t length = lengths[step];
    const std::vector<int32_t> prefix =
        PseudoRandomTokens(length, config.vocab_size, args.prompt_seed);
    const std::vector<int32_t> suffix =
        PseudoRandomTokens(args.suffix_tokens, config.vocab_size, args.prompt_seed + 1000003);
    const std::string ns = PrefixNamespace(config, model.weights_identity, prefix);
    std::vector<SweepRow> trials;
    for (int rep = 0; rep < repeats; ++rep) {
      const int s = static_cast<int>(step) * repeats + rep;
      std::string label = "L=" + std::to_string(length);
      if (repeats > 1) label += " #" + std::to_string(rep + 1);
      OrDie(link.WithKey(ns, [&](Client& c) { return cache.Drop(c, ns); }),
            "dropping an old copy of " + ns);
      SweepRow row;
      row.prefix_tokens = length;

      // Cold: prefix, then (after an untimed pause to snapshot and store the prefix state)
      // suffix.
      backend.Reset(length + args.suffix_tokens + args.decode_tokens);
      auto start = Clock::now();
      OrDie(backend.Forward(prefix, {},
                            [&](int64_t done, int64_t total) {
                              bar.Update(s, label + " cold prefill", double(done) / total);
                            }),
            "cold prefill");
      row.cold_prefill_ms = MsSince(start);
      bar.Update(s, label + " store", 0);
      OrDie(backend.PullState(), "reading the device state");
      const std::vector<std::string> cold_digests = DigestState(backend.host_state());
      const StoreReport stored = OrDie(
          link.WithKey(ns, [&](Client& c) { return cache.Store(c, ns, backend.host_state()); }),
          "store");
      row.store_ms = stored.ms;
      start = Clock::now();
      OrDie(backend.Forward(suffix, logits), "cold suffix");
      const int32_t first = Argmax(logits);
      row.cold_ttft_ms = row.cold_prefill_ms + MsSince(start);
      const std::vector<int32_t> cold_tokens =
          OrDie(GreedyContinue(backend, first, args.decode_tokens), "cold decode");

      // Warm: another process.
      bar.Update(s, label + " warm process", 0);
      const std::string request = TempPath("prefixd-hybrid-request");
      const std::string result = TempPath("prefixd-hybrid-result");
      WriteFile(request, Json{{"ns", ns},
                              {"prefix", prefix},
                              {"suffix", suffix},
                              {"decode_tokens", args.decode_tokens}}
                             .dump());
      const bool ran = RunWarmProcess(common, kv, request, result);
      Json warm = Json::parse(ReadFile(result), nullptr, false);
      if (args.keep) {
        std::fprintf(stderr,
                     "prefixd-hybrid: kept %s (replay: prefixd-hybrid warm ... --request)\n",
                     request.c_str());
      } else {
        std::remove(request.c_str());
      }
      std::remove(result.c_str());
      if (!ran || warm.is_discarded()) Die("the warm process failed at " + label);
      if (warm["blas_core"].get<std::string>() != BlasCoreName()) {
        std::fprintf(stderr,
                     "prefixd-hybrid: warning: the warm process used %s kernels, this one %s"
                     "; their results may differ in the last bits\n",
                     warm["blas_core"].get<std::string>().c_str(), BlasCoreName().c_str());
      }
      row.warm_ttft_ms = warm["ttft_ms"].get<double>();
      row.fetch_ms = warm["fetch_ms"].get<double>();
      row.hydrate_ms = warm["hydrate_ms"].get<double>();
      row.suffix_ms = warm["suffix_ms"].get<double>();
      row.state_bytes = warm["state_bytes"].get<uint64_t>();
      row.warm_hit = warm["hit"].get<bool>();
      row.miss_reason = warm["miss_reason"].get<std::string>();
      warm_transport = warm["transport"].get<std::string>();
      const auto warm_digests = warm["layer_digests"].get<std::vector<std::string>>();
      row.total_layers = static_cast<int>(cold_digests.size());
      for (size_t i = 0; i < cold_digests.size() && i < warm_digests.size(); ++i) {
        row.bitexact_layers += cold_digests[i] == warm_digests[i];
      }
      const auto warm_tokens = warm["tokens"].get<std::vector<int32_t>>();
      row.total_tokens = static_cast<int>(cold_tokens.size());
      for (size_t i = 0; i < cold_tokens.size() && i < warm_tokens.size(); ++i) {
        row.agreeing_tokens += cold_tokens[i] == warm_tokens[i];
      }
      if (!args.keep) {
        OrDie(link.WithKey(ns, [&](Client& c) { return cache.Drop(c, ns); }), "dropping " + ns);
      }
      bar.Update(s, label + " done", 1);
      bar.Finish();
      std::fprintf(stderr,
                   "%-14s cold %9.1f ms  warm %8.1f ms (fetch %.1f, hydrate %.1f, suffix %.1f) "
                   "%6.1fx  %s via %s  bit-exact %d/%d  tokens %d/%d\n",
                   label.c_str(), row.cold_ttft_ms, row.warm_ttft_ms, row.fetch_ms, row.hydrate_ms,
                   row.suffix_ms, row.speedup(), row.warm_hit ? "hit" : "MISS",
                   warm_transport.c_str(), row.bitexact_layers, row.total_layers,
                   row.agreeing_tokens, row.total_tokens);
      trials.push_back(row);
    }
    const SweepRow row = CombineTrials(trials);
    all_good = all_good && row.warm_hit && row.states_bitexact() &&
               row.agreeing_tokens == row.total_tokens;
    rows.push_back(row);
  }

  std::string csv = CsvHeader();
  for (const SweepRow& r : rows) csv += CsvRow(r);
  if (!args.csv.empty()) WriteFile(args.csv, csv);
  const std::string table = MarkdownTable(rows, loopback);
  std::printf("%s", table.c_str());
  if (!args.markdown.empty()) WriteFile(args.markdown, table);
  if (!args.chart.empty()) {
    WriteFile(args.chart,
              SvgChart(rows, config.name + ": cold prefill vs warm start from prefixd (" +
                                 common.backend + ")"));
  }
  std::printf("\nloopback %.2f GB/s; target = 1.5 x (state bytes / loopback + suffix ms)",
              loopback);
  std::printf("; warm fetches via %s", warm_transport.c_str());
  if (repeats > 1) std::printf("; medians of %d runs per length", repeats);
  std::printf("\n");
  return all_good ? 0 : 1;
}

struct TransportsArgs {
  std::string lengths = "8192,32768";
  std::string transports = "tcp,unix,shm";
  int suffix_tokens = 16;
  int decode_tokens = 4;
  int repeats = 3;
  uint64_t prompt_seed = 1;
  std::string markdown;
};

// One warm process's figures.
struct TransportTrial {
  std::string transport;  // the path taken
  double ttft_ms = 0, fetch_ms = 0, hydrate_ms = 0, suffix_ms = 0;
  uint64_t shared_bytes = 0;
  bool exact = false;  // a hit, every layer's digest the stored one's
  std::vector<int32_t> tokens;
};

// A state of `n` tokens filled with deterministic pseudo-random values in [-0.5, 0.5): the
// transport benchmark stores it in place of a prefill's (which it never runs), so that long
// prefixes cost no cold prefill. The warm process cannot tell the difference: it fetches,
// checks digests, and runs the suffix on whatever the state holds.
SequenceState SyntheticState(const ModelConfig& config, int64_t n, uint64_t seed) {
  SequenceState state(config);
  state.ResizeTokens(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (LayerState& layer : state.layers()) {
    for (FloatBuffer* b : {&layer.conv, &layer.recurrent, &layer.k, &layer.v, &layer.ffn_shift}) {
      float* p = b->data();
      for (size_t i = 0; i < b->size(); ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        p[i] = static_cast<float>(x >> 40) / static_cast<float>(1 << 24) - 0.5f;
      }
    }
  }
  return state;
}

// Warm TTFT of the same stored prefix state over each transport, side by side: per length, one
// synthetic state is stored, then warm processes fetch it over TCP, the unix socket and the
// shared arenas in turn (round robin, --repeats rounds), and every one must restore the stored
// digests and produce the same tokens. Rows report medians.
int RunTransports(const Common& common, const TransportsArgs& args) {
  const std::vector<int64_t> lengths = ParseLengths(args.lengths);
  std::vector<std::string> transports;
  {
    std::stringstream in(args.transports);
    for (std::string t; std::getline(in, t, ',');) transports.push_back(t);
  }
  if (transports.empty()) Die("no --transports given");
  if (common.unix_socket.empty()) Die("transports needs --unix-socket (and --host/--port)");
  for (const std::string& t : transports) {
    Common probe = common;
    probe.transport = t;
    (void)AskedTransport(probe);  // dies on a bad name
  }
  std::fprintf(stderr, "prefixd-hybrid: loading %s (%s weights, %s backend)...\n",
               common.model.c_str(), common.weights.c_str(), common.backend.c_str());
  Loaded model = LoadModel(common);
  const ModelConfig& config = model.config;
  Common store_common = common;
  store_common.transport = "tcp";
  PrefixdLink link = Connect(store_common);
  const KvTransport kv = ResolveTransport(store_common, link);
  HybridPrefixCache cache(config, {.kv = kv, .verify_digests = common.verify});
  std::string table =
      "| prefix tokens | state MB | transport | warm TTFT ms | fetch ms | hydrate ms | suffix ms "
      "| fetch + hydrate ms | TTFT ÷ TCP's | fetch + hydrate ÷ TCP's | MB in place | bit-exact "
      "| tokens as TCP's |\n|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n";
  bool all_good = true;
  for (const int64_t length : lengths) {
    const std::vector<int32_t> prefix =
        PseudoRandomTokens(length, config.vocab_size, args.prompt_seed);
    const std::vector<int32_t> suffix =
        PseudoRandomTokens(args.suffix_tokens, config.vocab_size, args.prompt_seed + 1000003);
    const std::string ns = PrefixNamespace(config, model.weights_identity, prefix);
    uint64_t state_bytes = 0;
    std::vector<std::string> stored;  // the digests every warm process must restore
    {
      const SequenceState state = SyntheticState(config, length, args.prompt_seed + length);
      OrDie(link.WithKey(ns, [&](Client& c) { return cache.Drop(c, ns); }), "dropping " + ns);
      OrDie(link.WithKey(ns, [&](Client& c) { return cache.Store(c, ns, state); }), "store");
      state_bytes = state.bytes();
      stored = DigestState(state);
    }
    const std::string request = TempPath("prefixd-hybrid-request");
    WriteFile(request, Json{{"ns", ns},
                            {"prefix", prefix},
                            {"suffix", suffix},
                            {"decode_tokens", args.decode_tokens}}
                           .dump());
    std::vector<std::vector<TransportTrial>> trials(transports.size());
    for (int rep = 0; rep < std::max(args.repeats, 1); ++rep) {
      for (size_t t = 0; t < transports.size(); ++t) {
        Common warm_common = common;
        warm_common.transport = transports[t];
        const std::string result = TempPath("prefixd-hybrid-result");
        const bool ran = RunWarmProcess(warm_common, kv, request, result);
        Json warm = Json::parse(ReadFile(result), nullptr, false);
        std::remove(result.c_str());
        if (!ran || warm.is_discarded()) Die("the warm process failed over " + transports[t]);
        TransportTrial trial;
        trial.transport = warm["transport"].get<std::string>();
        trial.ttft_ms = warm["ttft_ms"].get<double>();
        trial.fetch_ms = warm["fetch_ms"].get<double>();
        trial.hydrate_ms = warm["hydrate_ms"].get<double>();
        trial.suffix_ms = warm["suffix_ms"].get<double>();
        trial.shared_bytes = warm["shared_bytes"].get<uint64_t>();
        trial.exact = warm["hit"].get<bool>() &&
                      warm["layer_digests"].get<std::vector<std::string>>() == stored;
        trial.tokens = warm["tokens"].get<std::vector<int32_t>>();
        std::fprintf(stderr,
                     "L=%-7lld %-4s (asked %s) warm %8.1f ms (fetch %.1f, hydrate %.1f, suffix "
                     "%.1f) %.1f MB in place  %s\n",
                     static_cast<long long>(length), trial.transport.c_str(), transports[t].c_str(),
                     trial.ttft_ms, trial.fetch_ms, trial.hydrate_ms, trial.suffix_ms,
                     trial.shared_bytes / 1e6, trial.exact ? "bit-exact" : "NOT BIT-EXACT");
        trials[t].push_back(std::move(trial));
      }
    }
    std::remove(request.c_str());
    OrDie(link.WithKey(ns, [&](Client& c) { return cache.Drop(c, ns); }), "dropping " + ns);
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    struct Row {
      double ttft, fetch, hydrate, suffix;
    };
    std::vector<Row> rows;
    for (const auto& ts : trials) {
      std::vector<double> ttft, fetch, hydrate, suffix;
      for (const TransportTrial& x : ts) {
        ttft.push_back(x.ttft_ms), fetch.push_back(x.fetch_ms), hydrate.push_back(x.hydrate_ms);
        suffix.push_back(x.suffix_ms);
      }
      rows.push_back({median(ttft), median(fetch), median(hydrate), median(suffix)});
    }
    const Row& base = rows[0];
    for (size_t t = 0; t < transports.size(); ++t) {
      bool exact = true, same_tokens = true;
      for (const TransportTrial& x : trials[t]) {
        exact = exact && x.exact;
        same_tokens = same_tokens && x.tokens == trials[0][0].tokens;
      }
      all_good = all_good && exact && same_tokens;
      const Row& r = rows[t];
      char line[512];
      std::snprintf(
          line, sizeof line,
          "| %lld | %.1f | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.1f | "
          "%s | %s |\n",
          static_cast<long long>(length), state_bytes / 1e6, trials[t][0].transport.c_str(), r.ttft,
          r.fetch, r.hydrate, r.suffix, r.fetch + r.hydrate, r.ttft / base.ttft,
          (r.fetch + r.hydrate) / (base.fetch + base.hydrate), trials[t][0].shared_bytes / 1e6,
          exact ? "yes" : "NO", same_tokens ? "yes" : "NO");
      table += line;
    }
  }
  std::printf("%s", table.c_str());
  std::printf(
      "\nmedians of %d warm processes per transport and length; ratios against the first "
      "transport (%s)\n",
      std::max(args.repeats, 1), transports[0].c_str());
  if (!args.markdown.empty()) WriteFile(args.markdown, table);
  return all_good ? 0 : 1;
}

// Conversation workloads over the server's prefix index (chat.h); one process, the cold run of
// each turn in a paused interval after its warm one.
int RunChat(const Common& common, const ChatArgs& args) {
  if (!args.compare_csv.empty() && !args.options.compare) Die("--compare-csv needs --compare");
  std::fprintf(stderr, "prefixd-hybrid: loading %s (%s weights, %s backend)...\n",
               common.model.c_str(), common.weights.c_str(), common.backend.c_str());
  Loaded model = LoadModel(common);
  std::fprintf(stderr, "prefixd-hybrid: %s\nprefixd-hybrid: loaded in %.1f s\n",
               model.config.Summary().c_str(), model.load_ms / 1000);
  PrefixdLink link = Connect(common);
  const ChatReport report =
      OrDie(RunChatWorkload(*model.backend, model.weights_identity, link, args.options),
            "chat " + args.options.workload);
  const std::vector<ChatRow>& rows = report.rows;
  if (!args.csv.empty()) WriteFile(args.csv, ChatCsv(rows));
  if (!args.compare_csv.empty()) WriteFile(args.compare_csv, ChatCompareCsv(report));
  const std::string table =
      ChatMarkdown(report, model.config.name + ", " + args.options.workload + ", block " +
                               std::to_string(args.options.block) + ", restore " +
                               args.options.restore + " (" + common.backend + ")");
  std::printf("%s", table.c_str());
  if (!args.markdown.empty()) WriteFile(args.markdown, table);
  if (!args.json.empty()) {
    Json turns = Json::array();
    for (const ChatRow& r : rows) {
      turns.push_back({{"turn", r.turn},
                       {"matched_tokens", r.matched_tokens},
                       {"fetched_bytes", r.fetched_bytes},
                       {"states_bitexact", r.states_bitexact},
                       {"warm_digests", r.warm_digests},
                       {"warm_tokens", r.warm_tokens}});
    }
    const ChatFetchPath& p = report.path;
    const Json out = {{"transport", p.transport},
                      {"shm_refused", p.shm_refused},
                      {"shared_calls", p.shared_calls},
                      {"shared_bytes", p.shared_bytes},
                      {"shared_views", p.shared_views},
                      {"inline_bytes", p.inline_bytes},
                      {"socket_fallbacks", p.socket_fallbacks},
                      {"turns", turns}};
    WriteFile(args.json, out.dump(1));
  }
  if (!args.chart.empty()) {
    WriteFile(args.chart, ChatSvgChart(rows, model.config.name + ", " + args.options.workload +
                                                 ": cold prefill vs warm start from the prefix "
                                                 "index (" +
                                                 common.backend + ")"));
  }
  if (args.options.restore == "kv-only") return 0;  // the control: it ran, whatever it shows
  const std::string verdict = ChatVerdict(rows);
  if (!verdict.empty()) std::fprintf(stderr, "prefixd-hybrid: chat failed: %s\n", verdict.c_str());
  return verdict.empty() ? 0 : 1;
}

int RunWarm(const Common& common, const WarmArgs& args) {
  Json request = Json::parse(ReadFile(args.request), nullptr, false);
  if (request.is_discarded()) Die("cannot read the request " + args.request);
  const std::string ns = request["ns"].get<std::string>();
  const auto prefix = request["prefix"].get<std::vector<int32_t>>();
  const auto suffix = request["suffix"].get<std::vector<int32_t>>();
  const int decode_tokens = request["decode_tokens"].get<int>();
  if (prefix.empty() || suffix.empty()) Die("the request needs a prefix and a suffix");

  Loaded model = LoadModel(common);
  Backend& backend = *model.backend;
  if (PrefixNamespace(model.config, model.weights_identity, prefix) != ns) {
    Die("namespace mismatch: this process's model, weights or tokens differ from the cold one's");
  }
  PrefixdLink link = Connect(common);
  const KvTransport kv = ResolveTransport(common, link);
  HybridPrefixCache cache(model.config, {.kv = kv, .verify_digests = common.verify});
  const int64_t n = static_cast<int64_t>(prefix.size());
  backend.Reset(n + static_cast<int64_t>(suffix.size()) + decode_tokens);
  std::vector<float> logits(static_cast<size_t>(model.config.vocab_size));

  // A serving process is connected before requests arrive: in a cluster, to the namespace's node
  // too (ClusterClient connects to a node when a call first needs it).
  OrDie(link.WithKey(ns, [](Client& c) { return c.Ping(); }), "reaching the namespace's node");

  // The request arrives: fetch and hydrate, or prefill cold when the state is not all there.
  const auto start = Clock::now();
  FetchReport fetched = OrDie(
      link.WithKey(
          ns, [&](Client& c) { return cache.Fetch(c, ns, n, &backend.host_state(), link.shm()); }),
      "fetch");
  double paused_ms = 0;
  std::vector<std::string> digests;
  if (fetched.hit) {
    const auto push = Clock::now();
    OrDie(backend.PushState(), "uploading the state");
    fetched.hydrate_ms += MsSince(push);
    // Untimed: read the state back from where the model will use it (the device, for a device
    // backend) and digest that, so a bad upload cannot pass as bit-exact.
    const auto pause = Clock::now();
    OrDie(backend.PullState(), "reading the uploaded state back");
    digests = DigestState(backend.host_state());
    paused_ms = MsSince(pause);
  } else {
    OrDie(backend.Forward(prefix, {}), "fallback prefill");
    const auto pause = Clock::now();
    OrDie(backend.PullState(), "reading the device state");
    digests = DigestState(backend.host_state());
    paused_ms = MsSince(pause);
  }
  const auto suffix_start = Clock::now();
  OrDie(backend.Forward(suffix, logits), "suffix");
  const int32_t first = Argmax(logits);
  const double suffix_ms = MsSince(suffix_start);
  const double ttft_ms = MsSince(start) - paused_ms;
  const std::vector<int32_t> tokens =
      OrDie(GreedyContinue(backend, first, decode_tokens), "decode");

  Json out = {{"backend", std::string(backend.name())},
              {"blas_core", BlasCoreName()},
              {"hit", fetched.hit},
              {"miss_reason", fetched.miss_reason},
              {"fetch_ms", fetched.fetch_ms},
              {"hydrate_ms", fetched.hydrate_ms},
              {"suffix_ms", suffix_ms},
              {"ttft_ms", ttft_ms},
              {"state_bytes", fetched.hit ? fetched.bytes : backend.host_state().bytes()},
              {"transport", std::string(LinkTransportName(link.transport()))},
              {"shm_refused", link.shm_refused()},
              {"shared_bytes", fetched.shared_bytes},
              {"shared_views", fetched.shared_views},
              {"inline_bytes", fetched.inline_bytes},
              {"zero_bytes", fetched.zero_bytes},
              {"socket_fallbacks", fetched.socket_fallbacks},
              {"layer_digests", digests},
              {"tokens", tokens}};
  WriteFile(args.result, out.dump(1));
  return 0;
}

struct ForwardArgs {
  std::string tokens;
  int decode_tokens = 0;
  std::string out;
};

// One prompt through the model: the last token's logits, their argmax, every layer's state digest
// and a greedy continuation, as JSON. For checking this implementation against the upstream code
// on the same checkpoint (--model dir --weights dir) with the same token ids.
int RunForward(const Common& common, const ForwardArgs& args) {
  std::vector<int32_t> tokens;
  for (int64_t t : ParseIntList(args.tokens, "token id", 0, std::numeric_limits<int32_t>::max())) {
    tokens.push_back(static_cast<int32_t>(t));
  }
  Loaded model = LoadModel(common);
  std::vector<float> logits(static_cast<size_t>(model.config.vocab_size));
  OrDie(model.backend->Forward(tokens, logits), "forward");
  OrDie(model.backend->PullState(), "reading the device state");
  const std::vector<std::string> digests = DigestState(model.backend->host_state());
  const int32_t first = Argmax(logits);
  const std::vector<int32_t> greedy =
      OrDie(GreedyContinue(*model.backend, first, args.decode_tokens), "decode");
  const std::string text = Json{
      {"model", model.config.Summary()},
      {"weights", model.weights_identity},
      {"tokens", tokens.size()},
      {"argmax", first},
      {"logits", logits},
      {"layer_digests", digests},
      {"greedy", greedy}}.dump();
  if (args.out.empty()) {
    std::printf("%s\n", text.c_str());
  } else {
    WriteFile(args.out, text);
  }
  return 0;
}

struct CompareArgs {
  std::string lengths = "40,300,2100";
  int suffix_tokens = 7;
  int decode_tokens = 8;
  double tolerance = 2e-3;
};

// Every layer's state, judged per head: conv per key/value head of channels (when Dk = Dv),
// recurrent per value head, K and V per KV head.
void AddStateChecks(const ModelConfig& c, const SequenceState& got, const SequenceState& want,
                    std::vector<TensorAgreement>* out) {
  for (size_t i = 0; i < want.layers().size(); ++i) {
    const LayerState& a = got.layers()[i];
    const LayerState& b = want.layers()[i];
    const std::string at = "[" + std::to_string(i) + "]";
    if (b.kind == LayerKind::kLinear) {
      const bool square = c.linear_key_head_dim == c.linear_value_head_dim;
      const int64_t inner = square ? c.linear_key_head_dim : c.conv_dim();
      out->push_back(
          CompareTensor("conv" + at, a.conv.span(), b.conv.span(), c.conv_dim() / inner, inner));
      out->push_back(CompareTensor("recurrent" + at, a.recurrent.span(), b.recurrent.span(),
                                   c.linear_num_value_heads,
                                   c.linear_value_head_dim * c.linear_key_head_dim));
    } else {
      out->push_back(
          CompareTensor("k" + at, a.k.span(), b.k.span(), c.num_key_value_heads, c.head_dim));
      out->push_back(
          CompareTensor("v" + at, a.v.span(), b.v.span(), c.num_key_value_heads, c.head_dim));
    }
  }
}

// The backend under test (--backend: cuda, or cpu to exercise this command without a GPU, with
// its own --chunk) against the CPU backend with 512-token chunks on the same weights and
// prompts. Per length it checks, each per head and never letting a NaN or Inf pass: every
// layer's state after the prefix, the logits after the suffix and after each decode step
// (both fed the reference's greedy tokens, so one early difference cannot cascade), greedy-token
// agreement at every step, and that the backend repeats itself bit for bit, including across a
// pull / reset / push of its state (what hydration does).
int RunCompare(const Common& common, const CompareArgs& args) {
  CheckBackendAvailable(common.backend);
  // The per-head state checks below know the Qwen3.5 layer layout, and the CUDA backend runs
  // no other family yet.
  if (OrDie(LoadConfig(common.model), "model config").family != ModelFamily::kQwen35) {
    Die("compare checks the Qwen3.5 family only; Mamba-2 and RWKV-7 run on the CPU backend");
  }
  const ModelConfig config = OrDie(LoadConfig(common.model), "model config");
  const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  auto weights = std::make_shared<ModelWeights>(
      OrDie(LoadWeights(config, common.weights, threads), "weights"));
  auto ref = OrDie(MakeCpuBackend(config, weights, {.threads = common.threads}), "CPU backend");
  std::unique_ptr<Backend> dut;
  if (common.backend == "cpu") {
    dut = OrDie(
        MakeCpuBackend(config, weights, {.threads = common.threads, .prefill_chunk = common.chunk}),
        "CPU backend under test");
  } else if (common.backend == "cuda") {
#ifdef PREFIXD_HYBRID_HAVE_CUDA
    std::fprintf(stderr, "prefixd-hybrid: GPU %s\n",
                 OrDie(CudaDeviceDescription(0), "CUDA device").c_str());
    dut = OrDie(MakeCudaBackend(config, *weights, {.prefill_chunk = common.chunk}), "CUDA backend");
#else
    Die("this build has no CUDA backend (nvcc was not found at configure time)");
#endif
  } else {
    Die("unknown backend '" + common.backend + "' (cpu|cuda)");
  }
  if (args.suffix_tokens < 1 || args.decode_tokens < 1) {
    Die("--suffix-tokens and --decode-tokens must be at least 1");
  }
  std::printf("compare: %s (chunk %lld) against cpu (chunk 512); %s; tolerance %.1e per head\n",
              common.backend.c_str(), static_cast<long long>(common.chunk),
              config.Summary().c_str(), args.tolerance);
  bool ok = true;
  const size_t vocab = static_cast<size_t>(config.vocab_size);
  std::vector<float> want(vocab), got(vocab), got_suffix(vocab);
  for (int64_t length : ParseLengths(args.lengths)) {
    const auto start = Clock::now();
    const auto prefix = PseudoRandomTokens(length, config.vocab_size, 7);
    const auto suffix = PseudoRandomTokens(args.suffix_tokens, config.vocab_size, 8);
    const int64_t reserve = length + args.suffix_tokens + args.decode_tokens;
    CompareVerdict verdict;
    verdict.tolerance = args.tolerance;
    ref->Reset(reserve);
    dut->Reset(reserve);
    std::fprintf(stderr, "compare: L=%lld prefill\n", static_cast<long long>(length));
    OrDie(ref->Forward(prefix, {}), "reference prefill");
    OrDie(dut->Forward(prefix, {}), common.backend + " prefill");
    OrDie(dut->PullState(), "reading the state back");
    AddStateChecks(config, dut->host_state(), ref->host_state(), &verdict.tensors);
    const SequenceState saved = dut->host_state();
    const std::vector<std::string> digests = DigestState(saved);

    OrDie(ref->Forward(suffix, want), "reference suffix");
    OrDie(dut->Forward(suffix, got), common.backend + " suffix");
    got_suffix = got;
    verdict.tensors.push_back(
        CompareTensor("logits after the suffix", got, want, 1, static_cast<int64_t>(vocab)));
    std::vector<int32_t> want_tokens = {Argmax(want)};
    std::vector<int32_t> got_tokens = {Argmax(got)};
    for (int step = 1; step < args.decode_tokens; ++step) {
      const int32_t next = want_tokens.back();
      OrDie(ref->Forward({&next, 1}, want), "reference decode");
      OrDie(dut->Forward({&next, 1}, got), common.backend + " decode");
      verdict.tensors.push_back(CompareTensor("logits at decode step " + std::to_string(step), got,
                                              want, 1, static_cast<int64_t>(vocab)));
      want_tokens.push_back(Argmax(want));
      got_tokens.push_back(Argmax(got));
    }
    verdict.tokens = CompareTokens(got_tokens, want_tokens);

    // Repeatability: a fresh prefill gives the same state bits; the pushed state the same logits.
    dut->Reset(reserve);
    OrDie(dut->Forward(prefix, {}), common.backend + " prefill again");
    OrDie(dut->PullState(), "reading the state back");
    verdict.repeat_state = DigestState(dut->host_state()) == digests;
    dut->Reset(reserve);
    dut->host_state() = saved;
    OrDie(dut->PushState(), "pushing the state");
    OrDie(dut->Forward(suffix, got), common.backend + " suffix after push");
    verdict.repeat_logits = std::memcmp(got.data(), got_suffix.data(), vocab * sizeof(float)) == 0;

    const bool pass = verdict.pass();
    ok = ok && pass;
    double state_error = 0;  // NaN as soon as one state tensor is not finite
    for (const char* kind : {"conv", "recurrent", "k", "v"}) {
      const double e = verdict.Worst(kind);
      if (std::isnan(e) || e > state_error) state_error = e;
    }
    std::printf(
        "L=%-6lld logits rel err %.2e (suffix + %d decode steps)  state rel err %.2e  "
        "greedy %d/%d  repeat: state %s, logits after push %s  (%.1f s)  %s\n",
        static_cast<long long>(length), verdict.Worst("logits"), args.decode_tokens - 1,
        state_error, verdict.tokens.agree, verdict.tokens.total,
        verdict.repeat_state ? "bit-exact" : "DIFFERS",
        verdict.repeat_logits ? "bit-exact" : "DIFFER", MsSince(start) / 1000,
        pass ? "ok" : "FAIL");
    for (const std::string& failure : verdict.Failures())
      std::printf("    FAIL %s\n", failure.c_str());
    std::fflush(stdout);
  }
  return ok ? 0 : 1;
}

struct LogitsArgs {
  int64_t prompt_tokens = 64;
  uint64_t prompt_seed = 1;
  int decode_tokens = 8;
  std::string out;
};

// Greedy decoding from a pseudo-random prompt, for comparison with another implementation
// (scripts/hf_reference.py runs transformers on the same checkpoint): writes OUT.json (the
// prompt, the greedy tokens, timings) and OUT.f32, the logits as raw little-endian fp32
// [decode_tokens, vocab]: row 0 after the prompt, row s after feeding greedy token s − 1.
int RunLogits(const Common& common, const LogitsArgs& args) {
  if (args.prompt_tokens < 1 || args.decode_tokens < 1) {
    Die("--prompt-tokens and --decode-tokens must be at least 1");
  }
  Loaded model = LoadModel(common);
  Backend& backend = *model.backend;
  const size_t vocab = static_cast<size_t>(model.config.vocab_size);
  const auto prompt =
      PseudoRandomTokens(args.prompt_tokens, model.config.vocab_size, args.prompt_seed);
  backend.Reset(args.prompt_tokens + args.decode_tokens);
  std::vector<float> all(vocab * static_cast<size_t>(args.decode_tokens));
  const auto start = Clock::now();
  OrDie(backend.Forward(prompt, {all.data(), vocab}), "prefill");
  const double prefill_ms = MsSince(start);
  std::vector<int32_t> tokens = {Argmax({all.data(), vocab})};
  for (int step = 1; step < args.decode_tokens; ++step) {
    const int32_t last = tokens.back();
    std::span<float> row(all.data() + static_cast<size_t>(step) * vocab, vocab);
    OrDie(backend.Forward({&last, 1}, row), "decode");
    tokens.push_back(Argmax(row));
  }
  WriteFile(args.out + ".f32",
            std::string(reinterpret_cast<const char*>(all.data()), all.size() * sizeof(float)));
  WriteFile(args.out + ".json", Json{{"backend", common.backend},
                                     {"model", model.config.Summary()},
                                     {"vocab", vocab},
                                     {"prompt", prompt},
                                     {"tokens", tokens},
                                     {"prefill_ms", prefill_ms}}
                                    .dump());
  return 0;
}

void AddCommon(CLI::App* app, Common* c) {
  app->add_option("--model", c->model,
                  "tiny | small | qwen3.5-0.8b | qwen3.5-4b | mamba2-tiny | mamba2-130m | "
                  "mamba2-370m | rwkv7-tiny | rwkv7-0.1b | config.json")
      ->capture_default_str();
  app->add_option("--weights", c->weights, "synthetic | synthetic:<seed> | file.safetensors | dir")
      ->capture_default_str();
  app->add_option("--backend", c->backend, "cpu | cuda")->capture_default_str();
  CLI::Option* host = app->add_option("--host", c->host, "prefixd host")->capture_default_str();
  CLI::Option* port = app->add_option("--port", c->port, "prefixd port")->capture_default_str();
  CLI::Option* cluster =
      app->add_option("--cluster", c->cluster,
                      "a prefixd (Redis Cluster) node's host:port, instead of --host/--port: every "
                      "call goes to the node serving its namespace")
          ->excludes(host)
          ->excludes(port);
  app->add_option("--unix-socket", c->unix_socket,
                  "the server's unix socket (same host): fetches read the server's shared arenas "
                  "(SHM.HELLO), or the socket where it refuses them")
      ->excludes(cluster);
  app->add_option("--transport", c->transport,
                  "auto (shm with --unix-socket, else tcp) | tcp (--host/--port) | unix (the "
                  "socket's bytes) | shm (the shared arenas, the socket where refused)")
      ->capture_default_str();
  app->add_option("--threads", c->threads, "CPU threads (0: one per core)")->capture_default_str();
  app->add_option("--chunk", c->chunk, "prefill chunk in tokens")->capture_default_str();
  app->add_option("--kv-via", c->kv_via, "attention K/V transport: auto | vstore | ssm")
      ->capture_default_str();
  app->add_option("--verify", c->verify, "check fetched layers against their digests")
      ->capture_default_str();
}

}  // namespace
}  // namespace prefixd::hybrid

int main(int argc, char** argv) {
  using namespace prefixd::hybrid;
  CLI::App app{
      "prefixd-hybrid: warm vs cold time to first token of a Qwen3.5 hybrid, Mamba-2 or RWKV-7 "
      "model, with its prefix state in prefixd"};
  app.require_subcommand(1);
  Common sweep_common, warm_common;
  SweepArgs sweep;
  WarmArgs warm;
  CLI::App* sweep_cmd = app.add_subcommand("sweep", "Cold vs warm TTFT for each prefix length");
  AddCommon(sweep_cmd, &sweep_common);
  sweep_cmd->add_option("--lengths", sweep.lengths, "prefix lengths, comma-separated")
      ->capture_default_str();
  sweep_cmd->add_option("--suffix-tokens", sweep.suffix_tokens, "prompt tokens after the prefix")
      ->capture_default_str();
  sweep_cmd->add_option("--decode-tokens", sweep.decode_tokens, "greedy tokens to compare")
      ->capture_default_str();
  sweep_cmd->add_option("--prompt-seed", sweep.prompt_seed, "seed of the pseudo-random prompt")
      ->capture_default_str();
  sweep_cmd->add_option("--csv", sweep.csv, "write the CSV here");
  sweep_cmd->add_option("--chart", sweep.chart, "write the SVG chart here");
  sweep_cmd->add_option("--markdown", sweep.markdown, "write the markdown table here");
  sweep_cmd->add_flag("--keep", sweep.keep,
                      "leave each prefix state in the server and its warm request file");
  sweep_cmd->add_option("--loopback-mb", sweep.loopback_mb, "bytes for the loopback probe (MiB)")
      ->capture_default_str();
  sweep_cmd
      ->add_option("--repeats", sweep.repeats,
                   "trials per length; rows report medians (worst correctness)")
      ->capture_default_str();
  CLI::App* warm_cmd =
      app.add_subcommand("warm",
                         "One warm start: fetch, hydrate, suffix, decode (the sweep runs "
                         "this as its second process)");
  AddCommon(warm_cmd, &warm_common);
  warm_cmd->add_option("--request", warm.request, "JSON: ns, prefix, suffix, decode_tokens")
      ->required();
  warm_cmd->add_option("--result", warm.result, "JSON written with timings, digests, tokens")
      ->required();
  Common transports_common;
  TransportsArgs transports;
  CLI::App* transports_cmd = app.add_subcommand(
      "transports",
      "Warm TTFT of one stored (synthetic) prefix state over TCP, the unix socket and the shared "
      "arenas, side by side");
  AddCommon(transports_cmd, &transports_common);
  transports_cmd->add_option("--lengths", transports.lengths, "prefix lengths, comma-separated")
      ->capture_default_str();
  transports_cmd
      ->add_option("--transports", transports.transports, "tcp, unix, shm: the first is the base")
      ->capture_default_str();
  transports_cmd
      ->add_option("--suffix-tokens", transports.suffix_tokens, "prompt tokens after the prefix")
      ->capture_default_str();
  transports_cmd->add_option("--decode-tokens", transports.decode_tokens, "greedy tokens compared")
      ->capture_default_str();
  transports_cmd->add_option("--repeats", transports.repeats, "warm processes per transport")
      ->capture_default_str();
  transports_cmd->add_option("--markdown", transports.markdown, "write the markdown table here");
  Common chat_common;
  ChatArgs chat;
  CLI::App* chat_cmd = app.add_subcommand(
      "chat", "Conversation turns over the prefix index: match, hydrate, prefill the rest");
  AddCommon(chat_cmd, &chat_common);
  ChatOptions& co = chat.options;
  chat_cmd->add_option("--workload", co.workload, "multiturn | fanout | branch")
      ->capture_default_str();
  chat_cmd->add_option("--turns", co.turns, "turns (at least 2)")->capture_default_str();
  chat_cmd->add_option("--block", co.block, "tokens per block")->capture_default_str();
  chat_cmd->add_option("--restore", co.restore, "full | kv-only (negative control)")
      ->capture_default_str();
  chat_cmd->add_option("--system-tokens", co.system_tokens, "shared system prompt")
      ->capture_default_str();
  chat_cmd->add_option("--message-tokens", co.message_tokens, "tokens of each new message")
      ->capture_default_str();
  chat_cmd->add_option("--reply-tokens", co.reply_tokens, "greedy tokens per turn")
      ->capture_default_str();
  chat_cmd->add_option("--prompt-seed", co.seed, "seed of the pseudo-random messages")
      ->capture_default_str();
  chat_cmd->add_option("--csv", chat.csv, "write the CSV here");
  chat_cmd->add_option("--markdown", chat.markdown, "write the markdown table here");
  chat_cmd->add_option("--chart", chat.chart, "write the SVG chart here");
  chat_cmd->add_option("--json", chat.json,
                       "write the fetch path and, per turn, the warm state's layer digests and "
                       "reply tokens here");
  chat_cmd->add_flag("--compare", co.compare,
                     "also run each prompt under exact-key lookup and under states kept only at "
                     "multiples of --align-block, and report them beside the prefix index");
  chat_cmd
      ->add_option("--align-block", co.align_block,
                   "--compare: the aligned policy's block (vLLM's Qwen3.5-4B: 528)")
      ->capture_default_str();
  chat_cmd->add_option("--compare-csv", chat.compare_csv,
                       "--compare: write the per-turn comparison and TTFT bound here");
  chat_cmd
      ->add_option("--loopback-mb", co.loopback_mb,
                   "MiB fetched from the server to measure its bandwidth (the TTFT bound)")
      ->capture_default_str();
  Common compare_common;
  compare_common.backend = "cuda";
  CompareArgs compare;
  CLI::App* compare_cmd = app.add_subcommand(
      "compare",
      "A backend (CUDA by default) against the CPU backend: agreement and repeatability");
  AddCommon(compare_cmd, &compare_common);
  compare_cmd->add_option("--lengths", compare.lengths, "prefix lengths, comma-separated")
      ->capture_default_str();
  compare_cmd
      ->add_option("--tolerance", compare.tolerance,
                   "largest relative error allowed, per head (of max |reference| in the head)")
      ->capture_default_str();
  compare_cmd
      ->add_option("--suffix-tokens", compare.suffix_tokens, "prompt tokens after the prefix")
      ->capture_default_str();
  compare_cmd->add_option("--decode-tokens", compare.decode_tokens, "greedy tokens compared")
      ->capture_default_str();
  Common logits_common;
  LogitsArgs logits;
  CLI::App* logits_cmd = app.add_subcommand(
      "logits", "Greedy decoding from a pseudo-random prompt; writes the logits and tokens");
  AddCommon(logits_cmd, &logits_common);
  logits_cmd->add_option("--prompt-tokens", logits.prompt_tokens, "prompt length")
      ->capture_default_str();
  logits_cmd->add_option("--prompt-seed", logits.prompt_seed, "seed of the pseudo-random prompt")
      ->capture_default_str();
  logits_cmd->add_option("--decode-tokens", logits.decode_tokens, "greedy tokens (logits rows)")
      ->capture_default_str();
  logits_cmd->add_option("--out", logits.out, "writes OUT.json and OUT.f32")->required();
  Common forward_common;
  ForwardArgs forward;
  CLI::App* forward_cmd = app.add_subcommand(
      "forward", "One prompt through the model: logits, state digests, greedy tokens (JSON)");
  AddCommon(forward_cmd, &forward_common);
  forward_cmd->add_option("--tokens", forward.tokens, "prompt token ids, comma-separated")
      ->required();
  forward_cmd->add_option("--decode-tokens", forward.decode_tokens, "greedy tokens to append")
      ->capture_default_str();
  forward_cmd->add_option("--out", forward.out, "write the JSON here (default: stdout)");
  CLI11_PARSE(app, argc, argv);
  // A bad --transport fails before any model is loaded.
  for (auto [cmd, common] :
       {std::pair{sweep_cmd, &sweep_common}, {warm_cmd, &warm_common}, {chat_cmd, &chat_common}}) {
    if (cmd->parsed() && common->cluster.empty()) (void)AskedTransport(*common);
  }
  if (sweep_cmd->parsed()) return RunSweep(sweep_common, sweep);
  if (chat_cmd->parsed()) return RunChat(chat_common, chat);
  if (transports_cmd->parsed()) return RunTransports(transports_common, transports);
  if (forward_cmd->parsed()) return RunForward(forward_common, forward);
  if (compare_cmd->parsed()) return RunCompare(compare_common, compare);
  if (logits_cmd->parsed()) return RunLogits(logits_common, logits);
  return RunWarm(warm_common, warm);
}
