#include "common/settings.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "common/ascii.h"
#include "common/numbers.h"

namespace prefixd {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
constexpr int64_t kUintMax = std::numeric_limits<uint32_t>::max();

using T = SettingType;
// Ranges are Redis 7.0's where Redis has the directive (config.c); prefixd's own settings have
// maximums that keep every derived size and product far inside 64 bits.
const std::array<SettingSpec, static_cast<size_t>(Setting::kCount)> kSettingSpecs = {{
    {"bind", T::kString, false, "127.0.0.1", 0, 0, "", "Address to listen on for TCP clients"},
    {"port", T::kInteger, false, "1974", 0, 65535, "", "TCP port (0: no plain TCP listener)"},
    {"unixsocket", T::kString, false, "", 0, 0, "", "Path of a unix socket to listen on too"},
    {"unixsocketperm", T::kInteger, false, "0", 0, 0777, "",
     "Permission bits of the unix socket, octal (0 keeps the umask default)"},
    {"dir", T::kString, false, "./data", 0, 0, "", "Data directory", true},
    {"loglevel", T::kEnum, true, "notice", 0, 0, "debug|verbose|notice|warning", "Log verbosity"},
    {"logfile", T::kString, false, "", 0, 0, "", "Log to this file instead of standard output",
     true},
    {"requirepass", T::kString, true, "", 0, 0, "", "Password clients must AUTH with"},
    {"maxclients", T::kInteger, true, "10000", 1, kUintMax, "",
     "Most simultaneous clients (lowered at start to fit the open-files limit)"},
    {"proto-max-bulk-len", T::kMemory, true, "1gb", 1024 * 1024, kMax, "",
     "Largest bulk argument a request may carry"},
    {"client-query-buffer-limit", T::kMemory, true, "2gb", 1024 * 1024, (int64_t{4} << 30) - 1, "",
     "Most argument bytes one request may declare (below 4 GiB)"},
    {"client-output-buffer-limit", T::kMemory, true, "4gb", 1024, kMax, "",
     "Replies a client may leave unread before it is disconnected"},
    {"replica-output-buffer-limit", T::kMemory, true, "256mb", 1024, kMax, "",
     "Replication stream a replica may leave unread before it is disconnected (Redis's "
     "client-output-buffer-limit replica hard limit)"},
    {"repl-ping-replica-period", T::kInteger, true, "10", 1, kIntMax, "",
     "Seconds between the PINGs sent to replicas in the replication stream"},
    {"io-threads", T::kInteger, false, "0", 0, 256, "",
     "Network threads (0: one per core but one, at least one)"},
    {"timeout", T::kInteger, true, "0", 0, kIntMax, "",
     "Close a client idle for this many seconds (0: never)"},
    {"tcp-backlog", T::kInteger, false, "511", 0, kIntMax, "", "Listen backlog"},
    {"databases", T::kInteger, false, "16", 1, 65536, "",
     "Number of databases SELECT chooses from (0 to databases-1), each a keyspace of every type"},
    {"max-sid-len", T::kInteger, true, "1024", 1, 64 * 1024 * 1024, "",
     "Longest session id SSM.PREFIX accepts, in bytes"},
    {"maxmemory", T::kMemory, true, "0", 0, kMax, "",
     "Memory budget for stored data: past it, writes evict by maxmemory-policy (0: no limit)"},
    {"maxmemory-policy", T::kEnum, true, "noeviction", 0, 0,
     "volatile-lru|volatile-lfu|volatile-random|volatile-ttl|allkeys-lru|allkeys-lfu|"
     "allkeys-random|noeviction",
     "What goes once maxmemory is reached: whole keys, exact LRU/LFU order (noeviction: -OOM)"},
    {"maxdisk", T::kMemory, true, "0", 0, kMax, "",
     "Budget for the disk tier's cold values: past it, cold keys are deleted by "
     "maxmemory-policy (0: no limit)"},
    {"huge-pages", T::kBool, false, "yes", 0, 0, "",
     "Ask for transparent huge pages on values of 2 MiB and more (fewer faults on first touch; "
     "no: 4 KiB pages, for VMs whose host takes freed memory back, where a huge page costs more "
     "to fault in than its 4 KiB pages)"},
    {"appendonly", T::kBool, false, "yes", 0, 0, "",
     "Keep every write in the data directory's log and snapshot (no: in memory, kept only by "
     "SAVE and BGSAVE)"},
    // Redis's RDB save points: prefixd takes none, so `save ""` (what clients and Redis's own
    // tests set) is the one value, and the truth.
    {"save", T::kEnum, true, "", 0, 0, "",
     "Redis's automatic save points: none here, only \"\" is accepted (SAVE, BGSAVE and "
     "SHUTDOWN SAVE write a snapshot when asked)"},
    {"appendfsync", T::kEnum, true, "everysec", 0, 0, "always|everysec|no",
     "When the log is fsynced: before each reply, once a second, or when the OS decides"},
    {"auto-aof-rewrite-percentage", T::kInteger, false, "100", 0, kIntMax, "",
     "Snapshot and cut the log once it grows this much past the live data (0: never)"},
    {"auto-aof-rewrite-min-size", T::kMemory, false, "64mb", 0, kMax, "",
     "Never rewrite automatically while the log is smaller than this"},
    {"log-segment-size", T::kMemory, false, "256mb", 1024 * 1024, int64_t{1} << 40, "",
     "Start a new log segment once the current one reaches this size"},
    {"log-skip-corrupt", T::kBool, false, "no", 0, 0, "",
     "Start even when a log record before the tail is corrupt, skipping (and logging) it"},
    {"vstore-max-sessions", T::kInteger, true, "65536", 1, int64_t{1} << 32, "",
     "Most V-store sessions (a KV.PREFIX prefix takes two); V.CREATE and REGISTER fail past it"},
    {"vstore-max-layers", T::kInteger, true, "1024", 1, 1 << 20, "",
     "Layer ids a V-store session accepts: 0 to this minus one"},
    {"vstore-max-tokens", T::kInteger, true, "4194304", 1, int64_t{1} << 28, "",
     "Rows (tokens) a V-store layer may hold: the end of every STOREBATCH and fetched RANGE"},
    {"vstore-max-dim", T::kInteger, true, "65536", 1, 262144, "",
     "Largest value_dim (and KV.PREFIX kv_dim) a V-store session may have"},
    {"vstore-default-vquant", T::kEnum, true, "fp16", 0, 0, "fp32|fp16|bf16|int8|fp8|mlx4g32",
     "Storage tier of a V.CREATE without VQUANT"},
    {"kvprefix-prefill-us-per-token", T::kInteger, true, "555", 0, 1000000000, "",
     "Prefill time a KV.PREFIX hit is credited per token when the client reports none (us)"},
    {"prefix-lease-ms", T::kInteger, true, "30000", 1, 600000, "",
     "How long a KV.PREFIX.MATCH lease pins its answer when the request names no LEASE (ms)"},
    {"prefix-max-leases", T::kInteger, true, "65536", 1, int64_t{1} << 24, "",
     "Live match leases a prefix namespace may hold; MATCH answers -BUSY past it"},
    {"protected-mode", T::kBool, true, "yes", 0, 0, "",
     "Without a requirepass, refuse clients that are not on loopback or the unix socket"},
    {"enable-protected-configs", T::kEnum, false, "no", 0, 0, "no|yes|local",
     "Who may CONFIG SET a setting that names a file to a new path (local: loopback and unix "
     "socket clients)"},
    {"enable-debug-command", T::kEnum, false, "no", 0, 0, "no|yes|local",
     "Who may run DEBUG (local: loopback and unix socket clients)"},
    {"tls-port", T::kInteger, false, "0", 0, 65535, "", "TLS port (0: no TLS listener)"},
    {"tls-cert-file", T::kString, true, "", 0, 0, "",
     "Server certificate (PEM); CONFIG SET reloads the TLS files, even to the same path", true},
    {"tls-key-file", T::kString, true, "", 0, 0, "", "Private key of tls-cert-file (PEM)", true},
    {"tls-key-file-pass", T::kString, true, "", 0, 0, "", "Passphrase of tls-key-file"},
    {"tls-ca-cert-file", T::kString, true, "", 0, 0, "",
     "CA certificates (PEM) that client certificates are checked against", true},
    {"tls-ca-cert-dir", T::kString, true, "", 0, 0, "",
     "Directory of CA certificates (c_rehash layout), as tls-ca-cert-file", true},
    {"tls-auth-clients", T::kEnum, true, "yes", 0, 0, "no|yes|optional",
     "Client certificates: required, not asked for, or checked when offered"},
    {"tls-protocols", T::kString, true, "", 0, 0, "",
     "Allowed TLS versions, e.g. \"TLSv1.2 TLSv1.3\" (empty: TLSv1.2 and TLSv1.3)"},
    {"tls-ciphers", T::kString, true, "", 0, 0, "", "TLSv1.2 cipher list (OpenSSL syntax)"},
    {"tls-ciphersuites", T::kString, true, "", 0, 0, "", "TLSv1.3 cipher suites (OpenSSL syntax)"},
    {"tls-prefer-server-ciphers", T::kBool, true, "no", 0, 0, "",
     "Pick the cipher by the server's order rather than the client's"},
    {"tls-session-caching", T::kBool, true, "yes", 0, 0, "",
     "Let clients resume TLS sessions (skips a full handshake on reconnect)"},
    {"tls-session-cache-size", T::kInteger, true, "20480", 0, kIntMax, "",
     "TLS sessions kept for resumption (0: OpenSSL's default)"},
    {"tls-session-cache-timeout", T::kInteger, true, "300", 0, kIntMax, "",
     "Seconds a cached TLS session may be resumed"},
    {"latency-tracking", T::kBool, true, "yes", 0, 0, "",
     "Keep a latency histogram per command (INFO latencystats, /metrics)"},
    {"latency-tracking-info-percentiles", T::kString, true, "50 99 99.9", 0, 0, "",
     "Percentiles INFO latencystats reports, separated by spaces"},
    {"metrics-port", T::kInteger, false, "0", 0, 65535, "",
     "Serve Prometheus metrics over HTTP at /metrics on this port (0: off)"},
    {"metrics-bind", T::kString, false, "127.0.0.1", 0, 0, "",
     "Address the /metrics listener binds"},
    {"supervised", T::kEnum, false, "no", 0, 0, "no|systemd|auto",
     "Tell systemd when the server is ready and stopping (sd_notify; auto: when NOTIFY_SOCKET "
     "is set)"},
    {"cluster-enabled", T::kBool, false, "no", 0, 0, "",
     "Serve as a Redis Cluster node: keys of slots this node does not serve get -MOVED"},
    {"cluster-config-file", T::kString, false, "nodes.conf", 0, 0, "",
     "The cluster topology in Redis's nodes.conf format, relative to dir; created when missing",
     true},
    {"cluster-announce-ip", T::kString, false, "", 0, 0, "",
     "Address other nodes and clients reach this node at (empty: the bind address, or "
     "127.0.0.1 when that is a wildcard)"},
    {"cluster-announce-port", T::kInteger, false, "0", 0, 65535, "",
     "Port clients reach this node at (0: port)"},
    {"cluster-require-full-coverage", T::kBool, true, "yes", 0, 0, "",
     "Refuse keyed commands with -CLUSTERDOWN while any slot is served by no node"},
    {"set-max-intset-entries", T::kInteger, true, "512", 0, kMax, "",
     "Most members a set of integers holds as an intset (OBJECT ENCODING) before a hashtable"},
    {"hash-max-listpack-entries", T::kInteger, true, "512", 0, kMax, "",
     "Most fields a hash holds as a listpack (OBJECT ENCODING) before a hashtable"},
    {"hash-max-listpack-value", T::kMemory, true, "64", 0, kMax, "",
     "Longest field or value a listpack hash holds before it becomes a hashtable"},
    {"zset-max-listpack-entries", T::kInteger, true, "128", 0, kMax, "",
     "Most members a sorted set holds as a listpack (OBJECT ENCODING) before a skiplist"},
    {"zset-max-listpack-value", T::kMemory, true, "64", 0, kMax, "",
     "Longest member, in bytes, a listpack sorted set holds before it becomes a skiplist"},
    // Redis 7.0's quicklist tuning: a list here is one buffer, never split into nodes nor
    // compressed, and OBJECT ENCODING says quicklist either way, as Redis 7.0's does; taken and
    // shown so that clients and Redis's own tests may set them.
    {"list-max-listpack-size", T::kInteger, true, "-2", std::numeric_limits<int32_t>::min(),
     kIntMax, "", "Redis's quicklist node size: accepted, no effect (a list is one buffer)"},
    {"list-compress-depth", T::kInteger, true, "0", 0, kIntMax, "",
     "Redis's quicklist compression depth: accepted, no effect (lists are not compressed)"},
    {"shm-arenas", T::kBool, false, "yes", 0, 0, "",
     "Keep values of 32 KiB and more in memfd arenas that same-host clients can map read-only "
     "(SHM.HELLO, SHM.GET over the unix socket; where no arena can be made at start, a warning "
     "and none)"},
    {"shm-allow-uids", T::kString, true, "self", 0, 0, "",
     "Uids of unix-socket peers SHM.HELLO hands the arenas to, separated by spaces or commas "
     "('self': the server's own uid; empty: nobody)"},
    {"shm-max-leases", T::kInteger, true, "1024", 0, 1 << 20, "",
     "Most SHM leases one connection may hold at once (one per shared read: SHM.GET or a "
     "piece fetch, whatever its number of pieces)"},
    {"shm-lease-timeout", T::kInteger, true, "30000", 1, kIntMax, "",
     "Milliseconds a SHM lease lives before the server ends it"},
}};

// shm-allow-uids' tokens, each "self" or a uid; nullopt when one is neither.
std::optional<std::vector<std::string_view>> UidTokens(std::string_view list) {
  std::vector<std::string_view> tokens;
  size_t at = 0;
  while (at < list.size()) {
    const size_t end = list.find_first_of(" ,", at);
    const std::string_view token = list.substr(at, end == std::string_view::npos ? end : end - at);
    if (!token.empty()) {
      auto uid = ParseInt64(token);
      if (token != "self" && (!uid || *uid < 0 || *uid > kUintMax)) return std::nullopt;
      tokens.push_back(token);
    }
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  return tokens;
}

// latency-tracking-info-percentiles: numbers from 0 to 100 separated by spaces, rewritten as
// Redis shows them ("50 99 99.9"). Returns Redis's error text, or empty.
std::string NormalizePercentiles(std::string& text) {
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = std::min(text.find(' ', pos), text.size());
    std::string word = text.substr(pos, end - pos);
    pos = end + 1;
    char* parsed = nullptr;
    double p = std::strtod(word.c_str(), &parsed);
    if (word.empty() || parsed != word.c_str() + word.size()) {
      return "Invalid latency-tracking-info-percentiles parameters";
    }
    if (p < 0 || p > 100) {
      return "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]";
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", p);
    out += (out.empty() ? "" : " ") + std::string(buf);
  }
  text = out;
  return {};
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::optional<int64_t> ParseMemory(std::string_view text) {
  std::string s = AsciiLower(text);
  struct Unit {
    std::string_view suffix;
    int64_t factor;
  };
  static constexpr Unit kUnits[] = {{"kb", 1024}, {"mb", 1024 * 1024}, {"gb", kGiB},
                                    {"k", 1000},  {"m", 1000 * 1000},  {"g", 1000000000},
                                    {"b", 1}};
  int64_t factor = 1;
  for (const Unit& u : kUnits) {
    if (s.size() > u.suffix.size() && s.ends_with(u.suffix)) {
      factor = u.factor;
      s.resize(s.size() - u.suffix.size());
      break;
    }
  }
  auto v = ParseInt64(s);
  if (!v || *v < 0 || *v > kMax / factor) return std::nullopt;
  return *v * factor;
}

Settings::Settings() {
  for (size_t i = 0; i < kSettingSpecs.size(); ++i) {
    Set(static_cast<Setting>(i), kSettingSpecs[i].default_value, /*at_startup=*/true);
  }
}

const std::array<SettingSpec, static_cast<size_t>(Setting::kCount)>& Settings::Specs() {
  return kSettingSpecs;
}

std::optional<Setting> Settings::Find(std::string_view name) {
  std::string lower = AsciiLower(name);
  for (size_t i = 0; i < kSettingSpecs.size(); ++i) {
    if (kSettingSpecs[i].name == lower || Alias(static_cast<Setting>(i)) == lower) {
      return static_cast<Setting>(i);
    }
  }
  return std::nullopt;
}

std::string_view Settings::Alias(Setting id) {
  switch (id) {
    case Setting::kHashMaxListpackEntries:
      return "hash-max-ziplist-entries";
    case Setting::kHashMaxListpackValue:
      return "hash-max-ziplist-value";
    case Setting::kZsetMaxListpackEntries:
      return "zset-max-ziplist-entries";
    case Setting::kZsetMaxListpackValue:
      return "zset-max-ziplist-value";
    case Setting::kListMaxListpackSize:
      return "list-max-ziplist-size";
    default:
      return {};
  }
}

std::string_view Settings::Nearest(std::string_view name) {
  std::string lower = AsciiLower(name);
  std::string_view best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (const SettingSpec& spec : kSettingSpecs) {
    size_t d = EditDistance(lower, spec.name);
    if (d < best_distance) best_distance = d, best = spec.name;
  }
  return best;
}

std::string Settings::Set(std::string_view name, std::string_view value, bool at_startup) {
  auto id = Find(name);
  if (!id) return "unknown setting '" + std::string(name) + "'";
  return Set(*id, value, at_startup);
}

std::string Settings::Set(Setting id, std::string_view value, bool at_startup) {
  const SettingSpec& spec = kSettingSpecs[static_cast<size_t>(id)];
  if (!at_startup && !spec.runtime_mutable) return "can't set immutable config";
  auto index = static_cast<size_t>(id);
  switch (spec.type) {
    case T::kInteger:
    case T::kMemory: {
      std::optional<int64_t> v;
      if (id == Setting::kUnixSocketPerm) {
        // Permission bits are written in octal, as in redis.conf.
        // At most six digits, so the value cannot overflow.
        bool ok = !value.empty() && value.size() <= 6;
        int64_t octal = 0;
        for (size_t i = 0; ok && i < value.size(); ++i) {
          ok = value[i] >= '0' && value[i] <= '7';
          octal = octal * 8 + (value[i] - '0');
        }
        if (ok) v = octal;
      } else {
        v = spec.type == T::kMemory ? ParseMemory(value) : ParseInt64(value);
      }
      if (!v) {
        return spec.type == T::kMemory ? "argument must be a memory value"
                                       : "argument couldn't be parsed into an integer";
      }
      if (*v < spec.min || *v > spec.max) {
        return "argument must be between " + std::to_string(spec.min) + " and " +
               std::to_string(spec.max) + " inclusive";
      }
      ints_[index].store(*v);
      return {};
    }
    case T::kEnum: {
      std::string lower = AsciiLower(value);
      std::string_view choices = spec.choices;
      for (size_t pos = 0; pos <= choices.size();) {
        size_t bar = choices.find('|', pos);
        if (bar == std::string_view::npos) bar = choices.size();
        if (choices.substr(pos, bar - pos) == lower) {
          ints_[index].store(std::count(choices.begin(), choices.begin() + pos, '|'),
                             std::memory_order_relaxed);
          std::lock_guard lock(strings_mu_);
          strings_[index] = lower;
          return {};
        }
        pos = bar + 1;
      }
      if (choices.empty()) return "only \"\" is accepted (prefixd has no save points)";
      std::string allowed;
      for (char c : choices) allowed += c == '|' ? std::string(", ") : std::string(1, c);
      return "argument(s) must be one of the following: " + allowed;
    }
    case T::kBool: {
      std::string lower = AsciiLower(value);
      if (lower != "yes" && lower != "no") return "argument must be 'yes' or 'no'";
      ints_[index].store(lower == "yes" ? 1 : 0, std::memory_order_relaxed);
      std::lock_guard lock(strings_mu_);
      strings_[index] = lower;
      return {};
    }
    case T::kString: {
      std::string text(value);
      if (id == Setting::kLatencyTrackingInfoPercentiles) {
        std::string err = NormalizePercentiles(text);
        if (!err.empty()) return err;
      }
      if (id == Setting::kShmAllowUids && !UidTokens(text)) {
        return "argument must be uids or 'self', separated by spaces or commas";
      }
      std::lock_guard lock(strings_mu_);
      strings_[index] = std::move(text);
      return {};
    }
  }
  return {};
}

std::string Settings::Get(Setting id) const {
  const SettingSpec& spec = kSettingSpecs[static_cast<size_t>(id)];
  if (spec.type == T::kInteger || spec.type == T::kMemory) {
    if (id == Setting::kUnixSocketPerm) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%llo", static_cast<long long>(Int(id)));
      return buf;
    }
    return std::to_string(Int(id));
  }
  return String(id);
}

std::string Settings::String(Setting id) const {
  std::lock_guard lock(strings_mu_);
  return strings_[static_cast<size_t>(id)];
}

void Settings::AddApplyHook(std::vector<Setting> ids, std::function<std::string()> apply) {
  hooks_.push_back({std::move(ids), std::move(apply)});
}

std::string Settings::Apply(const std::vector<Setting>& changed, Setting* culprit) const {
  for (const ApplyHook& hook : hooks_) {
    auto first = std::find_if(changed.begin(), changed.end(), [&](Setting id) {
      return std::find(hook.ids.begin(), hook.ids.end(), id) != hook.ids.end();
    });
    if (first == changed.end()) continue;
    if (std::string err = hook.apply(); !err.empty()) {
      if (culprit != nullptr) *culprit = *first;
      return err;
    }
  }
  return {};
}

int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (!__builtin_mul_overflow(a, b, &out)) return out;
  return (a < 0) != (b < 0) ? std::numeric_limits<int64_t>::min() : kMax;
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  if (!__builtin_add_overflow(a, b, &out)) return out;
  return b < 0 ? std::numeric_limits<int64_t>::min() : kMax;
}

bool ProtectedActionAllowed(std::string_view setting_value, bool local_client) {
  return setting_value == "yes" || (setting_value == "local" && local_client);
}

bool UidAllowed(std::string_view list, uint32_t uid, uint32_t self_uid) {
  auto tokens = UidTokens(list);
  if (!tokens) return false;
  for (std::string_view token : *tokens) {
    if (token == "self" ? uid == self_uid : ParseInt64(token) == static_cast<int64_t>(uid)) {
      return true;
    }
  }
  return false;
}

}  // namespace prefixd
