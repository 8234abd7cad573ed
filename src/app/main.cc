// prefixd-server: parses the settings, wires the command engine to the network server and runs
// until SIGINT, SIGTERM or SHUTDOWN.
#include <signal.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <iostream>
#include <thread>

#include "app/metrics_listener.h"
#include "app/open_files.h"
#include "app/options.h"
#include "app/supervision.h"
#include "commands/families.h"
#include "commands/metrics.h"
#include "common/bytes.h"
#include "common/shm_arena.h"
#include "engine/engine.h"
#include "engine/memory_policy.h"
#include "engine/registry.h"
#include "server/server.h"

namespace {

spdlog::level::level_enum LogLevel(const std::string& name) {
  if (name == "debug") return spdlog::level::debug;
  if (name == "verbose") return spdlog::level::debug;
  if (name == "warning") return spdlog::level::warn;
  return spdlog::level::info;
}

prefixd::server::TlsOptions TlsFromSettings(const prefixd::Settings& s) {
  using prefixd::Setting;
  namespace server = prefixd::server;
  server::TlsOptions o;
  o.cert_file = s.String(Setting::kTlsCertFile);
  o.key_file = s.String(Setting::kTlsKeyFile);
  o.key_file_pass = s.String(Setting::kTlsKeyFilePass);
  o.ca_cert_file = s.String(Setting::kTlsCaCertFile);
  o.ca_cert_dir = s.String(Setting::kTlsCaCertDir);
  std::string auth = s.String(Setting::kTlsAuthClients);
  o.auth_clients = auth == "no"         ? server::TlsClientAuth::kNo
                   : auth == "optional" ? server::TlsClientAuth::kOptional
                                        : server::TlsClientAuth::kYes;
  o.protocols = s.String(Setting::kTlsProtocols);
  o.ciphers = s.String(Setting::kTlsCiphers);
  o.ciphersuites = s.String(Setting::kTlsCiphersuites);
  o.prefer_server_ciphers = s.Bool(Setting::kTlsPreferServerCiphers);
  o.session_caching = s.Bool(Setting::kTlsSessionCaching);
  o.session_cache_size = static_cast<int>(s.Int(Setting::kTlsSessionCacheSize));
  o.session_cache_timeout = static_cast<int>(s.Int(Setting::kTlsSessionCacheTimeout));
  return o;
}

// Opens this node's cluster view (nodes.conf, relative to the data directory). Its address is
// cluster-announce-ip, else the bind address, else loopback when bind is a wildcard; its port is
// cluster-announce-port, else the TCP (or TLS) port. Returns an error text.
std::string OpenCluster(const prefixd::Settings& s, const std::string& dir,
                        prefixd::commands::Engine& engine) {
  using prefixd::Setting;
  std::string path = s.String(Setting::kClusterConfigFile);
  if (!path.empty() && path[0] != '/') path = dir + "/" + path;
  std::string ip = s.String(Setting::kClusterAnnounceIp);
  if (ip.empty()) {
    std::string bind = s.String(Setting::kBind);
    ip = bind.substr(0, bind.find(' '));
    if (ip.empty() || ip == "*" || ip == "0.0.0.0" || ip == "::" || ip == "-::*") ip = "127.0.0.1";
  }
  auto port = static_cast<int>(s.Int(Setting::kClusterAnnouncePort));
  if (port == 0) port = static_cast<int>(s.Int(Setting::kPort));
  if (port == 0) port = static_cast<int>(s.Int(Setting::kTlsPort));
  std::string error;
  engine.cluster = prefixd::cluster::ClusterState::Open(path, ip, port, error);
  if (engine.cluster == nullptr) return error;
  auto t = engine.cluster->Snapshot();
  spdlog::info("Cluster node {} at {}: {} of 16384 slots assigned, {} nodes known ({})",
               t->Myself().id, t->Myself().Address(), t->assigned_slots, t->nodes.size(), path);
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  using namespace prefixd;
  Settings settings;
  app::StartupOptions startup;
  if (auto code = app::ParseCommandLine(argc, argv, settings, startup)) return *code;

  if (std::string logfile = settings.String(Setting::kLogFile); !logfile.empty()) {
    spdlog::set_default_logger(spdlog::basic_logger_mt("prefixd", logfile));
  }
  spdlog::set_level(LogLevel(settings.String(Setting::kLogLevel)));
  spdlog::flush_on(spdlog::level::info);

  // SIGINT/SIGTERM are taken by a waiting thread, never by an io thread mid-request.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::error_code ec;
  std::string dir = settings.String(Setting::kDir);
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    spdlog::critical("Can't create data directory '{}': {}", dir, ec.message());
    return 1;
  }

  int threads = static_cast<int>(settings.Int(Setting::kIoThreads));
  // 0: one per core but one, at least one. The core left over goes to what shares the machine
  // with the server and serves it: the kernel's network stack, the log thread, the clients (an
  // inference server, a load generator). On 2 cores one io thread served small pipelined
  // requests 15-40 % faster than two (docs/benchmarks.md); on many cores the rest scale out.
  if (threads == 0) {
    threads = static_cast<int>(std::max(2u, std::thread::hardware_concurrency()) - 1);
  }

  // Before the engine loads a value: how values' pages are asked for, and that every pooled
  // value of this run lies in a shared arena.
  SetHugePages(settings.Bool(Setting::kHugePages));
  if (settings.Bool(Setting::kShmArenas)) {
    // On by default, so a machine that cannot give one (an address-space limit, no memfd)
    // still runs: its values are served as bytes and SHM.HELLO says the arenas are off.
    if (std::string err = shm::EnableArenas(settings.Bool(Setting::kHugePages)); !err.empty()) {
      spdlog::warn("shm-arenas yes: {}; running without shared arenas", err);
    }
  }

  commands::Engine engine(settings);
  engine.config_file = startup.config_file;
  engine.executable = std::filesystem::absolute(argv[0], ec).string();
  engine.io_threads = threads;
  commands::Registry registry(engine, commands::AddCommands);

  if (settings.String(Setting::kAppendOnly) == "yes") {
    persist::DurabilityOptions durability;
    durability.dir = dir;
    durability.policy = persist::ParsePolicy(settings.String(Setting::kAppendFsync));
    durability.segment_bytes = static_cast<uint64_t>(settings.Int(Setting::kLogSegmentSize));
    durability.skip_corrupt = settings.String(Setting::kLogSkipCorrupt) == "yes";
    durability.auto_rewrite_percentage = settings.Int(Setting::kAutoRewritePercentage);
    durability.auto_rewrite_min_size =
        static_cast<uint64_t>(settings.Int(Setting::kAutoRewriteMinSize));
    durability.placed_while_recovering = [&engine](const persist::Mutation& m, uint16_t db) {
      commands::ColdWhileRecovering(engine, db, m);
    };
    auto d =
        std::make_unique<persist::Durability>(durability, persist::StoreSet(engine.databases()));
    if (Status opened = d->Open(); !opened.ok()) {
      spdlog::critical("Can't recover the data in '{}': {}", dir, opened.message());
      return 1;
    }
    engine.set_durability(std::move(d));
    // What recovery held at its highest counts as used_memory_peak, as Redis's loading does.
    engine.NotePeakMemory(engine.UsedMemory());
    if (uint64_t moved = commands::ColdAfterRecovery(engine); moved > 0) {
      spdlog::info("{} sessions past maxmemory went to the disk tier after recovery", moved);
    }
  } else {
    // What the directory holds is loaded; from here on only SAVE and BGSAVE write to it.
    persist::DurabilityOptions snapshots;
    snapshots.dir = dir;
    snapshots.skip_corrupt = settings.String(Setting::kLogSkipCorrupt) == "yes";
    auto s = std::make_unique<persist::LoglessSnapshots>(snapshots,
                                                         persist::StoreSet(engine.databases()));
    if (Status opened = s->Open(); !opened.ok()) {
      spdlog::critical("Can't load the data in '{}': {}", dir, opened.message());
      return 1;
    }
    engine.set_logless_snapshots(std::move(s));
    engine.NotePeakMemory(engine.UsedMemory());
    spdlog::warn(
        "appendonly is off: what is stored after start is kept only by SAVE or BGSAVE, and lost "
        "at exit otherwise");
  }

  if (settings.Bool(Setting::kClusterEnabled)) {
    if (std::string err = OpenCluster(settings, dir, engine); !err.empty()) {
      spdlog::critical("Can't start as a cluster node: {}", err);
      return 1;
    }
  }

  server::ServerOptions options;
  options.bind = settings.String(Setting::kBind);
  options.port = static_cast<uint16_t>(settings.Int(Setting::kPort));
  options.tls_port = static_cast<uint16_t>(settings.Int(Setting::kTlsPort));
  options.unix_socket = settings.String(Setting::kUnixSocket);
  options.unix_socket_perm = static_cast<int>(settings.Int(Setting::kUnixSocketPerm));
  options.io_threads = threads;
  options.backlog = static_cast<int>(settings.Int(Setting::kTcpBacklog));
  server::Server server(options, registry);
  if (options.tls_port != 0) {
    if (std::string err = server.ConfigureTls(TlsFromSettings(settings)); !err.empty()) {
      spdlog::critical("Failed to configure TLS: {}", err);
      return 1;
    }
  }
  try {
    server.Start();
  } catch (const std::exception& e) {
    spdlog::critical("Can't start: {}", e.what());
    return 1;
  }
  engine.set_shutdown_hook([&server] { server.Stop(); });
  if (!app::AdjustOpenFilesLimit(settings)) return 1;

  // Under a memory budget the buffer pool keeps at most 1/32 of it free for reuse: with the
  // budget counting everything else, page rounding included, RSS stays within 1.1x of maxmemory
  // plus the fixed overhead at start (docs/cache-design.md), the rest of the tenth left to heap
  // fragmentation.
  const auto fit_pool_to_budget = [&settings]() -> std::string {
    constexpr size_t kPoolShareOfBudget = 32;
    const int64_t budget = settings.Int(Setting::kMaxMemory);
    SetPooledFreeCap(budget > 0 ? std::min(DefaultPooledFreeCap(),
                                           static_cast<size_t>(budget) / kPoolShareOfBudget)
                                : DefaultPooledFreeCap());
    return {};
  };
  fit_pool_to_budget();

  // CONFIG SET puts these into effect (and undoes its change when they fail).
  settings.AddApplyHook({Setting::kMaxMemory}, fit_pool_to_budget);
  settings.AddApplyHook({Setting::kMaxClients},
                        [&settings] { return app::CheckMaxClients(settings); });
  settings.AddApplyHook({Setting::kTlsCertFile, Setting::kTlsKeyFile, Setting::kTlsKeyFilePass,
                         Setting::kTlsCaCertFile, Setting::kTlsCaCertDir, Setting::kTlsAuthClients,
                         Setting::kTlsProtocols, Setting::kTlsCiphers, Setting::kTlsCiphersuites,
                         Setting::kTlsPreferServerCiphers, Setting::kTlsSessionCaching,
                         Setting::kTlsSessionCacheSize, Setting::kTlsSessionCacheTimeout},
                        [&settings, &server, tls = options.tls_port != 0]() -> std::string {
                          if (!tls) return {};
                          std::string err = server.ConfigureTls(TlsFromSettings(settings));
                          if (err.empty()) {
                            spdlog::info("TLS configuration reloaded");
                            return {};
                          }
                          spdlog::warn("Failed to update TLS configuration: {}", err);
                          return "Unable to update TLS configuration. Check server logs.";
                        });

  engine.StartActiveExpiry();

  app::Supervision supervision(settings.String(Setting::kSupervised));
  app::MetricsListener metrics([&engine] { return commands::PrometheusText(engine); });
  if (int64_t port = settings.Int(Setting::kMetricsPort); port != 0) {
    if (std::string err =
            metrics.Start(settings.String(Setting::kMetricsBind), static_cast<uint16_t>(port));
        !err.empty()) {
      spdlog::critical("Can't start the metrics endpoint: {}", err);
      return 1;
    }
    spdlog::info("Prometheus metrics on http://{}:{}/metrics",
                 settings.String(Setting::kMetricsBind), metrics.port());
  }

  spdlog::info("prefixd {} (Redis {} wire) pid={}", commands::kPrefixdVersion,
               commands::kRedisCompatVersion, getpid());
  spdlog::info("Listening on {}{}{}; {} io threads; data dir {}",
               options.port != 0 ? fmt::format("{}:{}", options.bind, server.tcp_port())
                                 : std::string("no plain TCP port"),
               options.tls_port != 0 ? fmt::format(", TLS {}:{}", options.bind, server.tls_port())
                                     : std::string(),
               options.unix_socket.empty() ? "" : " and unix socket " + options.unix_socket,
               threads, std::filesystem::absolute(dir, ec).string());
  if (settings.Bool(Setting::kProtectedMode) && settings.String(Setting::kRequirePass).empty() &&
      options.bind != "127.0.0.1" && options.bind != "::1") {
    spdlog::warn(
        "protected-mode is on and no requirepass is set: only loopback and unix socket clients "
        "are served (set requirepass, or protected-mode no, to serve {})",
        options.bind);
  }
  spdlog::info("Persistence: appendonly {}, appendfsync {}", settings.String(Setting::kAppendOnly),
               settings.String(Setting::kAppendFsync));
  spdlog::info(
      "Limits: maxclients {}, proto-max-bulk-len {}, client-query-buffer-limit {}, "
      "max-sid-len {}, maxmemory {}",
      settings.Get(Setting::kMaxClients), settings.Get(Setting::kProtoMaxBulkLen),
      settings.Get(Setting::kClientQueryBufferLimit), settings.Get(Setting::kMaxSidLen),
      settings.Get(Setting::kMaxMemory));
  spdlog::info("Ready to accept connections");
  supervision.Ready("Ready to accept connections on port " + std::to_string(server.tcp_port()));

  std::atomic<bool> stopped{false};
  std::thread signal_waiter([&] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    if (!stopped.load()) {
      spdlog::warn("Received {}, shutting down", signal_number == SIGINT ? "SIGINT" : "SIGTERM");
      server.Stop();
    }
  });
  server.Run();
  stopped = true;
  // No expiry deletes may reach the log once it is closed.
  engine.StopActiveExpiry();
  supervision.Stopping();
  metrics.Stop();
  // Write and sync the log now, while the io contexts that durability waiters post to still
  // exist (the server is destroyed before the engine).
  engine.set_durability(nullptr);
  spdlog::info("prefixd is now ready to exit, bye bye...");
  // Wake the signal waiter if the stop came from SHUTDOWN rather than a signal.
  pthread_kill(signal_waiter.native_handle(), SIGTERM);
  signal_waiter.join();
  return 0;
}
