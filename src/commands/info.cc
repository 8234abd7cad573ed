// INFO: the server's figures in Redis's section format, with Redis's field names where they exist.
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>

#include "commands/families.h"
#include "common/ascii.h"
#include "common/clock.h"
#include "common/numbers.h"
#include "common/shm_arena.h"
#include "engine/engine.h"
#include "engine/shm_leases.h"

namespace prefixd::commands {
namespace {

using Fields = std::string;

void Field(std::string& out, std::string_view name, std::string_view value) {
  out.append(name).append(":").append(value).append("\r\n");
}
void Field(std::string& out, std::string_view name, uint64_t value) {
  Field(out, name, std::to_string(value));
}

}  // namespace

uint64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return pages_resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

namespace {

void ServerSection(Engine& e, std::string& out) {
  utsname u{};
  uname(&u);
  Field(out, "redis_version", kRedisCompatVersion);
  Field(out, "prefixd_version", kPrefixdVersion);
  Field(out, "redis_mode", "standalone");
  Field(out, "os", std::string(u.sysname) + " " + u.release + " " + u.machine);
  Field(out, "arch_bits", sizeof(void*) * 8);
  Field(out, "multiplexing_api", "epoll");
  Field(out, "process_id", static_cast<uint64_t>(getpid()));
  Field(out, "tcp_port", static_cast<uint64_t>(e.settings().Int(Setting::kPort)));
  Field(out, "uptime_in_seconds", static_cast<uint64_t>(e.UptimeSeconds()));
  Field(out, "uptime_in_days", static_cast<uint64_t>(e.UptimeSeconds() / 86400));
  Field(out, "io_threads_active", static_cast<uint64_t>(e.io_threads));
  Field(out, "executable", e.executable);
  Field(out, "config_file", e.config_file);
}

void ClientsSection(Engine& e, std::string& out) {
  Field(out, "connected_clients", e.ClientCount());
  Field(out, "maxclients", static_cast<uint64_t>(e.settings().Int(Setting::kMaxClients)));
  Field(out, "blocked_clients", uint64_t{0});
}

void MemorySection(Engine& e, std::string& out) {
  store::StoreStats s = e.StateStats();
  store::VectorStoreStats v = e.VectorStats();
  // As Redis: used_memory counts the data in every store and what the clients' buffers hold.
  // maxmemory is compared with the stores, the keyspace and the client buffers, less the stored
  // values replies send by reference (counted once, in their store): those are what
  // mem_not_counted_for_evict reports.
  // Leased bytes no store holds any more are in used_memory too (they are held): counted now.
  const uint64_t leased_orphans = ShmLeasedOrphanBytesNow();
  uint64_t clients = 0;
  for (const auto& c : e.Clients()) clients += c->total_bytes.load(std::memory_order_relaxed);
  const uint64_t dataset = s.payload_bytes + v.payload_bytes;
  const uint64_t used = e.UsedMemory() + clients;
  const uint64_t peak = e.NotePeakMemory(used);
  uint64_t rss = ResidentBytes();
  int64_t maxmemory = e.settings().Int(Setting::kMaxMemory);
  Field(out, "used_memory", used);
  Field(out, "used_memory_human", HumanBytes(used));
  Field(out, "used_memory_rss", rss);
  Field(out, "used_memory_rss_human", HumanBytes(rss));
  Field(out, "used_memory_peak", peak);
  Field(out, "used_memory_peak_human", HumanBytes(peak));
  Field(out, "used_memory_overhead", used - std::min(used, dataset));
  Field(out, "used_memory_dataset", dataset);
  Field(out, "mem_clients_slaves", uint64_t{0});
  Field(out, "mem_clients_normal", clients);
  Field(out, "maxmemory", static_cast<uint64_t>(maxmemory));
  Field(out, "maxmemory_human", HumanBytes(static_cast<uint64_t>(maxmemory)));
  Field(out, "maxmemory_policy", e.settings().String(Setting::kMaxMemoryPolicy));
  Field(out, "mem_not_counted_for_evict", used - std::min(used, CountedMemory(e)));
  Field(out, "buffer_pool_free_bytes", PooledFreeBytes());
  // Same-host transport: arenas made, what leases hold (the leased values' lengths, each lease
  // counted), and the part of used_memory that only leases keep: whole allocations whose key
  // was deleted, overwritten, flushed, expired or evicted while leased.
  Field(out, "shm_arenas", uint64_t{shm::ArenaCount()});
  Field(out, "shm_leases", uint64_t{ShmLeaseCount()});
  Field(out, "shm_leased_bytes", ShmLeasedBytes());
  Field(out, "shm_leased_orphan_bytes", leased_orphans);
  Field(out, "payload_bytes", s.payload_bytes);
  Field(out, "overhead_bytes", s.overhead_bytes);
  Field(out, "ssm_sessions", s.sessions);
  Field(out, "ssm_entries", s.entries);
  Field(out, "vstore_payload_bytes", v.payload_bytes);
  Field(out, "vstore_allocated_bytes", v.allocated_bytes);
  Field(out, "vstore_overhead_bytes", v.overhead_bytes);
}

void PersistenceSection(Engine& e, std::string& out) {
  persist::Durability* d = e.durability();
  persist::LoglessSnapshots* logless = e.logless_snapshots();
  Field(out, "loading", uint64_t{0});
  Field(out, "aof_enabled", uint64_t{d != nullptr});
  if (d == nullptr && logless == nullptr) return;
  const persist::PersistStats s = d != nullptr ? d->Stats() : logless->Stats();
  if (d != nullptr) Field(out, "appendfsync", e.settings().String(Setting::kAppendFsync));
  Field(out, "rdb_changes_since_last_save", s.changes_since_last_save);
  Field(out, "rdb_bgsave_in_progress", uint64_t{s.bgsave_in_progress});
  Field(out, "rdb_last_save_time", static_cast<uint64_t>(s.last_save_time));
  Field(out, "rdb_last_bgsave_status", s.last_bgsave_ok ? "ok" : "err");
  Field(out, "rdb_last_bgsave_time_sec", std::to_string(s.last_bgsave_seconds));
  Field(out, "rdb_saves", s.rewrites);
  Field(out, "snapshot_bytes", s.snapshot_bytes);
  if (d == nullptr) {
    Field(out, "aof_rewrite_in_progress", uint64_t{0});
    Field(out, "recovered_records", s.recovered_records);
    Field(out, "recovered_bytes", s.recovered_bytes);
    Field(out, "recovery_seconds", FormatDouble(s.recovery_seconds));
    return;
  }
  Field(out, "aof_rewrite_in_progress", uint64_t{s.bgsave_in_progress});
  Field(out, "aof_last_write_status", s.log.write_ok ? "ok" : "err");
  Field(out, "aof_last_write_error", s.log.last_error);
  Field(out, "aof_current_size", s.log.bytes);
  Field(out, "aof_base_size", s.log_base_bytes);
  Field(out, "aof_buffer_length", s.log.pending_records);
  Field(out, "log_segments", s.log.segments);
  Field(out, "log_records_appended", s.log.records_appended);
  Field(out, "log_written_lsn", s.log.written_lsn);
  Field(out, "log_synced_lsn", s.log.synced_lsn);
  Field(out, "log_caller_writes", s.log.caller_writes);
  Field(out, "recovered_records", s.recovered_records);
  Field(out, "recovered_bytes", s.recovered_bytes);
  Field(out, "recovery_seconds", FormatDouble(s.recovery_seconds));
}

void StatsSection(Engine& e, std::string& out) {
  auto& st = e.stats();
  uint64_t in = st.closed_net_input.load(), out_bytes = st.closed_net_output.load();
  for (const auto& c : e.Clients()) {
    in += c->net_input_bytes.load();
    out_bytes += c->net_output_bytes.load();
  }
  Field(out, "total_connections_received", st.total_connections.load());
  Field(out, "total_commands_processed", st.total_commands.Sum());
  Field(out, "total_net_input_bytes", in);
  Field(out, "total_net_output_bytes", out_bytes);
  Field(out, "rejected_connections", st.rejected_connections.load());
  Field(out, "keyspace_hits", st.keyspace_hits.Sum());
  Field(out, "keyspace_misses", st.keyspace_misses.Sum());
  Field(out, "expired_keys", st.expired_keys.load());
  Field(out, "evicted_keys", st.evicted_keys.load());
  Field(out, "shm_eviction_skips", st.shm_eviction_skips.load());
  Field(out, "total_error_replies", st.errors.total());
}

void ReplicationSection(Engine& e, std::string& out) { ReplicationInfo(e, out); }

void CpuSection(Engine&, std::string& out) {
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  auto seconds = [](const timeval& tv) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%ld.%06ld", static_cast<long>(tv.tv_sec),
                  static_cast<long>(tv.tv_usec));
    return std::string(buf);
  };
  Field(out, "used_cpu_sys", seconds(self.ru_stime));
  Field(out, "used_cpu_user", seconds(self.ru_utime));
}

void KeyspaceSection(Engine& e, std::string& out) {
  // One line per database holding keys; Redis's avg_ttl: the mean remaining ms over keys with
  // an expiry.
  const int64_t now = CoarseNowMs();
  e.databases().ForEach([&](size_t index, store::Database& db) {
    const store::KeyspaceStats s = db.keys.Stats(now);
    if (s.keys == 0) return;
    const uint64_t avg_ttl = s.volatile_keys == 0 ? 0 : s.ttl_sum_ms / s.volatile_keys;
    Field(out, "db" + std::to_string(index),
          "keys=" + std::to_string(s.keys) + ",expires=" + std::to_string(s.volatile_keys) +
              ",avg_ttl=" + std::to_string(avg_ttl));
  });
}

// Every command and subcommand of the table, parents first, sorted by name.
std::vector<const CommandSpec*> AllSpecs(Engine& e) {
  std::vector<const CommandSpec*> out;
  for (const CommandSpec* spec : e.registry->All()) {
    out.push_back(spec);
    for (const CommandSpec& sub : spec->subcommands) out.push_back(&sub);
  }
  return out;
}

void CommandStatsSection(Engine& e, std::string& out) {
  for (const CommandSpec* spec : AllSpecs(e)) {
    const CommandStats& s = *spec->stats;
    uint64_t calls = s.calls.Sum(), rejected = s.rejected_calls.Sum();
    uint64_t failed = s.failed_calls.Sum(), usec = s.usec.Sum();
    if (calls == 0 && rejected == 0 && failed == 0) continue;
    char per_call[32];
    std::snprintf(per_call, sizeof per_call, "%.2f",
                  calls == 0 ? 0.0 : static_cast<double>(usec) / static_cast<double>(calls));
    Field(out, "cmdstat_" + spec->full_name,
          "calls=" + std::to_string(calls) + ",usec=" + std::to_string(usec) +
              ",usec_per_call=" + per_call + ",rejected_calls=" + std::to_string(rejected) +
              ",failed_calls=" + std::to_string(failed));
  }
}

void ClusterSection(Engine& e, std::string& out) {
  out += e.cluster != nullptr ? "cluster_enabled:1\r\n" : "cluster_enabled:0\r\n";
}

void ErrorStatsSection(Engine& e, std::string& out) {
  for (const auto& [code, count] : e.stats().errors.Counts()) {
    Field(out, "errorstat_" + code, "count=" + std::to_string(count));
  }
}

}  // namespace

// The percentiles latency-tracking-info-percentiles names, in its order; entries that are not
// numbers from 0 to 100 are skipped.
std::vector<double> InfoPercentiles(Engine& e) {
  std::vector<double> out;
  std::string text = e.settings().String(Setting::kLatencyTrackingInfoPercentiles);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    std::string word = text.substr(pos, end - pos);
    pos = end + 1;
    if (word.empty()) continue;
    char* parsed_end = nullptr;
    double p = std::strtod(word.c_str(), &parsed_end);
    if (parsed_end == word.c_str() + word.size() && p >= 0 && p <= 100) out.push_back(p);
  }
  return out;
}

namespace {

void LatencyStatsSection(Engine& e, std::string& out) {
  std::vector<double> percentiles = InfoPercentiles(e);
  for (const CommandSpec* spec : AllSpecs(e)) {
    std::vector<uint64_t> counts = spec->stats->latency.Snapshot();
    bool any = std::any_of(counts.begin(), counts.end(), [](uint64_t c) { return c != 0; });
    if (!any) continue;
    std::string line;
    for (double p : percentiles) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%sp%g=%.3f", line.empty() ? "" : ",", p,
                    static_cast<double>(LatencyHistogram::Percentile(counts, p)) / 1000.0);
      line += buf;
    }
    Field(out, "latency_percentiles_usec_" + spec->full_name, line);
  }
}

}  // namespace

// The disk tier (docs/cache-design.md): SSM sessions whose bytes are only on disk, summed over
// every database.
void DisktierSection(Engine& e, std::string& out) {
  // SSM sessions and V-store sessions (KV.PREFIX registrations are theirs) together.
  store::StoreStats s = e.StateStats();
  const store::VectorStoreStats v = e.VectorStats();
  s.cold_layers += v.cold_layers, s.cold_bytes += v.cold_bytes, s.cold_reads += v.cold_reads;
  s.cold_bytes_read += v.cold_bytes_read, s.promotions += v.promotions;
  // Strings' cold values count with them; cold_strings and cold_string_bytes say how much.
  uint64_t cold_keys = 0, cold_string_bytes = 0, parked_string_bytes = 0;
  e.databases().ForEach([&](size_t, store::Database& db) {
    const store::KeyspaceStats k = db.keys.Stats(0);
    cold_keys += k.cold_keys;
    parked_string_bytes += db.keys.ParkedBytes();
    cold_string_bytes += k.cold_string_bytes;
    s.cold_bytes += k.cold_string_bytes, s.cold_reads += k.cold_string_reads;
    s.cold_bytes_read += k.cold_string_bytes_read, s.promotions += k.string_promotions;
  });
  Field(out, "disktier_enabled", uint64_t{e.durability() != nullptr ? 1u : 0u});
  Field(out, "cold_keys", cold_keys);
  Field(out, "cold_layers", s.cold_layers);
  Field(out, "cold_bytes", s.cold_bytes);
  Field(out, "cold_bytes_human", HumanBytes(s.cold_bytes));
  Field(out, "cold_hits", s.cold_reads);
  Field(out, "cold_bytes_read", s.cold_bytes_read);
  Field(out, "cold_promotions", s.promotions);
  Field(out, "cold_string_bytes", cold_string_bytes);
  // Small strings kept in memory beside cold chunks (at most maxmemory / 8).
  Field(out, "parked_string_bytes", parked_string_bytes);
  Field(out, "cold_evictions", e.stats().cold_evictions.load());
  Field(out, "disk_evicted_keys", e.stats().disk_evicted_keys.load());
}

namespace {

struct Section {
  std::string_view name;
  std::string_view title;
  bool in_default;
  void (*fill)(Engine&, std::string&);
};

constexpr Section kSections[] = {
    {"server", "Server", true, ServerSection},
    {"clients", "Clients", true, ClientsSection},
    {"memory", "Memory", true, MemorySection},
    {"persistence", "Persistence", true, PersistenceSection},
    {"stats", "Stats", true, StatsSection},
    {"replication", "Replication", true, ReplicationSection},
    {"cpu", "CPU", true, CpuSection},
    {"commandstats", "Commandstats", false, CommandStatsSection},
    {"errorstats", "Errorstats", true, ErrorStatsSection},
    {"latencystats", "Latencystats", false, LatencyStatsSection},
    {"cluster", "Cluster", true, ClusterSection},
    {"keyspace", "Keyspace", true, KeyspaceSection},
    {"disktier", "Disktier", true, DisktierSection},
    {"vstore", "Vstore", true, VstoreInfoSection},
    {"pion", "Pion", true, PionInfoSection},
};

}  // namespace

std::string BuildInfo(Engine& engine, const std::vector<std::string>& requested) {
  auto wanted = [&](const Section& s) {
    if (requested.empty()) return s.in_default;
    for (const auto& r : requested) {
      if (r == "all" || r == "everything" || r == s.name || (r == "default" && s.in_default)) {
        return true;
      }
    }
    return false;
  };
  std::string out;
  bool first = true;
  for (const Section& s : kSections) {
    if (!wanted(s)) continue;
    if (!first) out += "\r\n";
    first = false;
    out.append("# ").append(s.title).append("\r\n");
    s.fill(engine, out);
  }
  return out;
}

void InfoCommand(Context& ctx) {
  std::vector<std::string> requested;
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    requested.push_back(AsciiLower(ctx.args[i]));
  }
  ctx.reply.Verbatim(BuildInfo(ctx.engine, requested));
}

}  // namespace prefixd::commands
