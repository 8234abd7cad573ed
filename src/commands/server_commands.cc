// Server commands: COMMAND, CONFIG, DBSIZE, FLUSHALL, MONITOR, TIME, SHUTDOWN, and the HELP
// replies of container commands.
#include <fnmatch.h>
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <thread>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <optional>
#include <thread>

#include "commands/arg_reader.h"
#include "commands/families.h"
#include "commands/shm_call.h"
#include "common/ascii.h"
#include "common/glob.h"
#include "common/numbers.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "engine/keys.h"
#include "engine/write_path.h"
#include "store/members.h"
#include "store/stream.h"

namespace prefixd::commands {

void HelpReply(Context& ctx, const CommandSpec& container) {
  std::string upper = AsciiUpper(container.name);
  std::vector<std::string> lines;
  lines.push_back(upper + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
  for (const CommandSpec& sub : container.subcommands) {
    std::string head = AsciiUpper(sub.name);
    lines.push_back(sub.syntax.empty() ? head : head + " " + sub.syntax);
    lines.push_back("    " + sub.summary);
  }
  ctx.reply.ArrayLen(lines.size());
  for (const auto& line : lines) ctx.reply.Simple(line);
}

namespace {

void WriteSet(protocol::ReplyWriter& r, const std::vector<std::string_view>& items) {
  r.SetLen(items.size());
  for (auto item : items) r.Simple(item);
}

void WriteKeySpec(protocol::ReplyWriter& r, const KeySpec& k) {
  r.MapLen(k.notes.empty() ? 3 : 4);
  if (!k.notes.empty()) r.Bulk("notes"), r.Bulk(k.notes);
  r.Bulk("flags");
  WriteSet(r, KeySpecFlagNames(k.flags));
  r.Bulk("begin_search");
  r.MapLen(2);
  r.Bulk("type");
  r.Bulk(k.by_keyword ? "keyword" : "index");
  r.Bulk("spec");
  if (k.by_keyword) {
    r.MapLen(2);
    r.Bulk("keyword"), r.Bulk(k.keyword);
    r.Bulk("startfrom"), r.Integer(k.keyword_start_from);
  } else {
    r.MapLen(1);
    r.Bulk("index"), r.Integer(k.index);
  }
  r.Bulk("find_keys");
  r.MapLen(2);
  r.Bulk("type");
  r.Bulk(k.by_keynum ? "keynum" : "range");
  r.Bulk("spec");
  r.MapLen(3);
  if (k.by_keynum) {
    r.Bulk("keynumidx"), r.Integer(k.keynum_index);
    r.Bulk("firstkey"), r.Integer(k.first_key);
    r.Bulk("keystep"), r.Integer(k.step);
  } else {
    r.Bulk("lastkey"), r.Integer(k.last_key);
    r.Bulk("keystep"), r.Integer(k.key_step);
    r.Bulk("limit"), r.Integer(k.limit);
  }
}

// One COMMAND INFO entry, in Redis 7's ten-field layout.
void WriteCommandInfo(protocol::ReplyWriter& r, const CommandSpec& spec) {
  r.ArrayLen(10);
  r.Bulk(spec.full_name);
  r.Integer(spec.arity);
  WriteSet(r, FlagNames(spec.flags));
  r.Integer(spec.first_key);
  r.Integer(spec.last_key);
  r.Integer(spec.key_step);
  std::vector<std::string> categories;
  uint32_t acl = EffectiveAclCategories(spec);
  const auto& names = AclCategoryNames();
  for (size_t bit = 0; bit < names.size(); ++bit) {
    if (acl & (1u << bit)) categories.push_back("@" + std::string(names[bit]));
  }
  r.SetLen(categories.size());
  for (const auto& c : categories) r.Simple(c);
  r.SetLen(spec.tips.size());
  for (const auto& tip : spec.tips) r.Bulk(tip);
  std::vector<KeySpec> key_specs = EffectiveKeySpecs(spec);
  // Sets over RESP3, as Redis 7.0 sends them.
  r.SetLen(key_specs.size());
  for (const KeySpec& k : key_specs) WriteKeySpec(r, k);
  r.SetLen(spec.subcommands.size());
  for (const CommandSpec& sub : spec.subcommands) WriteCommandInfo(r, sub);
}

std::string_view ArgTypeName(ArgType t) {
  static constexpr std::string_view kNames[] = {
      "string", "integer", "double", "key", "pattern", "unix-time", "pure-token", "oneof", "block"};
  return kNames[static_cast<size_t>(t)];
}

void WriteArgs(protocol::ReplyWriter& r, const std::vector<Arg>& args) {
  r.ArrayLen(args.size());
  for (const Arg& a : args) {
    std::vector<std::string_view> flags;
    if (a.flags & kArgOptional) flags.push_back("optional");
    if (a.flags & kArgMultiple) flags.push_back("multiple");
    if (a.flags & kArgMultipleToken) flags.push_back("multiple_token");
    // A pure token is named even when empty (MIGRATE's "" key).
    const bool token = !a.token.empty() || a.type == ArgType::kPureToken;
    size_t fields = 2 + (a.key_spec_index >= 0) + token + !a.summary.empty() + !a.since.empty() +
                    !a.deprecated_since.empty() + !flags.empty() + !a.arguments.empty();
    r.MapLen(fields);
    r.Bulk("name"), r.Bulk(a.name);
    r.Bulk("type"), r.Bulk(ArgTypeName(a.type));
    if (a.key_spec_index >= 0) r.Bulk("key_spec_index"), r.Integer(a.key_spec_index);
    if (token) r.Bulk("token"), r.Bulk(a.token);
    if (!a.summary.empty()) r.Bulk("summary"), r.Bulk(a.summary);
    if (!a.since.empty()) r.Bulk("since"), r.Bulk(a.since);
    if (!a.deprecated_since.empty()) r.Bulk("deprecated_since"), r.Bulk(a.deprecated_since);
    if (!flags.empty()) r.Bulk("flags"), WriteSet(r, flags);
    if (!a.arguments.empty()) r.Bulk("arguments"), WriteArgs(r, a.arguments);
  }
}

void WriteCommandDocs(protocol::ReplyWriter& r, const CommandSpec& spec) {
  bool syntax = !spec.redis_command;
  size_t fields = 4 + syntax + !spec.arguments.empty() + !spec.subcommands.empty();
  r.MapLen(fields);
  r.Bulk("summary"), r.Bulk(spec.summary);
  r.Bulk("since"), r.Bulk(spec.since);
  r.Bulk("group"), r.Bulk(spec.group);
  r.Bulk("complexity"), r.Bulk(spec.complexity);
  if (syntax) r.Bulk("syntax"), r.Bulk(spec.syntax);
  if (!spec.arguments.empty()) r.Bulk("arguments"), WriteArgs(r, spec.arguments);
  if (!spec.subcommands.empty()) {
    r.Bulk("subcommands");
    r.MapLen(spec.subcommands.size());
    for (const CommandSpec& sub : spec.subcommands) {
      r.Bulk(sub.full_name);
      WriteCommandDocs(r, sub);
    }
  }
}

void Command(Context& ctx) {
  auto all = ctx.engine.registry->All();
  ctx.reply.ArrayLen(all.size());
  for (const CommandSpec* spec : all) WriteCommandInfo(ctx.reply, *spec);
}

void CommandCount(Context& ctx) {
  ctx.reply.Integer(static_cast<int64_t>(ctx.engine.registry->All().size()));
}

// Resolves "config" or "config|get" to a spec.
const CommandSpec* Resolve(const Registry& registry, std::string_view name) {
  auto bar = name.find('|');
  const CommandSpec* spec = registry.Find(name.substr(0, bar));
  if (spec == nullptr || bar == std::string_view::npos) return spec;
  std::string_view sub = name.substr(bar + 1);
  for (const CommandSpec& s : spec->subcommands) {
    if (EqualsIgnoreCase(s.name, sub)) return &s;
  }
  return nullptr;
}

void CommandInfo(Context& ctx) {
  const auto& args = ctx.args;
  if (args.size() == 2) return Command(ctx);
  ctx.reply.ArrayLen(args.size() - 2);
  for (size_t i = 2; i < args.size(); ++i) {
    const CommandSpec* spec = Resolve(*ctx.engine.registry, args[i]);
    if (spec == nullptr) {
      ctx.reply.Null();  // as Redis 7.0: `$-1` over RESP2
    } else {
      WriteCommandInfo(ctx.reply, *spec);
    }
  }
}

void CommandDocs(Context& ctx) {
  const auto& args = ctx.args;
  std::vector<const CommandSpec*> specs;
  if (args.size() == 2) {
    specs = ctx.engine.registry->All();
  } else {
    for (size_t i = 2; i < args.size(); ++i) {
      if (const CommandSpec* spec = Resolve(*ctx.engine.registry, args[i])) specs.push_back(spec);
    }
  }
  ctx.reply.MapLen(specs.size());
  for (const CommandSpec* spec : specs) {
    ctx.reply.Bulk(spec->full_name);
    WriteCommandDocs(ctx.reply, *spec);
  }
}

void CommandList(Context& ctx) {
  const auto& args = ctx.args;
  std::string_view pattern;
  std::optional<uint32_t> category;
  ArgReader r(ctx, 2);
  if (args.size() == 5 && r.Keyword("FILTERBY")) {
    const auto filter = r.OneOf({"PATTERN", "ACLCAT", "MODULE"});
    if (!filter) return ctx.reply.Error(errors::kSyntax);
    const std::string_view value = r.Next();
    if (*filter == 0) {
      pattern = value;
    } else if (*filter == 1) {
      const auto& names = AclCategoryNames();
      auto it = std::find_if(names.begin(), names.end(),
                             [&](std::string_view n) { return EqualsIgnoreCase(n, value); });
      // As Redis: an unknown category matches nothing.
      category = it == names.end() ? 0u : 1u << (it - names.begin());
    } else {
      return ctx.reply.ArrayLen(0);
    }
  } else if (args.size() != 2) {
    return ctx.reply.Error(errors::kSyntax);
  }
  std::vector<std::string> names;
  // Redis matches without case; names are lower case, so the pattern is folded once.
  const std::string folded = AsciiLower(pattern);
  for (const CommandSpec* spec : ctx.engine.registry->All()) {
    auto consider = [&](const CommandSpec& s) {
      if (category && !(EffectiveAclCategories(s) & *category)) return;
      if (!pattern.empty() && !GlobMatch(folded, s.full_name)) return;
      names.push_back(s.full_name);
    };
    consider(*spec);
    for (const CommandSpec& sub : spec->subcommands) consider(sub);
  }
  ctx.reply.ArrayLen(names.size());
  for (const auto& n : names) ctx.reply.Bulk(n);
}

// The spec `words` name: a command, or a container's subcommand; null when none.
const CommandSpec* NamedSpec(const Registry& registry, const protocol::Request& words) {
  const CommandSpec* spec = registry.Find(words[0]);
  if (spec != nullptr && !spec->subcommands.empty()) {
    spec = words.size() >= 2
               ? Resolve(registry, std::string(words[0]) + "|" + std::string(words[1]))
               : nullptr;
  }
  return spec;
}

// COMMAND GETKEYS and GETKEYSANDFLAGS: the keys of the command in argv[2..], found from its key
// specs. SHM.CALL names no key itself: the keys are its carried command's, found as the registry
// finds them when it dispatches that command (cluster routing included); a key that lies in the
// passed file cannot be read here, and is an error.
void GetKeys(Context& ctx, bool with_flags) {
  protocol::Request rest;
  for (size_t i = 2; i < ctx.args.size(); ++i) rest.AddSmall(ctx.args[i]);
  const CommandSpec* spec = NamedSpec(*ctx.engine.registry, rest);
  if (spec == nullptr) return ctx.reply.Error(errors::kInvalidCommandSpecified);
  const auto arity_fits = [&](const CommandSpec& s) {
    return (s.arity <= 0 || static_cast<size_t>(s.arity) == rest.size()) &&
           rest.size() >= static_cast<size_t>(std::abs(s.arity));
  };
  ShmCallLayout layout;
  if (spec->descriptors == Descriptors::kCarries) {
    if (!arity_fits(*spec)) return ctx.reply.Error(errors::kInvalidArgumentCount);
    if (std::string why = ParseShmCall(rest, layout); !why.empty()) return ctx.reply.Error(why);
    protocol::Request carried;
    for (size_t i = layout.carried_at; i < rest.size(); ++i) carried.AddSmall(rest[i]);
    rest.swap(carried);
    const CommandSpec* carrier = spec;
    spec = NamedSpec(*ctx.engine.registry, rest);
    if (spec == nullptr) return ctx.reply.Error(errors::kInvalidCommandSpecified);
    if (spec->descriptors != Descriptors::kNone) {
      return ctx.reply.Error(errors::ShmCallCannotCarry(carrier->name, spec->full_name));
    }
  }
  if (EffectiveKeySpecs(*spec).empty()) return ctx.reply.Error(errors::kNoKeyArguments);
  if (!arity_fits(*spec)) return ctx.reply.Error(errors::kInvalidArgumentCount);
  std::vector<KeyPosition> keys = KeyPositions(*spec, rest);
  if (keys.empty()) {
    if (spec->flags & kNoMandatoryKeys) return ctx.reply.ArrayLen(0);
    return ctx.reply.Error(errors::kInvalidArguments);
  }
  for (const KeyPosition& k : keys) {
    if (k.index < layout.from_file.size() && layout.from_file[k.index]) {
      return ctx.reply.Error(errors::ShmCallKeyInFile(k.index));
    }
  }
  ctx.reply.ArrayLen(keys.size());
  for (const KeyPosition& k : keys) {
    if (!with_flags) {
      ctx.reply.Bulk(rest[k.index]);
      continue;
    }
    ctx.reply.ArrayLen(2);
    ctx.reply.Bulk(rest[k.index]);
    WriteSet(ctx.reply, KeySpecFlagNames(k.flags));
  }
}

void ConfigGet(Context& ctx) {
  // (setting index, by its alias) -> the name to answer with. Like Redis, a name given without
  // wildcards is echoed as the client wrote it, and an alias (hash-max-ziplist-entries) answers
  // under its own name beside the setting's.
  std::map<std::pair<size_t, bool>, std::string> matched;
  for (ArgReader r(ctx, 2); r.more();) {
    std::string pattern(r.Next());
    if (pattern.find_first_of("*?[") == std::string::npos) {
      if (auto id = Settings::Find(pattern)) {
        const bool alias = Settings::Alias(*id) == AsciiLower(pattern);
        matched.emplace(std::make_pair(static_cast<size_t>(*id), alias), pattern);
      }
      continue;
    }
    for (size_t k = 0; k < Settings::Specs().size(); ++k) {
      for (const bool alias : {false, true}) {
        std::string name(alias ? Settings::Alias(static_cast<Setting>(k))
                               : Settings::Specs()[k].name);
        if (!name.empty() && fnmatch(pattern.c_str(), name.c_str(), FNM_CASEFOLD) == 0) {
          matched.emplace(std::make_pair(k, alias), name);
        }
      }
    }
  }
  ctx.reply.MapLen(matched.size());
  for (const auto& [k, name] : matched) {
    ctx.reply.Bulk(name);
    ctx.reply.Bulk(ctx.engine.settings().Get(static_cast<Setting>(k.first)));
  }
}

void ConfigSet(Context& ctx) {
  const auto& args = ctx.args;
  if ((args.size() - 2) % 2 != 0) return ctx.reply.Error(errors::kSyntax);
  auto failed = [&](std::string_view arg, std::string_view why) {
    ctx.reply.Error(errors::ConfigSetFailed(arg, why));
  };
  Settings& settings = ctx.engine.settings();
  // Checked in Redis's order: unknown, immutable, protected, duplicate, then every value on a
  // scratch copy, so that a bad pair changes nothing.
  Settings scratch;
  std::vector<std::pair<Setting, std::string_view>> changes;
  for (ArgReader r(ctx, 2); r.more();) {
    const std::string_view name = r.Next(), value = r.Next();
    auto id = Settings::Find(name);
    if (!id) {
      return ctx.reply.Error(errors::ConfigSetUnknown(name));
    }
    const SettingSpec& spec = Settings::Specs()[static_cast<size_t>(*id)];
    if (!spec.runtime_mutable) {
      // prefixd reads more settings at start only than Redis does (bind, port, appendonly):
      // setting one to the value it has changes nothing, so it is allowed, and a client that
      // writes back what CONFIG GET * returned works.
      if (value == settings.Get(*id)) continue;
      return failed(name, "can't set immutable config");
    }
    // Setting a path to what it already is only reloads it (TLS certificates): always allowed.
    if (spec.is_protected && value != settings.Get(*id) &&
        !ProtectedActionAllowed(settings.String(Setting::kEnableProtectedConfigs),
                                ctx.client.local)) {
      return failed(name, "can't set protected config");
    }
    for (const auto& change : changes) {
      if (change.first == *id) return failed(name, "duplicate parameter");
    }
    if (std::string err = scratch.Set(*id, value, /*at_startup=*/false); !err.empty()) {
      return failed(name, err);
    }
    changes.emplace_back(*id, value);
  }
  if (changes.empty()) return ctx.reply.Simple("OK");
  std::vector<std::string> previous;
  std::vector<Setting> changed;
  for (auto [id, value] : changes) {
    previous.push_back(settings.Get(id));
    settings.Set(id, value, /*at_startup=*/false);
    changed.push_back(id);
  }
  Setting culprit = changed.front();
  if (std::string err = settings.Apply(changed, &culprit); !err.empty()) {
    // Put every value back and into effect again, as Redis does.
    for (size_t i = 0; i < changed.size(); ++i) {
      settings.Set(changed[i], previous[i], /*at_startup=*/true);
    }
    settings.Apply(changed);
    size_t at = std::find(changed.begin(), changed.end(), culprit) - changed.begin();
    return failed(args[2 + 2 * at], err);
  }
  for (Setting id : changed) {
    if (id == Setting::kAppendFsync && ctx.engine.durability() != nullptr) {
      ctx.engine.durability()->set_policy(
          persist::ParsePolicy(settings.String(Setting::kAppendFsync)));
    }
    if (id == Setting::kLogLevel) {
      spdlog::set_level(spdlog::level::from_str(settings.String(id) == "notice" ? "info"
                                                : settings.String(id) == "verbose"
                                                    ? "debug"
                                                    : settings.String(id)));
    }
  }
  ctx.reply.Simple("OK");
}

void ConfigResetStat(Context& ctx) {
  auto& s = ctx.engine.stats();
  s.total_connections = 0, s.rejected_connections = 0;
  s.total_commands.Reset(), s.rejected_calls.Reset();
  s.keyspace_hits.Reset(), s.keyspace_misses.Reset();
  s.closed_net_input = 0, s.closed_net_output = 0;
  s.errors.Reset();
  for (const CommandSpec* spec : ctx.engine.registry->All()) {
    spec->stats->Reset();
    for (const CommandSpec& sub : spec->subcommands) sub.stats->Reset();
  }
  ctx.reply.Simple("OK");
}

// FLUSHALL and FLUSHDB take [ASYNC|SYNC]; both empty at once (the freeing is cheap: values are
// ref-counted buffers), so the two behave alike.
template <class Record>
void Flush(Context& ctx) {
  ArgReader r(ctx, 1);
  r.OneOf({"ASYNC", "SYNC"});
  if (r.more()) return ctx.reply.Error(errors::kSyntax);
  if (!Mutate(ctx, Record{})) return;  // one record clears every store (of the database)
  ctx.reply.Simple("OK");
}

// MONITOR: from now on the client receives every command run (engine/monitor.h writes the lines).
void Monitor(Context& ctx) {
  // Run by EXEC: a client whose replies come as one array cannot turn into a stream of lines.
  if (ctx.session.in_multi) {
    return ctx.reply.Error(errors::kMonitorDenyBlocking);
  }
  ctx.engine.AddMonitor(ctx.client.id);
  ctx.reply.Simple("OK");
}

void Time(Context& ctx) {
  using namespace std::chrono;
  auto us = duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
  ctx.reply.ArrayLen(2);
  ctx.reply.Bulk(std::to_string(us / 1000000));
  ctx.reply.Bulk(std::to_string(us % 1000000));
}

// SHUTDOWN SAVE writes a snapshot first; plain SHUTDOWN writes none, as Redis with no save points
// (prefixd has none: with the log on, the log keeps everything anyway).
void Shutdown(Context& ctx) {
  ArgReader r(ctx, 1);
  bool save = false, nosave = false, force = false;
  while (r.more()) {
    auto option = r.OneOf({"ABORT", "NOSAVE", "SAVE", "NOW", "FORCE"});
    if (!option) return ctx.reply.Error(errors::kSyntax);
    if (*option == 0) return ctx.reply.Error(errors::kNoShutdownInProgress);
    save |= *option == 2, nosave |= *option == 1, force |= *option == 4;
  }
  if (save && nosave) return ctx.reply.Error(errors::kSyntax);
  if (save && (ctx.engine.durability() != nullptr || ctx.engine.logless_snapshots() != nullptr)) {
    if (Status saved = SaveNow(ctx.engine); !saved.ok()) {
      spdlog::warn("Error trying to save the data before shutdown: {}{}", saved.message(),
                   force ? "; exiting anyway (FORCE)" : ", can't exit");
      if (!force) return ctx.reply.Error(errors::kShutdownFailed);
    }
  }
  spdlog::warn("User requested shutdown (client id={})", ctx.client.id);
  // Like Redis, a successful SHUTDOWN closes the connection without a reply.
  ctx.client.close_after_reply = true;
  ctx.engine.RequestShutdown();
}

// DEBUG DIGEST-VALUE: 20 bytes in hex per key that equal exactly when two values do (40 zeros
// for a missing key), as Redis's. A set's digest ignores member order, and a hash's the order of
// its field-value pairs, as Redis's do; the other types digest their value's bytes in order.
std::string DigestValue(const std::optional<store::KeyInfo>& info) {
  if (!info) return std::string(40, '0');
  XXH128_hash_t sum{0, 0};
  const auto mix = [&](std::string_view bytes, bool ordered) {
    const XXH128_hash_t h = XXH3_128bits_withSeed(bytes.data(), bytes.size(), sum.low64 * ordered);
    sum = ordered ? h : XXH128_hash_t{sum.low64 ^ h.low64, sum.high64 ^ h.high64};
  };
  const std::string_view type = store::KeyTypeName(info->type);
  if (info->type == store::KeyType::kSet || info->type == store::KeyType::kHash) {
    const std::vector<std::string> members =
        store::DecodeMembers(info->value.view()).value_or(std::vector<std::string>{});
    const size_t step = info->type == store::KeyType::kHash ? 2 : 1;
    for (size_t i = 0; i + step <= members.size(); i += step) {
      // A hash's pair digests as its encoding: both lengths in front keep ("ab","c") apart from
      // ("a","bc").
      mix(step == 1 ? std::string_view(members[i])
                    : std::string_view(store::EncodeMembers({members[i], members[i + 1]}).view()),
          false);
    }
    const XXH128_hash_t h = XXH3_128bits_withSeed(type.data(), type.size(), sum.low64 ^ sum.high64);
    sum = h;
  } else {
    mix(type, true);
    // A stream's room for appends is no part of its value.
    const std::string_view value = info->value.view();
    mix(info->type == store::KeyType::kStream ? value.substr(0, store::StreamUsedBytes(value))
                                              : value,
        true);
  }
  char hex[41];
  const uint32_t tail = static_cast<uint32_t>(XXH3_64bits_withSeed(&sum, sizeof(sum), 1));
  std::snprintf(hex, sizeof(hex), "%016llx%016llx%08x", static_cast<unsigned long long>(sum.high64),
                static_cast<unsigned long long>(sum.low64), tail);
  return std::string(hex, 40);
}

// DEBUG: only where enable-debug-command allows it (Redis's rule and text). SLEEP blocks the
// client's io thread, to test how the rest of the server copes.
void Debug(Context& ctx) {
  const auto& args = ctx.args;
  if (!ProtectedActionAllowed(ctx.engine.settings().String(Setting::kEnableDebugCommand),
                              ctx.client.local)) {
    return ctx.reply.Error(errors::kDebugNotAllowed);
  }
  // A subcommand given the wrong number of arguments is answered as an unknown one, as Redis.
  ArgReader r(ctx, 1);
  switch (r.OneOf({"HELP", "DIGEST-VALUE", "SLEEP"}).value_or(3)) {
    case 0: {
      if (r.more()) break;
      static constexpr std::string_view kLines[] = {
          "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
          "SLEEP <seconds>",
          "    Stop the server for <seconds>. Decimals allowed.",
          "DIGEST-VALUE <key> [<key> ...]",
          "    Output a hex signature of the values of all the specified keys.",
          "HELP",
          "    Print this help."};
      ctx.reply.ArrayLen(std::size(kLines));
      for (auto line : kLines) ctx.reply.Simple(line);
      return;
    }
    case 1:
      ctx.reply.ArrayLen(r.remaining());
      while (r.more()) ctx.reply.Simple(DigestValue(LookupKey(ctx, r.Next(), /*touch=*/false)));
      return;
    case 2: {
      if (r.remaining() != 1) break;
      std::string text(r.Next());
      char* end = nullptr;
      double seconds = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !(seconds >= 0) || seconds > 1e6) {
        return ctx.reply.Error(errors::kNotFloat);
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
      return ctx.reply.Simple("OK");
    }
  }
  ctx.reply.Error(errors::DebugUnknownSubcommand(args[1]));
}

// FLUSHALL's and FLUSHDB's optional [ASYNC|SYNC], as Redis's JSON has it.
std::vector<Arg> FlushModeArgs() {
  return {OneOfArg("async", kArgOptional,
                   {TokenArg("async", "ASYNC", "4.0.0"), TokenArg("sync", "SYNC", "6.2.0")})};
}

}  // namespace

void RegisterServerCommands(Registry& r) {
  auto cmd = [](std::string name, int arity, uint32_t flags, std::string syntax,
                std::string summary, Handler h, std::string complexity = "O(1)") {
    return MakeSpec("server", 0, std::move(name), arity, flags, std::move(syntax),
                    std::move(summary), h, std::move(complexity));
  };
  constexpr uint32_t kLS = kLoading | kStale;
  constexpr uint32_t kConfigFlags = kAdmin | kNoScript | kLoading | kStale;
  const std::vector<std::string> kUnordered = {"nondeterministic_output_order"};
  CommandSpec command =
      AsRedis(cmd("command", -1, kLS, "[subcommand]", "Describes the commands this server speaks.",
                  Command, "O(N) in the number of commands"),
              "2.8.13", kAclConnection, kUnordered);
  command.subcommands = {
      AsRedis(cmd("count", 2, kLS, "", "Counts the commands.", CommandCount), "2.8.13",
              kAclConnection),
      AsRedis(cmd("info", -2, kLS, "[command-name ...]", "Describes the named commands, or all.",
                  CommandInfo, "O(N)"),
              "2.8.13", kAclConnection, kUnordered),
      AsRedis(cmd("docs", -2, kLS, "[command-name ...]", "Documents the named commands, or all.",
                  CommandDocs, "O(N)"),
              "7.0.0", kAclConnection, kUnordered),
      AsRedis(cmd("list", -2, kLS,
                  "[FILTERBY <MODULE module-name | ACLCAT category | PATTERN pattern>]",
                  "Lists command names.", CommandList, "O(N)"),
              "7.0.0", kAclConnection, kUnordered),
      AsRedis(cmd(
                  "getkeys", -4, kLS, "<command> [arg ...]",
                  "Extracts the key names from a full command line.",
                  [](Context& ctx) { GetKeys(ctx, false); }, "O(N) in the arguments"),
              "2.8.13", kAclConnection),
      AsRedis(cmd(
                  "getkeysandflags", -4, kLS, "<command> [arg ...]",
                  "Extracts the key names and their key-spec flags from a full command line.",
                  [](Context& ctx) { GetKeys(ctx, true); }, "O(N) in the arguments"),
              "7.0.0", kAclConnection),
      AsRedis(cmd("help", 2, kLS, "", "Lists the COMMAND subcommands.",
                  [](Context& ctx) { HelpReply(ctx, *ctx.engine.registry->Find("command")); }),
              "5.0.0", kAclConnection),
  };
  r.Add(std::move(command));

  r.Add(AsRedis(cmd("debug", -2, kAdmin | kNoScript | kLS, "<subcommand> [arguments]",
                    "Debugging aids (SLEEP); allowed only as enable-debug-command says.", Debug,
                    "Depends on subcommand."),
                "1.0.0"));

  CommandSpec config = AsRedis(
      cmd("config", -2, 0, "<subcommand> [arguments]", "Reads and changes settings.", nullptr),
      "2.0.0");
  config.subcommands = {
      AsRedis(cmd("get", -3, kConfigFlags, "<parameter> [parameter ...]",
                  "Returns the settings matching the glob patterns.", ConfigGet, "O(N)"),
              "2.0.0"),
      AsRedis(cmd("set", -4, kConfigFlags, "<parameter> <value> [parameter value ...]",
                  "Changes settings at runtime; all or none.", ConfigSet, "O(N)"),
              "2.0.0", 0, {"request_policy:all_nodes", "response_policy:all_succeeded"}),
      AsRedis(cmd("resetstat", 2, kConfigFlags, "", "Resets the INFO statistics.", ConfigResetStat),
              "2.0.0"),
      AsRedis(cmd("help", 2, kLS, "", "Lists the CONFIG subcommands.",
                  [](Context& ctx) { HelpReply(ctx, *ctx.engine.registry->Find("config")); }),
              "5.0.0"),
  };
  r.Add(std::move(config));

  r.Add(AsRedis(
      cmd("flushall", -1, kWrite, "[ASYNC|SYNC]", "Removes every stored entry of every database.",
          Flush<persist::FlushAll>, "O(N)"),
      "1.0.0", kAclKeyspace | kAclDangerous,
      {"request_policy:all_shards", "response_policy:all_succeeded"}, FlushModeArgs()));
  r.Add(AsRedis(
      cmd("flushdb", -1, kWrite, "[ASYNC|SYNC]",
          "Removes every stored entry of the selected database.", Flush<persist::FlushDb>, "O(N)"),
      "1.0.0", kAclKeyspace | kAclDangerous,
      {"request_policy:all_shards", "response_policy:all_succeeded"}, FlushModeArgs()));
  r.Add(AsRedis(cmd("monitor", 1, kAdmin | kNoScript | kLS, "",
                    "Streams every command the server runs, as Redis's MONITOR lines.", Monitor,
                    "O(1) per command fed"),
                "1.0.0"));
  r.Add(AsRedis(cmd("time", 1, kLS | kFast, "", "Returns the server's clock.", Time), "2.6.0", 0,
                {"nondeterministic_output"}));
  r.Add(AsRedis(cmd("shutdown", -1, kAdmin | kNoScript | kLS | kNoMulti | kAllowBusy,
                    "[NOSAVE|SAVE] [NOW] [FORCE]", "Stops the server.", Shutdown),
                "1.0.0"));
  r.Add(AsRedis(cmd("info", -1, kLS, "[section ...]",
                    "Reports server, clients, memory, stats and keyspace figures.", InfoCommand,
                    "O(N) in the number of sections"),
                "1.0.0", kAclDangerous,
                {"nondeterministic_output", "request_policy:all_shards", "response_policy:special"},
                {StrArg("section", kArgOptional | kArgMultiple)}));
}

}  // namespace prefixd::commands
