#include "commands/registry.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <optional>

#include "commands/cluster_routing.h"
#include "commands/errors.h"
#include "commands/key_access.h"
#include "common/ascii.h"
#include "common/clock.h"

namespace prefixd::commands {
namespace {

// Text as C's "%.*s" prints it: up to the first NUL.
std::string_view CString(std::string_view s) {
  auto nul = s.find('\0');
  return nul == std::string_view::npos ? s : s.substr(0, nul);
}

bool ArityOk(int arity, size_t argc) {
  return arity > 0 ? argc == static_cast<size_t>(arity) : argc >= static_cast<size_t>(-arity);
}

}  // namespace

bool ProtectedModeRefuses(const Settings& settings, const server::ClientState& client) {
  return settings.Bool(Setting::kProtectedMode) && settings.String(Setting::kRequirePass).empty() &&
         !client.local;
}

std::string MonitorLine(const server::ClientState& client, const protocol::Request& args);

namespace errors {

std::string HelloSyntax(std::string_view option) {
  return "ERR Syntax error in HELLO option '" + std::string(option) + "'";
}
std::string UnrecognizedOption(std::string_view option) {
  return "ERR Unrecognized option '" + std::string(option) + "'";
}
std::string LibField(bool name) {
  return std::string("ERR ") + (name ? "lib-name" : "lib-ver") +
         " cannot contain spaces, newlines or special characters.";
}
std::string UnknownClientType(std::string_view type) {
  return "ERR Unknown client type '" + std::string(type) + "'";
}
std::string NoSuchUser(std::string_view user) {
  return "ERR No such user '" + std::string(user) + "'";
}
std::string ConfigSetUnknown(std::string_view name) {
  return "ERR Unknown option or number of arguments for CONFIG SET - '" + std::string(name) + "'";
}
std::string ConfigSetFailed(std::string_view name, std::string_view why) {
  return "ERR CONFIG SET failed (possibly related to argument '" + std::string(name) + "') - " +
         std::string(why);
}

std::string WrongArity(std::string_view full_name) {
  return "ERR wrong number of arguments for '" + std::string(full_name) + "' command";
}

std::string UnknownCommand(const protocol::Request& request) {
  std::string args;
  for (size_t i = 1; i < request.size() && args.size() < 128; ++i) {
    std::string_view arg = CString(request[i]).substr(0, 128 - args.size());
    args += '\'';
    args += arg;
    args += "' ";
  }
  std::string_view name = CString(request[0]).substr(0, 128);
  return "ERR unknown command '" + std::string(name) + "', with args beginning with: " + args;
}

std::string UnknownSubcommand(std::string_view subcommand, std::string_view command) {
  return "ERR unknown subcommand '" + std::string(CString(subcommand).substr(0, 128)) + "'. Try " +
         AsciiUpper(command) + " HELP.";
}

}  // namespace errors

Registry::Registry(Engine& engine) : engine_(engine) {
  engine_.registry = this;
  RegisterConnectionCommands(*this);
  RegisterServerCommands(*this);
  RegisterSsmCommands(*this);
  RegisterPersistenceCommands(*this);
  RegisterVstoreCommands(*this);
  RegisterKvPrefixCommands(*this);
  RegisterPrefixIndexCommands(*this);
  RegisterKeyCommands(*this);
  RegisterStringCommands(*this);
  RegisterClusterCommands(*this);
  RegisterMigrateCommands(*this);
}

void Registry::Add(CommandSpec spec) {
  spec.name = AsciiLower(spec.name);
  spec.full_name = spec.name;
  spec.stats = std::make_shared<CommandStats>();
  for (CommandSpec& sub : spec.subcommands) {
    sub.name = AsciiLower(sub.name);
    sub.full_name = spec.name + "|" + sub.name;
    sub.group = spec.group;
    sub.stats = std::make_shared<CommandStats>();
  }
  std::string key = spec.name;
  table_.emplace(std::move(key), std::move(spec));
}

namespace {

char FoldAscii(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c | 0x20) : c; }

}  // namespace

size_t Registry::FoldedHash::operator()(std::string_view s) const {
  // FNV-1a over the folded bytes: names are short, and this runs once per request.
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(FoldAscii(c))) * 1099511628211ull;
  return static_cast<size_t>(h);
}

bool Registry::FoldedEqual::operator()(std::string_view a, std::string_view b) const {
  return EqualsIgnoreCase(a, b);
}

const CommandSpec* Registry::Find(std::string_view name) const {
  auto it = table_.find(name);
  return it == table_.end() ? nullptr : &it->second;
}

std::vector<const CommandSpec*> Registry::All() const {
  std::vector<const CommandSpec*> out;
  out.reserve(table_.size());
  for (const auto& [name, spec] : table_) out.push_back(&spec);
  std::sort(out.begin(), out.end(),
            [](const CommandSpec* a, const CommandSpec* b) { return a->name < b->name; });
  return out;
}

std::string Registry::OnConnect(const std::shared_ptr<server::ClientState>& client) {
  engine_.stats().total_connections += 1;
  client->id = engine_.NextClientId();
  client->last_interaction_ms = CoarseNowMs();
  client->authenticated = engine_.settings().String(Setting::kRequirePass).empty();
  if (engine_.ClientCount() >= static_cast<size_t>(engine_.settings().Int(Setting::kMaxClients))) {
    engine_.stats().rejected_connections += 1;
    return "ERR max number of clients reached";
  }
  if (ProtectedModeRefuses(engine_.settings(), *client)) {
    engine_.stats().rejected_connections += 1;
    return std::string(errors::kProtectedMode);
  }
  engine_.AddClient(client);
  return {};
}

void Registry::OnDisconnect(const std::shared_ptr<server::ClientState>& client) {
  engine_.RemoveClient(*client);
}

void Registry::Reject(const CommandSpec* spec, protocol::ReplyWriter& reply,
                      std::string_view message) {
  engine_.stats().rejected_calls.Add();
  if (spec != nullptr) spec->stats->rejected_calls.Add();
  reply.Error(message);
  engine_.stats().errors.Add(reply.last_error_code());
}

void Registry::Run(const CommandSpec& spec, Context& ctx) {
  engine_.stats().total_commands.Add();
  const uint64_t errors_before = ctx.reply.error_count();
  const auto start = std::chrono::steady_clock::now();
  {
    CommandClock::Scope command_clock(start);
    if (PrepareTypedKeys(ctx)) spec.handler(ctx);
  }
  const auto ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
  CommandStats& stats = *spec.stats;
  stats.calls.Add();
  stats.usec.Add(ns / 1000);
  if (engine_.settings().Bool(Setting::kLatencyTracking)) stats.latency.Record(ns);
  if (engine_.HasMonitors() && !(spec.flags & (kAdmin | kSkipMonitor))) {
    engine_.FeedMonitors(ctx.client, MonitorLine(ctx.client, ctx.args));
  }
  const uint64_t errors = ctx.reply.error_count() - errors_before;
  if (errors > 0) {
    stats.failed_calls.Add();
    for (uint64_t i = 0; i < errors; ++i) engine_.stats().errors.Add(ctx.reply.last_error_code());
  }
}

template <class AnswerFn>
void Registry::Answer(server::ClientState& client, protocol::ReplyWriter& reply,
                      const AnswerFn& answer) {
  if (!client.reply_off && !client.reply_skip) {
    answer(reply);
  } else {
    // CLIENT REPLY OFF/SKIP: the command runs against a scratch writer whose bytes are kept only
    // when the command itself turned replies back on (CLIENT REPLY ON).
    protocol::ReplyWriter scratch(reply.protocol());
    answer(scratch);
    if (!client.reply_off && !client.reply_skip) {
      for (auto piece : scratch.Buffers()) {
        reply.Raw({reinterpret_cast<const char*>(piece.data()), piece.size()});
      }
    }
  }
  // CLIENT REPLY SKIP covers the command after it; so does ASKING.
  client.reply_skip = client.reply_skip_next;
  client.reply_skip_next = false;
  client.asking = client.asking_next;
  client.asking_next = false;
}

void Registry::Dispatch(server::ClientState& client, protocol::Request& request,
                        protocol::ReplyWriter& reply) {
  Answer(client, reply, [&](protocol::ReplyWriter& w) { DispatchTo(client, request, w); });
}

std::string Registry::RefuseBeforeLargeArgument(const server::ClientState& client,
                                                const protocol::Request& partial) {
  if (engine_.cluster == nullptr || !client.authenticated || partial.empty()) return {};
  const CommandSpec* spec = Find(partial[0]);
  // A container's keys follow its subcommand; none of those takes a large argument.
  if (spec == nullptr || !spec->subcommands.empty()) return {};
  return ClusterRedirect(engine_, client, *spec, partial);
}

void Registry::Refuse(server::ClientState& client, const protocol::Request& partial,
                      protocol::ReplyWriter& reply, std::string_view refusal) {
  client.last_interaction_ms.store(CoarseNowMs(), std::memory_order_relaxed);
  const CommandSpec* spec = partial.empty() ? nullptr : Find(partial[0]);
  Answer(client, reply, [&](protocol::ReplyWriter& w) { Reject(spec, w, refusal); });
}

void Registry::DispatchTo(server::ClientState& client, protocol::Request& request,
                          protocol::ReplyWriter& reply) {
  client.last_interaction_ms.store(CoarseNowMs(), std::memory_order_relaxed);
  const CommandSpec* spec = Find(request[0]);
  if (spec == nullptr) return Reject(nullptr, reply, errors::UnknownCommand(request));
  if (!spec->subcommands.empty() && request.size() >= 2) {
    std::string sub = AsciiLower(request[1]);
    auto it = std::find_if(spec->subcommands.begin(), spec->subcommands.end(),
                           [&](const CommandSpec& s) { return s.name == sub; });
    if (it == spec->subcommands.end()) {
      return Reject(nullptr, reply, errors::UnknownSubcommand(request[1], spec->name));
    }
    spec = &*it;
  }
  client.last_command.store(spec->full_name.c_str(), std::memory_order_relaxed);
  if (!ArityOk(spec->arity, request.size())) {
    return Reject(spec, reply, errors::WrongArity(spec->full_name));
  }
  if (!client.authenticated && !(spec->flags & kNoAuth)) {
    return Reject(spec, reply, errors::kNoAuth);
  }
  // A write to a key of a slot being migrated away holds the key's lock stripes, as MIGRATE does
  // from reading the key to deleting it, and is routed again under them: the key may have left
  // meanwhile (then it is asked for on the target), and a write never lands between MIGRATE's
  // copy and its delete.
  std::optional<KeyLocks> migration_guard;
  if (engine_.cluster != nullptr) {
    bool migrating = false;
    std::string redirect = ClusterRedirect(engine_, client, *spec, request, &migrating);
    if (redirect.empty() && migrating && (spec->flags & kWrite)) {
      std::vector<std::string_view> keys;
      for (const KeyPosition& k : KeyPositions(*spec, request)) keys.push_back(request[k.index]);
      migration_guard.emplace(engine_, keys);
      redirect = ClusterRedirect(engine_, client, *spec, request);
    }
    if (!redirect.empty()) return Reject(spec, reply, redirect);
  }
  if ((spec->flags & kWrite) && engine_.durability() && !engine_.durability()->healthy()) {
    return Reject(spec, reply,
                  "MISCONF Errors writing to the AOF file: " + engine_.durability()->last_error());
  }
  if (spec->flags & kDenyOom) {
    if (!MakeRoom(engine_)) {
      return Reject(spec, reply, errors::kOom);
    }
  }
  Context ctx{client, request, reply, engine_, *spec};
  Run(*spec, ctx);
}

protocol::ParserLimits Registry::LimitsFor(const server::ClientState& client) const {
  protocol::ParserLimits limits;
  limits.max_bulk_length = engine_.settings().Int(Setting::kProtoMaxBulkLen);
  limits.max_request_bytes = engine_.settings().Int(Setting::kClientQueryBufferLimit);
  limits.authenticated = client.authenticated;
  return limits;
}

bool Registry::WhenDurable(uint64_t lsn, std::function<void()> resume) {
  if (!engine_.durability()) return true;
  return engine_.durability()->WhenDurable(lsn, std::move(resume));
}

bool Registry::DurableNow(uint64_t lsn) {
  return engine_.durability() == nullptr || engine_.durability()->DurableNow(lsn);
}

int64_t Registry::IdleTimeoutSeconds() const { return engine_.settings().Int(Setting::kTimeout); }

uint64_t Registry::OutputBufferLimit() const {
  return static_cast<uint64_t>(engine_.settings().Int(Setting::kClientOutputBufferLimit));
}

}  // namespace prefixd::commands
