// Server commands: COMMAND, CONFIG, DBSIZE, FLUSHALL, TIME, SHUTDOWN, and the HELP replies of
// container commands.
#include <fnmatch.h>
#include <spdlog/spdlog.h>

#include <thread>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <thread>

#include "commands/engine.h"
#include "commands/errors.h"
#include "commands/mutate.h"
#include "commands/registry.h"
#include "common/ascii.h"
#include "common/numbers.h"

namespace prefixd::commands {

void InfoCommand(Context& ctx);

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

// One COMMAND INFO entry, in Redis 7's ten-field layout.
void WriteCommandInfo(protocol::ReplyWriter& r, const CommandSpec& spec) {
  r.ArrayLen(10);
  r.Bulk(spec.full_name);
  r.Integer(spec.arity);
  WriteSet(r, FlagNames(spec.flags));
  r.Integer(spec.first_key);
  r.Integer(spec.last_key);
  r.Integer(spec.key_step);
  std::string category = "@" + spec.group;
  WriteSet(r, {category});
  r.SetLen(0);    // tips
  r.ArrayLen(0);  // key specs
  r.ArrayLen(spec.subcommands.size());
  for (const CommandSpec& sub : spec.subcommands) WriteCommandInfo(r, sub);
}

void WriteCommandDocs(protocol::ReplyWriter& r, const CommandSpec& spec) {
  size_t fields = 4 + (spec.subcommands.empty() ? 0 : 1) + 1;
  r.MapLen(fields);
  r.Bulk("summary"), r.Bulk(spec.summary);
  r.Bulk("since"), r.Bulk(spec.since);
  r.Bulk("group"), r.Bulk(spec.group);
  r.Bulk("complexity"), r.Bulk(spec.complexity);
  r.Bulk("syntax"), r.Bulk(spec.syntax);
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
      ctx.reply.NullArray();
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
  std::string_view pattern, group;
  if (args.size() == 5 && EqualsIgnoreCase(args[2], "FILTERBY")) {
    if (EqualsIgnoreCase(args[3], "PATTERN")) {
      pattern = args[4];
    } else if (EqualsIgnoreCase(args[3], "ACLCAT") || EqualsIgnoreCase(args[3], "MODULE")) {
      group = args[4];
      if (EqualsIgnoreCase(args[3], "MODULE")) return ctx.reply.ArrayLen(0);
    } else {
      return ctx.reply.Error(errors::kSyntax);
    }
  } else if (args.size() != 2) {
    return ctx.reply.Error(errors::kSyntax);
  }
  std::vector<std::string> names;
  for (const CommandSpec* spec : ctx.engine.registry->All()) {
    auto consider = [&](const CommandSpec& s) {
      if (!group.empty() && !EqualsIgnoreCase(s.group, group)) return;
      std::string p(pattern);
      if (!pattern.empty() && fnmatch(p.c_str(), s.full_name.c_str(), FNM_CASEFOLD) != 0) return;
      names.push_back(s.full_name);
    };
    consider(*spec);
    for (const CommandSpec& sub : spec->subcommands) consider(sub);
  }
  ctx.reply.ArrayLen(names.size());
  for (const auto& n : names) ctx.reply.Bulk(n);
}

void ConfigGet(Context& ctx) {
  const auto& args = ctx.args;
  // Setting index -> the name to answer with. Like Redis, a name given without wildcards is
  // echoed as the client wrote it.
  std::map<size_t, std::string> matched;
  for (size_t i = 2; i < args.size(); ++i) {
    std::string pattern(args[i]);
    if (pattern.find_first_of("*?[") == std::string::npos) {
      if (auto id = Settings::Find(pattern)) matched.emplace(static_cast<size_t>(*id), pattern);
      continue;
    }
    for (size_t k = 0; k < Settings::Specs().size(); ++k) {
      std::string name(Settings::Specs()[k].name);
      if (fnmatch(pattern.c_str(), name.c_str(), FNM_CASEFOLD) == 0) matched.emplace(k, name);
    }
  }
  ctx.reply.MapLen(matched.size());
  for (const auto& [k, name] : matched) {
    ctx.reply.Bulk(name);
    ctx.reply.Bulk(ctx.engine.settings().Get(static_cast<Setting>(k)));
  }
}

void ConfigSet(Context& ctx) {
  const auto& args = ctx.args;
  if ((args.size() - 2) % 2 != 0) return ctx.reply.Error(errors::kSyntax);
  auto failed = [&](std::string_view arg, std::string_view why) {
    ctx.reply.Error("ERR CONFIG SET failed (possibly related to argument '" + std::string(arg) +
                    "') - " + std::string(why));
  };
  Settings& settings = ctx.engine.settings();
  // Checked in Redis's order: unknown, immutable, protected, duplicate, then every value on a
  // scratch copy, so that a bad pair changes nothing.
  Settings scratch;
  std::vector<std::pair<Setting, std::string_view>> changes;
  for (size_t i = 2; i < args.size(); i += 2) {
    auto id = Settings::Find(args[i]);
    if (!id) {
      return ctx.reply.Error("ERR Unknown option or number of arguments for CONFIG SET - '" +
                             std::string(args[i]) + "'");
    }
    const SettingSpec& spec = Settings::Specs()[static_cast<size_t>(*id)];
    if (!spec.runtime_mutable) return failed(args[i], "can't set immutable config");
    // Setting a path to what it already is only reloads it (TLS certificates): always allowed.
    if (spec.is_protected && args[i + 1] != settings.Get(*id) &&
        !ProtectedActionAllowed(settings.String(Setting::kEnableProtectedConfigs),
                                ctx.client.local)) {
      return failed(args[i], "can't set protected config");
    }
    for (const auto& [seen, value] : changes) {
      if (seen == *id) return failed(args[i], "duplicate parameter");
    }
    if (std::string err = scratch.Set(*id, args[i + 1], /*at_startup=*/false); !err.empty()) {
      return failed(args[i], err);
    }
    changes.emplace_back(*id, args[i + 1]);
  }
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
  ctx.reply.Simple("OK");
}

// FLUSHALL and FLUSHDB take [ASYNC|SYNC]; both empty at once (the freeing is cheap: values are
// ref-counted buffers), so the two behave alike.
template <class Record>
void Flush(Context& ctx) {
  if (ctx.args.size() > 2) return ctx.reply.Error(errors::kSyntax);
  if (ctx.args.size() == 2 && !EqualsIgnoreCase(ctx.args[1], "ASYNC") &&
      !EqualsIgnoreCase(ctx.args[1], "SYNC")) {
    return ctx.reply.Error(errors::kSyntax);
  }
  if (!Mutate(ctx, Record{})) return;  // one record clears every store (of the database)
  ctx.reply.Simple("OK");
}

void Time(Context& ctx) {
  using namespace std::chrono;
  auto us = duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
  ctx.reply.ArrayLen(2);
  ctx.reply.Bulk(std::to_string(us / 1000000));
  ctx.reply.Bulk(std::to_string(us % 1000000));
}

void Shutdown(Context& ctx) {
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    std::string_view opt = ctx.args[i];
    if (EqualsIgnoreCase(opt, "ABORT")) {
      return ctx.reply.Error("ERR No shutdown in progress.");
    }
    if (!EqualsIgnoreCase(opt, "NOSAVE") && !EqualsIgnoreCase(opt, "SAVE") &&
        !EqualsIgnoreCase(opt, "NOW") && !EqualsIgnoreCase(opt, "FORCE")) {
      return ctx.reply.Error(errors::kSyntax);
    }
  }
  spdlog::warn("User requested shutdown (client id={})", ctx.client.id);
  // Like Redis, a successful SHUTDOWN closes the connection without a reply.
  ctx.client.close_after_reply = true;
  ctx.engine.RequestShutdown();
}

// DEBUG: only where enable-debug-command allows it (Redis's rule and text). SLEEP blocks the
// client's io thread, to test how the rest of the server copes.
void Debug(Context& ctx) {
  const auto& args = ctx.args;
  if (!ProtectedActionAllowed(ctx.engine.settings().String(Setting::kEnableDebugCommand),
                              ctx.client.local)) {
    return ctx.reply.Error(errors::kDebugNotAllowed);
  }
  if (EqualsIgnoreCase(args[1], "HELP") && args.size() == 2) {
    static constexpr std::string_view kLines[] = {
        "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "SLEEP <seconds>",
        "    Stop the server for <seconds>. Decimals allowed.", "HELP", "    Print this help."};
    ctx.reply.ArrayLen(std::size(kLines));
    for (auto line : kLines) ctx.reply.Simple(line);
    return;
  }
  if (EqualsIgnoreCase(args[1], "SLEEP") && args.size() == 3) {
    std::string text(args[2]);
    char* end = nullptr;
    double seconds = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(seconds >= 0) || seconds > 1e6) {
      return ctx.reply.Error("ERR value is not a valid float");
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    return ctx.reply.Simple("OK");
  }
  ctx.reply.Error("ERR unknown subcommand or wrong number of arguments for '" +
                  std::string(args[1].substr(0, 128)) + "'. Try DEBUG HELP.");
}

}  // namespace

void RegisterServerCommands(Registry& r) {
  auto cmd = [](std::string name, int arity, uint32_t flags, std::string syntax,
                std::string summary, Handler h, std::string complexity = "O(1)") {
    return MakeSpec("server", 0, std::move(name), arity, flags, std::move(syntax),
                    std::move(summary), h, std::move(complexity));
  };
  CommandSpec command =
      cmd("command", -1, kLoading | kStale, "[subcommand]",
          "Describes the commands this server speaks.", Command, "O(N) in the number of commands");
  command.subcommands = {
      cmd("count", 2, kLoading | kStale, "", "Counts the commands.", CommandCount),
      cmd("info", -2, kLoading | kStale, "[command-name ...]",
          "Describes the named commands, or all.", CommandInfo, "O(N)"),
      cmd("docs", -2, kLoading | kStale, "[command-name ...]",
          "Documents the named commands, or all.", CommandDocs, "O(N)"),
      cmd("list", -2, kLoading | kStale,
          "[FILTERBY <MODULE module-name | ACLCAT category | PATTERN pattern>]",
          "Lists command names.", CommandList, "O(N)"),
      cmd("help", 2, kLoading | kStale, "", "Lists the COMMAND subcommands.",
          [](Context& ctx) { HelpReply(ctx, *ctx.engine.registry->Find("command")); }),
  };
  r.Add(std::move(command));

  r.Add(cmd("debug", -2, kAdmin | kNoScript | kLoading | kStale, "<subcommand> [arguments]",
            "Debugging aids (SLEEP); allowed only as enable-debug-command says.", Debug));

  CommandSpec config =
      cmd("config", -2, 0, "<subcommand> [arguments]", "Reads and changes settings.", nullptr);
  config.subcommands = {
      cmd("get", -3, kAdmin | kLoading | kStale, "<parameter> [parameter ...]",
          "Returns the settings matching the glob patterns.", ConfigGet, "O(N)"),
      cmd("set", -4, kAdmin | kLoading | kStale, "<parameter> <value> [parameter value ...]",
          "Changes settings at runtime; all or none.", ConfigSet, "O(N)"),
      cmd("resetstat", 2, kAdmin | kLoading | kStale, "", "Resets the INFO statistics.",
          ConfigResetStat),
      cmd("help", 2, kLoading | kStale, "", "Lists the CONFIG subcommands.",
          [](Context& ctx) { HelpReply(ctx, *ctx.engine.registry->Find("config")); }),
  };
  r.Add(std::move(config));

  r.Add(cmd("flushall", -1, kWrite, "[ASYNC|SYNC]", "Removes every stored entry of every database.",
            Flush<persist::FlushAll>, "O(N)"));
  r.Add(cmd("flushdb", -1, kWrite, "[ASYNC|SYNC]",
            "Removes every stored entry of the selected database.", Flush<persist::FlushDb>,
            "O(N)"));
  r.Add(cmd("time", 1, kFast | kLoading | kStale, "", "Returns the server's clock.", Time));
  r.Add(cmd("shutdown", -1, kAdmin | kNoScript | kLoading | kStale, "[NOSAVE|SAVE] [NOW] [FORCE]",
            "Stops the server.", Shutdown));
  r.Add(cmd("info", -1, kLoading | kStale, "[section ...]",
            "Reports server, clients, memory, stats and keyspace figures.", InfoCommand,
            "O(N) in the number of sections"));
}

}  // namespace prefixd::commands
