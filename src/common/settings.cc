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

using T = SettingType;
const std::array<SettingSpec, static_cast<size_t>(Setting::kCount)> kSettingSpecs = {{
    {"bind", T::kString, false, "127.0.0.1", 0, 0, "", "Address to listen on for TCP clients"},
    {"port", T::kInteger, false, "1974", 0, 65535, "", "TCP port (0 disables TCP)"},
    {"unixsocket", T::kString, false, "", 0, 0, "", "Path of a unix socket to listen on too"},
    {"unixsocketperm", T::kInteger, false, "0", 0, 0777, "",
     "Permission bits of the unix socket, octal (0 keeps the umask default)"},
    {"dir", T::kString, false, "./data", 0, 0, "", "Data directory"},
    {"loglevel", T::kEnum, true, "notice", 0, 0, "debug|verbose|notice|warning", "Log verbosity"},
    {"logfile", T::kString, false, "", 0, 0, "", "Log to this file instead of standard output"},
    {"requirepass", T::kString, true, "", 0, 0, "", "Password clients must AUTH with"},
    {"maxclients", T::kInteger, true, "10000", 1, 1000000, "", "Most simultaneous clients"},
    {"proto-max-bulk-len", T::kMemory, true, "1gb", 1024 * 1024, kMax, "",
     "Largest bulk argument a request may carry"},
    {"client-query-buffer-limit", T::kMemory, true, "2gb", 1024 * 1024, (int64_t{4} << 30) - 1, "",
     "Most argument bytes one request may declare"},
    {"client-output-buffer-limit", T::kMemory, true, "4gb", 1024, kMax, "",
     "Replies a client may leave unread before it is disconnected"},
    {"io-threads", T::kInteger, false, "0", 0, 256, "", "Network threads (0: one per core)"},
    {"timeout", T::kInteger, true, "0", 0, kMax, "",
     "Close a client idle for this many seconds (0: never)"},
    {"tcp-backlog", T::kInteger, false, "511", 1, 65535, "", "Listen backlog"},
    {"max-sid-len", T::kInteger, true, "1024", 1, 64 * 1024 * 1024, "",
     "Longest session id SSM.PREFIX accepts, in bytes"},
    {"maxmemory", T::kMemory, true, "0", 0, kMax, "",
     "Refuse writes once stored bytes exceed this (0: no limit)"},
    {"appendonly", T::kEnum, false, "yes", 0, 0, "yes|no",
     "Keep every write in the data directory's log and snapshot (no: memory only)"},
    {"appendfsync", T::kEnum, true, "everysec", 0, 0, "always|everysec|no",
     "When the log is fsynced: before each reply, once a second, or when the OS decides"},
    {"auto-aof-rewrite-percentage", T::kInteger, false, "100", 0, 1000000, "",
     "Snapshot and cut the log once it grows this much past the live data (0: never)"},
    {"auto-aof-rewrite-min-size", T::kMemory, false, "64mb", 0, kMax, "",
     "Never rewrite automatically while the log is smaller than this"},
    {"log-segment-size", T::kMemory, false, "256mb", 1024 * 1024, kMax, "",
     "Start a new log segment once the current one reaches this size"},
    {"log-skip-corrupt", T::kEnum, false, "no", 0, 0, "yes|no",
     "Start even when a log record before the tail is corrupt, skipping (and logging) it"},
    {"vstore-max-sessions", T::kInteger, true, "65536", 1, int64_t{1} << 40, "",
     "Most V-store sessions (a KV.PREFIX prefix takes two); V.CREATE and REGISTER fail past it"},
    {"vstore-max-layers", T::kInteger, true, "1024", 1, 0x7fffffff, "",
     "Layer ids a V-store session accepts: 0 to this minus one"},
    {"vstore-max-tokens", T::kInteger, true, "4194304", 1, int64_t{1} << 40, "",
     "Rows (tokens) a V-store layer may hold: the end of every STOREBATCH and fetched RANGE"},
    {"vstore-max-dim", T::kInteger, true, "65536", 1, 262144, "",
     "Largest value_dim (and KV.PREFIX kv_dim) a V-store session may have"},
    {"vstore-default-vquant", T::kEnum, true, "fp16", 0, 0, "fp32|fp16|bf16|int8|fp8|mlx4g32",
     "Storage tier of a V.CREATE without VQUANT"},
    {"kvprefix-prefill-us-per-token", T::kInteger, true, "555", 0, 1000000000, "",
     "Prefill time a KV.PREFIX hit is credited per token when the client reports none (us)"},
    {"latency-tracking", T::kEnum, true, "yes", 0, 0, "yes|no",
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
}};

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
    if (kSettingSpecs[i].name == lower) return static_cast<Setting>(i);
  }
  return std::nullopt;
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
        int64_t octal = 0;
        bool ok = !value.empty() && value.size() <= 6;
        for (char c : value) ok = ok && c >= '0' && c <= '7', octal = octal * 8 + (c - '0');
        if (ok) v = octal;
      } else {
        v = spec.type == T::kMemory ? ParseMemory(value) : ParseInt64(value);
      }
      if (!v) return "argument couldn't be parsed into an integer";
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
      std::string allowed(choices);
      std::replace(allowed.begin(), allowed.end(), '|', ',');
      return "argument(s) must be one of the following: " + allowed;
    }
    case T::kString: {
      std::string text(value);
      if (id == Setting::kLatencyTrackingInfoPercentiles) {
        std::string err = NormalizePercentiles(text);
        if (!err.empty()) return err;
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

}  // namespace prefixd
