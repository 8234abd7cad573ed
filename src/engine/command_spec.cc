// The derived views of a CommandSpec that COMMAND and the dispatcher share: flag and category
// names in Redis's order, effective key specs and the key positions of a request.
#include <algorithm>

#include "engine/command.h"

namespace prefixd::commands {
namespace {

template <typename Table>
std::vector<std::string_view> NamesOf(uint32_t bits, const Table& table) {
  std::vector<std::string_view> out;
  for (const auto& [bit, name] : table) {
    if (bits & bit) out.push_back(name);
  }
  return out;
}

}  // namespace

std::vector<std::string_view> FlagNames(uint32_t flags) {
  // Redis's order; sentinel flags are never shown.
  static constexpr std::pair<uint32_t, std::string_view> kNames[] = {
      {kWrite, "write"},
      {kReadonly, "readonly"},
      {kDenyOom, "denyoom"},
      {kAdmin, "admin"},
      {kPubsub, "pubsub"},
      {kNoScript, "noscript"},
      {kBlocking, "blocking"},
      {kLoading, "loading"},
      {kStale, "stale"},
      {kSkipMonitor, "skip_monitor"},
      {kSkipSlowlog, "skip_slowlog"},
      {kAsking, "asking"},
      {kFast, "fast"},
      {kNoAuth, "no_auth"},
      {kNoMandatoryKeys, "no_mandatory_keys"},
      {kNoAsyncLoading, "no_async_loading"},
      {kNoMulti, "no_multi"},
      {kMovableKeys, "movablekeys"},
      {kAllowBusy, "allow_busy"},
  };
  return NamesOf(flags, kNames);
}

const std::vector<std::string_view>& AclCategoryNames() {
  static const std::vector<std::string_view> kNames = {
      "keyspace", "read",   "write",       "set",       "sortedset",  "list",        "hash",
      "string",   "bitmap", "hyperloglog", "geo",       "stream",     "pubsub",      "admin",
      "fast",     "slow",   "blocking",    "dangerous", "connection", "transaction", "scripting"};
  return kNames;
}

std::vector<std::string_view> KeySpecFlagNames(uint32_t flags) {
  static constexpr std::pair<uint32_t, std::string_view> kNames[] = {
      {kKeyRO, "RO"},
      {kKeyRW, "RW"},
      {kKeyOW, "OW"},
      {kKeyRM, "RM"},
      {kKeyAccess, "access"},
      {kKeyUpdate, "update"},
      {kKeyInsert, "insert"},
      {kKeyDelete, "delete"},
      {kKeyNotKey, "not_key"},
      {kKeyIncomplete, "incomplete"},
      {kKeyVariableFlags, "variable_flags"},
  };
  return NamesOf(flags, kNames);
}

uint32_t EffectiveAclCategories(const CommandSpec& spec) {
  // As Redis's setImplicitACLCategories.
  uint32_t acl = spec.acl_categories;
  if (spec.flags & kWrite) acl |= kAclWrite;
  if ((spec.flags & kReadonly) && !(acl & kAclScripting)) acl |= kAclRead;
  if (spec.flags & kAdmin) acl |= kAclAdmin | kAclDangerous;
  if (spec.flags & kPubsub) acl |= kAclPubsub;
  if (spec.flags & kFast) acl |= kAclFast;
  if (spec.flags & kBlocking) acl |= kAclBlocking;
  if (!(acl & kAclFast)) acl |= kAclSlow;
  return acl;
}

std::vector<KeySpec> EffectiveKeySpecs(const CommandSpec& spec) {
  if (!spec.key_specs.empty() || spec.first_key <= 0) return spec.key_specs;
  KeySpec k;
  k.flags = (spec.flags & kWrite) ? (kKeyRW | kKeyUpdate) : (kKeyRO | kKeyAccess);
  k.index = spec.first_key;
  k.last_key = spec.last_key < 0 ? spec.last_key : spec.last_key - spec.first_key;
  k.key_step = std::max(spec.key_step, 1);
  return {k};
}

namespace {

// A key spec marked variable_flags declares the widest flags; the arguments decide the real
// ones, as Redis's per-command getkeys procedures do. SET (setGetKeys): a read-modify-write with
// the GET option, an overwrite without it.
uint32_t ResolveVariableFlags(const CommandSpec& spec, const protocol::Request& args,
                              uint32_t flags) {
  if (!(flags & kKeyVariableFlags)) return flags;
  if (spec.name == "set") {
    for (size_t i = 3; i < args.size(); ++i) {
      std::string_view a = args[i];
      if (a.size() == 3 && (a[0] | 0x20) == 'g' && (a[1] | 0x20) == 'e' && (a[2] | 0x20) == 't') {
        return kKeyRW | kKeyAccess | kKeyUpdate;
      }
    }
    return kKeyOW | kKeyUpdate;
  }
  return flags;
}

}  // namespace

std::vector<KeyPosition> KeyPositions(const CommandSpec& spec, const protocol::Request& args) {
  if (spec.find_keys != nullptr) return spec.find_keys(args);
  std::vector<KeyPosition> out;
  const int argc = static_cast<int>(args.size());
  for (const KeySpec& k : EffectiveKeySpecs(spec)) {
    int first = 0;
    if (!k.by_keyword) {
      first = k.index;
    } else {
      // Search forward from start_from, or backward from the end when it is negative.
      int from = k.keyword_start_from >= 0 ? k.keyword_start_from : argc + k.keyword_start_from;
      int step = k.keyword_start_from >= 0 ? 1 : -1;
      for (int i = from; i >= 1 && i < argc; i += step) {
        std::string_view a = args[static_cast<size_t>(i)];
        if (a.size() == k.keyword.size() &&
            std::equal(a.begin(), a.end(), k.keyword.begin(),
                       [](char x, char y) { return (x | 0x20) == (y | 0x20); })) {
          first = i + 1;
          break;
        }
      }
      if (first == 0) continue;
    }
    if (first >= argc) continue;
    int last = 0, step = 1;
    if (!k.by_keynum) {
      step = k.key_step;
      if (k.last_key >= 0) {
        last = first + k.last_key;
      } else if (k.limit == 0) {
        last = argc + k.last_key;
      } else {
        last = first + ((argc - first) / k.limit + k.last_key);
      }
    } else {
      int count_at = first + k.keynum_index;
      if (count_at >= argc) continue;
      long long n = 0;
      for (char c : args[static_cast<size_t>(count_at)]) {
        if (c < '0' || c > '9' || n > argc) {
          n = -1;
          break;
        }
        n = n * 10 + (c - '0');
      }
      if (n <= 0) continue;
      first = first + k.first_key;
      step = k.step;
      last = first + static_cast<int>(n - 1) * step;
    }
    if (last >= argc || last < first) continue;
    for (int i = first; i <= last; i += step) {
      out.push_back({static_cast<size_t>(i), ResolveVariableFlags(spec, args, k.flags)});
    }
  }
  return out;
}

}  // namespace prefixd::commands
