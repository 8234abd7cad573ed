// /metrics: the server's figures as Prometheus metric families. Families are grouped by source;
// a store or tier adds its own group to kGroups below (evictions and the disk tier go there).
#include "commands/metrics.h"

#include <charconv>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "engine/command.h"
#include "engine/command_stats.h"
#include "engine/engine.h"
#include "engine/registry.h"

namespace prefixd::commands {

uint64_t ResidentBytes();  // info.cc

namespace {

// Upper bounds of the command latency histogram, in seconds.
constexpr double kLatencyBounds[] = {0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001,
                                     0.0025,  0.005,    0.01,    0.025,  0.1,     0.5,    1};

// Label values escaped as the exposition format asks: backslash, double quote, newline.
std::string Escape(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? 'n' : c;
    if (c == '\n') out[out.size() - 2] = '\\';
  }
  return out;
}

// The shortest text that reads back as `v`.
std::string Number(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  void Family(std::string_view name, std::string_view type, std::string_view help) {
    out_.append("# HELP ").append(name).append(" ").append(help).append("\n");
    out_.append("# TYPE ").append(name).append(" ").append(type).append("\n");
  }
  void Sample(std::string_view name, double value, std::string_view labels = {}) {
    out_.append(name);
    if (!labels.empty()) out_.append("{").append(labels).append("}");
    out_.append(" ").append(Number(value)).append("\n");
  }
  // A family with one unlabelled sample.
  void One(std::string_view name, std::string_view type, std::string_view help, double value) {
    Family(name, type, help);
    Sample(name, value);
  }

 private:
  std::string& out_;
};

void ServerGroup(Engine& e, Writer& w) {
  w.One("prefixd_uptime_seconds", "gauge", "Seconds since the server started.",
        static_cast<double>(e.UptimeSeconds()));
  w.One("prefixd_connected_clients", "gauge", "Client connections open now.",
        static_cast<double>(e.ClientCount()));
  w.One("prefixd_connections_received_total", "counter", "Connections accepted since start.",
        static_cast<double>(e.stats().total_connections.load()));
  w.One("prefixd_rejected_connections_total", "counter", "Connections refused by maxclients.",
        static_cast<double>(e.stats().rejected_connections.load()));
}

void MemoryGroup(Engine& e, Writer& w) {
  uint64_t clients = 0;
  for (const auto& c : e.Clients()) clients += c->total_bytes.load(std::memory_order_relaxed);
  w.One("prefixd_memory_used_bytes", "gauge",
        "Bytes held for data and client buffers (INFO used_memory).",
        static_cast<double>(e.UsedMemory() + clients));
  w.One("prefixd_memory_rss_bytes", "gauge", "Resident set size of the process.",
        static_cast<double>(ResidentBytes()));
  w.One("prefixd_memory_max_bytes", "gauge", "The maxmemory setting (0: no limit).",
        static_cast<double>(e.settings().Int(Setting::kMaxMemory)));
  w.One("prefixd_memory_clients_bytes", "gauge", "Bytes held by client buffers.",
        static_cast<double>(clients));
}

void StoresGroup(Engine& e, Writer& w) {
  store::StoreStats s = e.StateStats();
  store::VectorStoreStats v = e.VectorStats();
  w.Family("prefixd_store_keys", "gauge", "Keys per store: SSM sessions, V-store sessions.");
  w.Sample("prefixd_store_keys", static_cast<double>(s.sessions), "store=\"ssm\"");
  w.Sample("prefixd_store_keys", static_cast<double>(v.sessions), "store=\"vstore\"");
  w.Family("prefixd_store_entries", "gauge",
           "Entries per store: SSM (session, layer) blobs, V-store layers.");
  w.Sample("prefixd_store_entries", static_cast<double>(s.entries), "store=\"ssm\"");
  w.Sample("prefixd_store_entries", static_cast<double>(v.layers), "store=\"vstore\"");
  w.Family("prefixd_store_bytes", "gauge",
           "Stored bytes per store (prefix_index: its payload and index together).");
  w.Sample("prefixd_store_bytes", static_cast<double>(s.payload_bytes), "store=\"ssm\"");
  w.Sample("prefixd_store_bytes", static_cast<double>(v.payload_bytes), "store=\"vstore\"");
  uint64_t prefix_index_bytes = 0;  // blocks, checkpoints and their index, every database's
  e.databases().ForEach(
      [&](size_t, store::Database& db) { prefix_index_bytes += db.prefixes.MemoryBytes(); });
  w.Sample("prefixd_store_bytes", static_cast<double>(prefix_index_bytes),
           "store=\"prefix_index\"");
  w.Family("prefixd_store_overhead_bytes", "gauge", "Bookkeeping bytes per store.");
  w.Sample("prefixd_store_overhead_bytes", static_cast<double>(s.overhead_bytes), "store=\"ssm\"");
  w.Sample("prefixd_store_overhead_bytes", static_cast<double>(v.overhead_bytes),
           "store=\"vstore\"");
  w.One("prefixd_keyspace_hits_total", "counter", "Lookups that found their key.",
        static_cast<double>(e.stats().keyspace_hits.Sum()));
  w.One("prefixd_keyspace_misses_total", "counter", "Lookups that did not find their key.",
        static_cast<double>(e.stats().keyspace_misses.Sum()));
}

void KeyspaceGroup(Engine& e, Writer& w) {
  store::KeyspaceStats k;  // every database's
  const int64_t now = CoarseNowMs();
  e.databases().ForEach([&](size_t, store::Database& db) {
    const store::KeyspaceStats s = db.keys.Stats(now);
    k.keys += s.keys, k.volatile_keys += s.volatile_keys, k.ttl_sum_ms += s.ttl_sum_ms;
    for (size_t t = 0; t < store::kKeyTypeCount; ++t) k.keys_by_type[t] += s.keys_by_type[t];
    k.string_bytes += s.string_bytes;
  });
  w.One("prefixd_keys", "gauge", "Keys of every type (INFO keyspace keys).",
        static_cast<double>(k.keys));
  w.Family("prefixd_keys_by_type", "gauge", "Keys of each type, as TYPE names it.");
  for (size_t t = 0; t < store::kKeyTypeCount; ++t) {
    if (!store::KnownKeyType(t)) continue;
    const std::string label =
        "type=\"" + std::string(store::KeyTypeName(static_cast<store::KeyType>(t))) + "\"";
    w.Sample("prefixd_keys_by_type", static_cast<double>(k.keys_by_type[t]), label);
  }
  w.One("prefixd_string_bytes", "gauge", "Bytes of string values held in memory.",
        static_cast<double>(k.string_bytes));
  w.One("prefixd_keys_with_expiry", "gauge", "Keys with a time to live (INFO keyspace expires).",
        static_cast<double>(k.volatile_keys));
  w.One("prefixd_expired_keys_total", "counter", "Keys deleted because their time to live ran out.",
        static_cast<double>(e.stats().expired_keys.load()));
  w.One("prefixd_evicted_keys_total", "counter", "Keys evicted by maxmemory-policy.",
        static_cast<double>(e.stats().evicted_keys.load()));
}

void PersistenceGroup(Engine& e, Writer& w) {
  persist::Durability* d = e.durability();
  w.One("prefixd_persistence_enabled", "gauge", "1 when appendonly is on.", d != nullptr);
  if (persist::LoglessSnapshots* logless = e.logless_snapshots(); logless != nullptr) {
    // Without the log only SAVE and BGSAVE keep anything: how much they have not kept yet.
    const persist::PersistStats s = logless->Stats();
    w.One("prefixd_changes_since_last_save", "gauge", "Writes since the last snapshot.",
          static_cast<double>(s.changes_since_last_save));
    w.One("prefixd_last_save_timestamp_seconds", "gauge",
          "Unix time of the last snapshot (the start before one is written here, as LASTSAVE).",
          static_cast<double>(s.last_save_time));
  }
  if (d == nullptr) return;
  persist::PersistStats s = d->Stats();
  w.One("prefixd_log_written_lsn", "gauge", "Last log record written to the file.",
        static_cast<double>(s.log.written_lsn));
  w.One("prefixd_log_synced_lsn", "gauge", "Last log record fsynced.",
        static_cast<double>(s.log.synced_lsn));
  w.One("prefixd_persistence_lag_records", "gauge",
        "Log records written but not yet fsynced (durability lag).",
        static_cast<double>(s.log.written_lsn - std::min(s.log.synced_lsn, s.log.written_lsn)));
  w.One("prefixd_log_pending_records", "gauge", "Log records queued, not yet written.",
        static_cast<double>(s.log.pending_records));
  w.One("prefixd_log_bytes", "gauge", "Bytes in the log segments.",
        static_cast<double>(s.log.bytes));
  w.One("prefixd_changes_since_last_save", "gauge", "Writes since the last snapshot.",
        static_cast<double>(s.changes_since_last_save));
  w.One("prefixd_last_save_timestamp_seconds", "gauge",
        "Unix time of the last snapshot (the start before one is written here, as LASTSAVE).",
        static_cast<double>(s.last_save_time));
  w.One("prefixd_log_write_ok", "gauge", "1 while the log can be written.", s.log.write_ok);
}

void CommandsGroup(Engine& e, Writer& w) {
  std::vector<const CommandSpec*> specs;
  for (const CommandSpec* spec : e.registry->All()) {
    specs.push_back(spec);
    for (const CommandSpec& sub : spec->subcommands) specs.push_back(&sub);
  }
  auto label = [](const CommandSpec& s) { return "command=\"" + Escape(s.full_name) + "\""; };
  w.Family("prefixd_commands_total", "counter", "Calls per command (INFO commandstats).");
  for (const CommandSpec* s : specs) {
    if (uint64_t n = s->stats->calls.Sum()) w.Sample("prefixd_commands_total", n, label(*s));
  }
  w.Family("prefixd_commands_rejected_total", "counter",
           "Calls refused before running (arity, auth, OOM).");
  for (const CommandSpec* s : specs) {
    if (uint64_t n = s->stats->rejected_calls.Sum())
      w.Sample("prefixd_commands_rejected_total", n, label(*s));
  }
  w.Family("prefixd_commands_failed_total", "counter", "Calls that answered an error.");
  for (const CommandSpec* s : specs) {
    if (uint64_t n = s->stats->failed_calls.Sum())
      w.Sample("prefixd_commands_failed_total", n, label(*s));
  }
  w.Family("prefixd_command_duration_seconds", "histogram",
           "Time to run a command, reply queued (latency-tracking).");
  for (const CommandSpec* s : specs) {
    std::vector<uint64_t> counts = s->stats->latency.Snapshot();
    uint64_t total = 0;
    for (uint64_t c : counts) total += c;
    if (total == 0) continue;
    size_t i = 0;
    uint64_t below = 0;
    for (double bound : kLatencyBounds) {
      auto bound_ns = static_cast<uint64_t>(bound * 1e9);
      while (i < counts.size() && LatencyHistogram::UpperBound(i) <= bound_ns) below += counts[i++];
      w.Sample("prefixd_command_duration_seconds_bucket", static_cast<double>(below),
               label(*s) + ",le=\"" + Number(bound) + "\"");
    }
    w.Sample("prefixd_command_duration_seconds_bucket", static_cast<double>(total),
             label(*s) + ",le=\"+Inf\"");
    w.Sample("prefixd_command_duration_seconds_sum",
             static_cast<double>(s->stats->usec.Sum()) / 1e6, label(*s));
    w.Sample("prefixd_command_duration_seconds_count", static_cast<double>(total), label(*s));
  }
  w.Family("prefixd_error_replies_total", "counter", "Error replies by error code.");
  for (const auto& [code, n] : e.stats().errors.Counts()) {
    w.Sample("prefixd_error_replies_total", static_cast<double>(n),
             "code=\"" + Escape(code) + "\"");
  }
}

// Each group renders its families. The cache's eviction and disk-tier counters add a group here.
constexpr void (*kGroups[])(Engine&, Writer&) = {ServerGroup,   MemoryGroup,      StoresGroup,
                                                 KeyspaceGroup, PersistenceGroup, CommandsGroup};

}  // namespace

std::string PrometheusText(Engine& engine) {
  std::string out;
  Writer w(out);
  for (auto group : kGroups) group(engine, w);
  return out;
}

}  // namespace prefixd::commands
