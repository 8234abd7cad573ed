// Connection commands: PING, ECHO, HELLO, AUTH, QUIT, RESET, SELECT and CLIENT.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <limits>
#include <optional>
#include <string>

#include "commands/arg_reader.h"
#include "commands/families.h"
#include "common/ascii.h"
#include "common/clock.h"
#include "common/numbers.h"
#include "engine/engine.h"
#include "engine/errors.h"

namespace prefixd::commands {
namespace {

// Compares without an early exit, so the time taken does not reveal how much of a guess matched.
bool SecretEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// Only the "default" user exists; with no requirepass it accepts any password, as Redis's
// nopass default user does.
bool CheckCredentials(Engine& engine, std::string_view user, std::string_view password) {
  if (user != "default") return false;
  std::string required = engine.settings().String(Setting::kRequirePass);
  return required.empty() || SecretEquals(password, required);
}

bool ValidClientName(std::string_view name) {
  return std::all_of(name.begin(), name.end(), [](char c) { return c >= '!' && c <= '~'; });
}

void Ping(Context& ctx) {
  if (ctx.args.size() > 2) return ctx.reply.Error(errors::WrongArity("ping"));
  if (ctx.args.size() == 2) return ctx.reply.Bulk(ctx.args[1]);
  ctx.reply.Simple("PONG");
}

void Echo(Context& ctx) { ctx.reply.Bulk(ctx.args[1]); }

void Hello(Context& ctx) {
  int64_t version = 0;
  ArgReader in(ctx, 1);
  if (in.more()) {
    auto v = in.Integer(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                        errors::kProtocolVersionNotInteger);
    if (!v) return;
    if (*v < 2 || *v > 3) return ctx.reply.Error(errors::kNoProto);
    version = *v;
  }
  std::string_view user, password, name;
  bool has_auth = false, has_name = false;
  while (in.more()) {
    if (in.remaining() >= 3 && in.Keyword("AUTH")) {
      user = in.Next(), password = in.Next(), has_auth = true;
    } else if (in.remaining() >= 2 && in.Keyword("SETNAME")) {
      name = in.Next(), has_name = true;
    } else {
      return ctx.reply.Error(errors::HelloSyntax(in.Peek()));
    }
  }
  if (has_auth) {
    if (!CheckCredentials(ctx.engine, user, password)) return ctx.reply.Error(errors::kWrongPass);
    ctx.client.authenticated = true;
  }
  if (!ctx.client.authenticated) {
    return ctx.reply.Error(errors::kHelloNoAuth);
  }
  if (has_name) {
    if (!ValidClientName(name)) {
      return ctx.reply.Error(errors::kClientName);
    }
    std::lock_guard lock(ctx.client.names_mu);
    ctx.client.name = name;
  }
  if (version != 0) {
    ctx.client.resp = static_cast<int>(version);
    ctx.reply.set_protocol(static_cast<int>(version));
  }
  auto& r = ctx.reply;
  r.MapLen(7);
  r.Bulk("server"), r.Bulk("redis");
  r.Bulk("version"), r.Bulk(kRedisCompatVersion);
  r.Bulk("proto"), r.Integer(ctx.client.resp);
  r.Bulk("id"), r.Integer(static_cast<int64_t>(ctx.client.id));
  r.Bulk("mode"), r.Bulk("standalone");
  r.Bulk("role"), r.Bulk("master");
  r.Bulk("modules"), r.ArrayLen(0);
}

void Auth(Context& ctx) {
  const auto& args = ctx.args;
  if (args.size() > 3) return ctx.reply.Error(errors::kSyntax);
  std::string_view user = "default", password;
  if (args.size() == 2) {
    if (ctx.engine.settings().String(Setting::kRequirePass).empty()) {
      return ctx.reply.Error(errors::kAuthWithoutPassword);
    }
    password = args[1];
  } else {
    user = args[1], password = args[2];
  }
  if (!CheckCredentials(ctx.engine, user, password)) return ctx.reply.Error(errors::kWrongPass);
  ctx.client.authenticated = true;
  ctx.reply.Simple("OK");
}

void Quit(Context& ctx) {
  ctx.client.close_after_reply = true;
  ctx.reply.Simple("OK");
}

void Reset(Context& ctx) {
  EndTransaction(ctx.engine, ctx.client);
  ctx.client.resp = 2;
  ctx.reply.set_protocol(2);
  {
    std::lock_guard lock(ctx.client.names_mu);
    ctx.client.name.clear();
  }
  ctx.client.authenticated = ctx.engine.settings().String(Setting::kRequirePass).empty();
  ctx.client.db = 0;
  ctx.reply.Simple("RESET");
}

void Select(Context& ctx) {
  auto db = ArgReader(ctx, 1).Integer();
  if (!db) return;
  if (*db < INT32_MIN || *db > INT32_MAX) return ctx.reply.Error(errors::kDbIndexNotInt32);
  if (ctx.engine.cluster != nullptr && *db != 0) return ctx.reply.Error(errors::kSelectInCluster);
  if (*db < 0 || static_cast<uint64_t>(*db) >= ctx.engine.databases().count()) {
    return ctx.reply.Error(errors::kDbIndexOutOfRange);
  }
  ctx.client.db = static_cast<int>(*db);
  ctx.reply.Simple("OK");
}

// One line of CLIENT LIST / CLIENT INFO, in Redis's field order.
std::string DescribeClient(const server::ClientState& c) {
  int64_t now = CoarseNowMs();
  auto age =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - c.created)
          .count();
  std::string name, lib_name, lib_version;
  {
    std::lock_guard lock(c.names_mu);
    name = c.name, lib_name = c.lib_name, lib_version = c.lib_version;
  }
  std::string out;
  out += "id=" + std::to_string(c.id);
  out += " addr=" + c.addr;
  out += " laddr=" + c.laddr;
  out += " fd=" + std::to_string(c.fd);
  out += " name=" + name;
  out += " age=" + std::to_string(age);
  out += " idle=" + std::to_string((now - c.last_interaction_ms.load()) / 1000);
  const int multi = c.multi_count.load(std::memory_order_relaxed);
  const char* flags = c.replica.load(std::memory_order_relaxed) ? "S" : multi >= 0 ? "x" : "N";
  out += std::string(" flags=") + flags + " db=" + std::to_string(c.db.load()) +
         " sub=0 psub=0 ssub=0 multi=" + std::to_string(multi);
  // Memory as Redis words it: qbuf is the request bytes received and not yet run, qbuf-free the
  // room of the read buffer, argv-mem the request's arguments, omem the replies queued (copied
  // or pinned), tot-mem all of it plus the connection itself.
  out += " qbuf=" + std::to_string(c.query_buffer_bytes.load());
  out += " qbuf-free=" + std::to_string(c.query_buffer_free.load());
  out += " argv-mem=" + std::to_string(c.argv_bytes.load());
  out += " multi-mem=" + std::to_string(c.multi_bytes.load(std::memory_order_relaxed)) +
         " rbs=0 rbp=0 obl=0 oll=0";
  out += " omem=" + std::to_string(c.output_bytes.load());
  out += " tot-mem=" + std::to_string(c.total_bytes.load());
  out += " events=r cmd=" + std::string(c.last_command.load());
  out += " user=default redir=-1 resp=" + std::to_string(c.resp.load());
  // Redis 7.0.15's list ends at resp=; a client that sent CLIENT SETINFO (a 7.2 feature) also
  // sees the fields 7.2 adds.
  if (!lib_name.empty() || !lib_version.empty()) {
    out += " lib-name=" + lib_name + " lib-ver=" + lib_version;
  }
  out += "\n";
  return out;
}

void ClientId(Context& ctx) { ctx.reply.Integer(static_cast<int64_t>(ctx.client.id)); }

void ClientSetName(Context& ctx) {
  std::string_view name = ctx.args[2];
  if (!ValidClientName(name)) {
    return ctx.reply.Error(errors::kClientName);
  }
  std::lock_guard lock(ctx.client.names_mu);
  ctx.client.name = name;
  ctx.reply.Simple("OK");
}

void ClientGetName(Context& ctx) {
  std::string name;
  {
    std::lock_guard lock(ctx.client.names_mu);
    name = ctx.client.name;
  }
  if (name.empty()) return ctx.reply.Null();
  ctx.reply.Bulk(name);
}

void ClientSetInfo(Context& ctx) {
  ArgReader r(ctx, 2);
  const auto attribute = r.OneOf({"LIB-VER", "LIB-NAME"});
  if (!attribute) return ctx.reply.Error(errors::UnrecognizedOption(r.Peek()));
  const bool is_name = *attribute == 1;
  const std::string_view value = r.Next();
  if (!ValidClientName(value)) {
    return ctx.reply.Error(errors::LibField(is_name));
  }
  std::lock_guard lock(ctx.client.names_mu);
  (is_name ? ctx.client.lib_name : ctx.client.lib_version) = value;
  ctx.reply.Simple("OK");
}

// CLIENT LIST/KILL TYPE: Redis's client type names; nullopt for another name. prefixd's clients
// are normal ones and replicas (never a master link or a pubsub client).
enum class ClientType { kNormal, kReplica, kNever };
std::optional<ClientType> ParseClientType(std::string_view type) {
  if (EqualsIgnoreCase(type, "normal")) return ClientType::kNormal;
  if (EqualsIgnoreCase(type, "slave") || EqualsIgnoreCase(type, "replica")) {
    return ClientType::kReplica;
  }
  if (EqualsIgnoreCase(type, "master") || EqualsIgnoreCase(type, "pubsub")) {
    return ClientType::kNever;
  }
  return std::nullopt;
}
bool OfType(const server::ClientState& c, std::optional<ClientType> type) {
  if (!type) return true;
  return *type != ClientType::kNever &&
         c.replica.load(std::memory_order_relaxed) == (*type == ClientType::kReplica);
}

void ClientList(Context& ctx) {
  std::vector<uint64_t> ids;
  std::optional<ClientType> wanted;
  ArgReader r(ctx, 2);
  while (r.more()) {
    if (r.remaining() >= 2 && r.Keyword("TYPE")) {
      std::string_view type = r.Next();
      wanted = ParseClientType(type);
      if (!wanted) return ctx.reply.Error(errors::UnknownClientType(type));
    } else if (r.remaining() >= 2 && r.Keyword("ID")) {
      while (r.more()) {
        auto id = r.Integer(1, std::numeric_limits<int64_t>::max(), errors::kInvalidClientId);
        if (!id) return;
        ids.push_back(static_cast<uint64_t>(*id));
      }
    } else {
      return ctx.reply.Error(errors::kSyntax);
    }
  }
  std::string out;
  for (const auto& c : ctx.engine.Clients()) {
    if (!ids.empty() && std::find(ids.begin(), ids.end(), c->id) == ids.end()) continue;
    if (!OfType(*c, wanted)) continue;
    out += DescribeClient(*c);
  }
  ctx.reply.Verbatim(out);
}

void ClientInfo(Context& ctx) { ctx.reply.Verbatim(DescribeClient(ctx.client)); }

void ClientKill(Context& ctx) {
  const auto& args = ctx.args;
  // Old form: CLIENT KILL ip:port, answered +OK or an error.
  if (args.size() == 3) {
    for (const auto& c : ctx.engine.Clients()) {
      if (c->addr == args[2]) {
        if (c.get() == &ctx.client) {
          ctx.client.close_after_reply = true;
        } else {
          c->Kill();
        }
        return ctx.reply.Simple("OK");
      }
    }
    return ctx.reply.Error(errors::kNoSuchClient);
  }
  if ((args.size() - 2) % 2 != 0) return ctx.reply.Error(errors::kSyntax);
  int64_t id = 0;
  std::string_view addr, laddr;
  bool skip_me = true;
  int64_t max_age = 0;
  std::optional<ClientType> kind;  // TYPE: the kind of client to kill
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  ArgReader r(ctx, 2);
  while (r.more()) {
    auto filter = r.OneOf({"ID", "ADDR", "LADDR", "SKIPME", "MAXAGE", "TYPE", "USER"});
    if (!filter) return ctx.reply.Error(errors::kSyntax);
    switch (*filter) {
      case 0: {
        auto v = r.Integer(1, kMax, errors::kClientIdNotPositive);
        if (!v) return;
        id = *v;
        break;
      }
      case 1:
        addr = r.Next();
        break;
      case 2:
        laddr = r.Next();
        break;
      case 3: {
        auto yes_no = r.OneOf({"yes", "no"});
        if (!yes_no) return ctx.reply.Error(errors::kSyntax);
        skip_me = *yes_no == 0;
        break;
      }
      case 4: {
        auto v = r.Integer(0, kMax);
        if (!v) return;
        max_age = *v;
        break;
      }
      case 5: {
        std::string_view type = r.Next();
        kind = ParseClientType(type);
        if (!kind) return ctx.reply.Error(errors::UnknownClientType(type));
        break;
      }
      default: {
        std::string_view user = r.Next();
        if (user != "default") return ctx.reply.Error(errors::NoSuchUser(user));
      }
    }
  }
  int64_t killed = 0;
  auto now = std::chrono::steady_clock::now();
  for (const auto& c : ctx.engine.Clients()) {
    if (id != 0 && c->id != static_cast<uint64_t>(id)) continue;
    if (!addr.empty() && c->addr != addr) continue;
    if (!laddr.empty() && c->laddr != laddr) continue;
    if (!OfType(*c, kind)) continue;
    if (max_age > 0 &&
        std::chrono::duration_cast<std::chrono::seconds>(now - c->created).count() < max_age) {
      continue;
    }
    bool is_me = c.get() == &ctx.client;
    if (is_me && skip_me) continue;
    if (is_me) {
      ctx.client.close_after_reply = true;
    } else {
      c->Kill();
    }
    ++killed;
  }
  ctx.reply.Integer(killed);
}

void ClientReply(Context& ctx) {
  ArgReader r(ctx, 2);
  switch (r.OneOf({"ON", "OFF", "SKIP"}).value_or(3)) {
    case 0:
      ctx.session.reply_off = ctx.session.reply_skip = ctx.session.reply_skip_next = false;
      return ctx.reply.Simple("OK");
    case 1:
      ctx.session.reply_off = true;
      return;
    case 2:
      ctx.session.reply_skip_next = !ctx.session.reply_off;
      return;
    default:
      ctx.reply.Error(errors::kSyntax);
  }
}

}  // namespace

void RegisterConnectionCommands(Registry& r) {
  auto cmd = [](std::string name, int arity, uint32_t flags, std::string syntax,
                std::string summary, Handler h) {
    return MakeSpec("connection", 0, std::move(name), arity, flags, std::move(syntax),
                    std::move(summary), h, "O(1)");
  };
  constexpr uint32_t kConn = kAclConnection;
  constexpr uint32_t kHandshake = kNoScript | kLoading | kStale | kFast | kNoAuth | kAllowBusy;
  constexpr uint32_t kClientFlags = kNoScript | kLoading | kStale;
  const Arg message = StrArg("message", kArgOptional);
  r.Add(AsRedis(cmd("ping", -1, kFast, "[message]", "Returns PONG, or the message given.", Ping),
                "1.0.0", kConn, {"request_policy:all_shards", "response_policy:all_succeeded"},
                {message}));
  r.Add(AsRedis(
      cmd("echo", 2, kLoading | kStale | kFast, "<message>", "Returns the message given.", Echo),
      "1.0.0", kConn, {}, {StrArg("message")}));
  r.Add(AsRedis(
      cmd("hello", -1, kHandshake, "[protover [AUTH <username> <password>] [SETNAME <clientname>]]",
          "Handshakes: selects RESP2 or RESP3, optionally authenticates and names the "
          "client.",
          Hello),
      "6.0.0", kConn));
  r.Add(AsRedis(
      cmd("auth", -2, kHandshake, "[username] <password>", "Authenticates the connection.", Auth),
      "1.0.0", kConn));
  r.Add(AsRedis(cmd("quit", -1, kHandshake, "", "Replies OK and closes the connection.", Quit),
                "1.0.0", kConn));
  r.Add(AsRedis(cmd("reset", 1, kHandshake, "",
                    "Resets the connection: RESP2, no name, authentication required again if a "
                    "password is set.",
                    Reset),
                "6.2.0", kConn));
  r.Add(AsRedis(cmd("select", 2, kLoading | kStale | kFast, "<index>",
                    "Selects the database (0 to databases-1) this connection works in.", Select),
                "1.0.0", kConn, {}, {IntArg("index")}));

  CommandSpec client = AsRedis(cmd("client", -2, 0, "<subcommand> [arguments]",
                                   "Inspects and manages client connections.", nullptr),
                               "2.4.0");
  client.subcommands = {
      AsRedis(cmd("id", 2, kClientFlags, "", "Returns this connection's id.", ClientId), "5.0.0",
              kConn),
      AsRedis(cmd("setname", 3, kClientFlags, "<name>", "Names this connection.", ClientSetName),
              "2.6.9", kConn, {}, {StrArg("connection-name")}),
      AsRedis(cmd("getname", 2, kClientFlags, "", "Returns this connection's name, or nil.",
                  ClientGetName),
              "2.6.9", kConn),
      AsRedis(cmd("setinfo", 4, kClientFlags, "<LIB-NAME|LIB-VER> <value>",
                  "Records the client library's name or version.", ClientSetInfo),
              "7.2.0", kConn),
      AsRedis(cmd("list", -2, kAdmin | kClientFlags, "[TYPE normal] [ID <id> ...]",
                  "Lists connected clients.", ClientList),
              "2.4.0", kConn, {"nondeterministic_output"}),
      AsRedis(cmd("info", 2, kClientFlags, "", "Describes this connection.", ClientInfo), "6.2.0",
              kConn, {"nondeterministic_output"}),
      AsRedis(cmd("kill", -3, kAdmin | kClientFlags,
                  "<ip:port> | [ID <id>] [ADDR <ip:port>] [LADDR <ip:port>] [SKIPME yes|no] "
                  "[MAXAGE <seconds>]",
                  "Closes the matching connections.", ClientKill),
              "2.4.0", kConn),
      AsRedis(cmd("reply", 3, kClientFlags, "ON|OFF|SKIP",
                  "Turns this connection's replies on or off, or skips the next command's.",
                  ClientReply),
              "3.2.0", kConn),
      AsRedis(cmd("help", 2, kLoading | kStale, "", "Lists the CLIENT subcommands.",
                  [](Context& ctx) { HelpReply(ctx, *ctx.engine.registry->Find("client")); }),
              "5.0.0", kConn),
  };
  for (auto& sub : client.subcommands) sub.complexity = "O(N) in the number of clients";
  r.Add(std::move(client));
}

}  // namespace prefixd::commands
