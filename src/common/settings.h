// Settings: every configurable value, described once in a table that drives the command-line
// flags, the config file, CONFIG GET/SET and the docs. Thread-safe: values are read on io threads
// while CONFIG SET writes them; numbers are atomics, strings sit behind a mutex.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace prefixd {

enum class SettingType { kInteger, kMemory, kString, kEnum, kBool };

// The index of each setting in the table; keep in step with kSettingSpecs in settings.cc.
enum class Setting : size_t {
  kBind,
  kPort,
  kUnixSocket,
  kUnixSocketPerm,
  kDir,
  kLogLevel,
  kLogFile,
  kRequirePass,
  kMaxClients,
  kProtoMaxBulkLen,
  kClientQueryBufferLimit,
  kClientOutputBufferLimit,
  kReplicaOutputBufferLimit,
  kReplPingReplicaPeriod,
  kIoThreads,
  kTimeout,
  kTcpBacklog,
  kDatabases,
  kMaxSidLen,
  kMaxMemory,
  kMaxMemoryPolicy,
  kMaxDisk,
  kHugePages,
  kAppendOnly,
  kSave,
  kAppendFsync,
  kAutoRewritePercentage,
  kAutoRewriteMinSize,
  kLogSegmentSize,
  kLogSkipCorrupt,
  kVstoreMaxSessions,
  kVstoreMaxLayers,
  kVstoreMaxTokens,
  kVstoreMaxDim,
  kVstoreDefaultVquant,
  kKvPrefixPrefillUsPerToken,
  kPrefixLeaseMs,
  kPrefixMaxLeases,
  kProtectedMode,
  kEnableProtectedConfigs,
  kEnableDebugCommand,
  kTlsPort,
  kTlsCertFile,
  kTlsKeyFile,
  kTlsKeyFilePass,
  kTlsCaCertFile,
  kTlsCaCertDir,
  kTlsAuthClients,
  kTlsProtocols,
  kTlsCiphers,
  kTlsCiphersuites,
  kTlsPreferServerCiphers,
  kTlsSessionCaching,
  kTlsSessionCacheSize,
  kTlsSessionCacheTimeout,
  // Introspection and operations (INFO latencystats, /metrics, systemd).
  kLatencyTracking,
  kLatencyTrackingInfoPercentiles,
  kMetricsPort,
  kMetricsBind,
  kSupervised,
  // Redis Cluster (docs/cluster.md).
  kClusterEnabled,
  kClusterConfigFile,
  kClusterAnnounceIp,
  kClusterAnnouncePort,
  kClusterRequireFullCoverage,
  // Redis's data types.
  kSetMaxIntsetEntries,
  kHashMaxListpackEntries,
  kHashMaxListpackValue,
  kZsetMaxListpackEntries,
  kZsetMaxListpackValue,
  kListMaxListpackSize,
  kListCompressDepth,
  // Same-host transport (docs/shm-transport.md).
  kShmArenas,
  kShmAllowUids,
  kShmMaxLeases,
  kShmLeaseTimeout,
  kCount,
};

struct SettingSpec {
  std::string_view name;  // the redis.conf directive where one exists
  SettingType type;
  bool runtime_mutable;  // CONFIG SET may change it
  std::string_view default_value;
  int64_t min = 0;
  int64_t max = 0;
  std::string_view choices;  // for kEnum: values separated by '|'
  std::string_view help;
  // Names a file or directory the server opens: changing it at runtime takes
  // enable-protected-configs (Redis's PROTECTED_CONFIG).
  bool is_protected = false;
};

class Settings {
 public:
  Settings();

  static const std::array<SettingSpec, static_cast<size_t>(Setting::kCount)>& Specs();
  // The setting `name` (or its alias) names.
  static std::optional<Setting> Find(std::string_view name);
  // The older name Redis 7.0 still accepts for a setting (hash-max-ziplist-entries,
  // zset-max-ziplist-value), or empty.
  static std::string_view Alias(Setting id);
  // The known name closest to `name`, for "did you mean" messages.
  static std::string_view Nearest(std::string_view name);

  // Parses and stores a value. Returns an error text (empty on success). `at_startup` allows
  // settings that cannot change at runtime.
  std::string Set(std::string_view name, std::string_view value, bool at_startup);
  std::string Set(Setting id, std::string_view value, bool at_startup);
  // The value as CONFIG GET shows it.
  std::string Get(Setting id) const;

  // For an integer or memory setting its value; for an enum the index of its choice; for a
  // yes/no setting 1 or 0.
  int64_t Int(Setting id) const {
    return ints_[static_cast<size_t>(id)].load(std::memory_order_relaxed);
  }
  std::string String(Setting id) const;
  // Read on every request (latency-tracking), so without the strings' lock.
  bool Bool(Setting id) const { return Int(id) != 0; }

  // Runs after CONFIG SET has stored new values: `apply` puts the settings in `ids` into effect
  // (e.g. reloads TLS certificates) and returns an error text, or empty on success. CONFIG SET
  // runs each hook once per command even when several of its settings changed. Install hooks
  // at start-up, before clients are served.
  void AddApplyHook(std::vector<Setting> ids, std::function<std::string()> apply);
  // Runs the hooks of the settings in `changed`; the first error text, or empty. On an error,
  // `culprit` (if given) names the first setting in `changed` that the failing hook covers.
  std::string Apply(const std::vector<Setting>& changed, Setting* culprit = nullptr) const;

 private:
  struct ApplyHook {
    std::vector<Setting> ids;
    std::function<std::string()> apply;
  };
  std::vector<ApplyHook> hooks_;

  std::array<std::atomic<int64_t>, static_cast<size_t>(Setting::kCount)> ints_{};
  mutable std::mutex strings_mu_;
  std::array<std::string, static_cast<size_t>(Setting::kCount)> strings_;
};

// "1gb", "512mb", "64k", "1024": Redis's memory units (k=1000, kb=1024, ...).
std::optional<int64_t> ParseMemory(std::string_view text);

// Settings arithmetic never wraps: a product or sum past int64's range is clamped to it.
int64_t SaturatingMul(int64_t a, int64_t b);
int64_t SaturatingAdd(int64_t a, int64_t b);

// shm-allow-uids: whether `uid` is in `list` (uids and the word "self", for `self_uid`, separated
// by spaces or commas). False for a list that does not parse.
bool UidAllowed(std::string_view list, uint32_t uid, uint32_t self_uid);

// Redis's enable-protected-configs / enable-debug-command values: "yes", "no" or "local"
// (allowed only from a loopback or unix-socket client).
bool ProtectedActionAllowed(std::string_view setting_value, bool local_client);

}  // namespace prefixd
