// Connection commands: PING, ECHO, HELLO, AUTH, QUIT, RESET, SELECT and CLIENT.
#include <algorithm>
#include <cctype>
#include <string>

#include "commands/engine.h"
#include "commands/errors.h"
#include "commands/registry.h"
#include "common/ascii.h"
#include "common/clock.h"
#include "common/numbers.h"

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
  const auto& args = ctx.args;
  int64_t version = 0;
  if (args.size() >= 2) {
    auto v = ParseInt64(args[1]);
    if (!v) return ctx.reply.Error("ERR Protocol version is not an integer or out of range");
    if (*v < 2 || *v > 3) return ctx.reply.Error("NOPROTO unsupported protocol version");
    version = *v;
  }
  std::string_view user, password, name;
  bool has_auth = false, has_name = false;
  for (size_t j = 2; j < args.size(); ++j) {
    size_t more = args.size() - 1 - j;
    if (EqualsIgnoreCase(args[j], "AUTH") && more >= 2) {
      user = args[j + 1], password = args[j + 2], has_auth = true;
      j += 2;
    } else if (EqualsIgnoreCase(args[j], "SETNAME") && more >= 1) {
      name = args[j + 1], has_name = true;
      j += 1;
    } else {
      return ctx.reply.Error("ERR Syntax error in HELLO option '" + std::string(args[j]) + "'");
    }
  }
  if (has_auth) {
    if (!CheckCredentials(ctx.engine, user, password)) return ctx.reply.Error(errors::kWrongPass);
    ctx.client.authenticated = true;
  }
  if (!ctx.client.authenticated) {
    return ctx.reply.Error(
        "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO "
        "AUTH <user> <pass> option can be used to authenticate the client and select the RESP "
        "protocol version at the same time");
  }
  if (has_name) {
    if (!ValidClientName(name)) {
      return ctx.reply.Error(
          "ERR Client names cannot contain spaces, newlines or special characters.");
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
      return ctx.reply.Error(
          "ERR AUTH <password> called without any password configured for the default user. Are "
          "you sure your configuration is correct?");
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
  auto db = ParseInt64(ctx.args[1]);
  if (!db) return ctx.reply.Error(errors::kNotInteger);
  if (*db < INT32_MIN || *db > INT32_MAX) {
    return ctx.reply.Error(
        "ERR value is out of range, value must between -2147483648 and 2147483647");
  }
  if (*db < 0 || static_cast<uint64_t>(*db) >= ctx.engine.databases().count()) {
    return ctx.reply.Error("ERR DB index is out of range");
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
  out += " flags=N db=" + std::to_string(c.db.load()) + " sub=0 psub=0 ssub=0 multi=-1";
  // Memory as Redis words it: qbuf is the request bytes received and not yet run, qbuf-free the
  // room of the read buffer, argv-mem the request's arguments, omem the replies queued (copied
  // or pinned), tot-mem all of it plus the connection itself.
  out += " qbuf=" + std::to_string(c.query_buffer_bytes.load());
  out += " qbuf-free=" + std::to_string(c.query_buffer_free.load());
  out += " argv-mem=" + std::to_string(c.argv_bytes.load());
  out += " multi-mem=0 rbs=0 rbp=0 obl=0 oll=0";
  out += " omem=" + std::to_string(c.output_bytes.load());
  out += " tot-mem=" + std::to_string(c.total_bytes.load());
  out += " events=r cmd=" + std::string(c.last_command.load());
  out += " user=default redir=-1 resp=" + std::to_string(c.resp.load());
  out += " lib-name=" + lib_name + " lib-ver=" + lib_version;
  out += "\n";
  return out;
}

void ClientId(Context& ctx) { ctx.reply.Integer(static_cast<int64_t>(ctx.client.id)); }

void ClientSetName(Context& ctx) {
  std::string_view name = ctx.args[2];
  if (!ValidClientName(name)) {
    return ctx.reply.Error(
        "ERR Client names cannot contain spaces, newlines or special characters.");
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
  std::string_view attribute = ctx.args[2], value = ctx.args[3];
  bool is_name = EqualsIgnoreCase(attribute, "LIB-NAME");
  if (!is_name && !EqualsIgnoreCase(attribute, "LIB-VER")) {
    return ctx.reply.Error("ERR Unrecognized option '" + std::string(attribute) + "'");
  }
  if (!ValidClientName(value)) {
    return ctx.reply.Error("ERR " + std::string(is_name ? "lib-name" : "lib-ver") +
                           " cannot contain spaces, newlines or special characters.");
  }
  std::lock_guard lock(ctx.client.names_mu);
  (is_name ? ctx.client.lib_name : ctx.client.lib_version) = value;
  ctx.reply.Simple("OK");
}

void ClientList(Context& ctx) {
  const auto& args = ctx.args;
  std::vector<uint64_t> ids;
  for (size_t i = 2; i < args.size(); ++i) {
    if (EqualsIgnoreCase(args[i], "TYPE") && i + 1 < args.size()) {
      std::string_view type = args[++i];
      if (!EqualsIgnoreCase(type, "normal") && !EqualsIgnoreCase(type, "master") &&
          !EqualsIgnoreCase(type, "replica") && !EqualsIgnoreCase(type, "pubsub")) {
        return ctx.reply.Error("ERR Unknown client type '" + std::string(type) + "'");
      }
      if (!EqualsIgnoreCase(type, "normal")) return ctx.reply.Verbatim("");
    } else if (EqualsIgnoreCase(args[i], "ID") && i + 1 < args.size()) {
      for (++i; i < args.size(); ++i) {
        auto id = ParseInt64(args[i]);
        if (!id || *id <= 0) return ctx.reply.Error("ERR Invalid client ID");
        ids.push_back(static_cast<uint64_t>(*id));
      }
    } else {
      return ctx.reply.Error(errors::kSyntax);
    }
  }
  std::string out;
  for (const auto& c : ctx.engine.Clients()) {
    if (!ids.empty() && std::find(ids.begin(), ids.end(), c->id) == ids.end()) continue;
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
    return ctx.reply.Error("ERR No such client");
  }
  if ((args.size() - 2) % 2 != 0) return ctx.reply.Error(errors::kSyntax);
  int64_t id = 0;
  std::string_view addr, laddr;
  bool skip_me = true;
  int64_t max_age = 0;
  for (size_t i = 2; i < args.size(); i += 2) {
    std::string_view key = args[i], value = args[i + 1];
    if (EqualsIgnoreCase(key, "ID")) {
      auto v = ParseInt64(value);
      if (!v || *v <= 0) return ctx.reply.Error("ERR client-id should be greater than 0");
      id = *v;
    } else if (EqualsIgnoreCase(key, "ADDR")) {
      addr = value;
    } else if (EqualsIgnoreCase(key, "LADDR")) {
      laddr = value;
    } else if (EqualsIgnoreCase(key, "SKIPME")) {
      if (EqualsIgnoreCase(value, "yes")) {
        skip_me = true;
      } else if (EqualsIgnoreCase(value, "no")) {
        skip_me = false;
      } else {
        return ctx.reply.Error(errors::kSyntax);
      }
    } else if (EqualsIgnoreCase(key, "MAXAGE")) {
      auto v = ParseInt64(value);
      if (!v || *v < 0) return ctx.reply.Error(errors::kNotInteger);
      max_age = *v;
    } else if (EqualsIgnoreCase(key, "TYPE")) {
      if (!EqualsIgnoreCase(value, "normal")) return ctx.reply.Integer(0);
    } else if (EqualsIgnoreCase(key, "USER")) {
      if (value != "default")
        return ctx.reply.Error("ERR No such user '" + std::string(value) + "'");
    } else {
      return ctx.reply.Error(errors::kSyntax);
    }
  }
  int64_t killed = 0;
  auto now = std::chrono::steady_clock::now();
  for (const auto& c : ctx.engine.Clients()) {
    if (id != 0 && c->id != static_cast<uint64_t>(id)) continue;
    if (!addr.empty() && c->addr != addr) continue;
    if (!laddr.empty() && c->laddr != laddr) continue;
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

}  // namespace

void HelpReply(Context& ctx, const CommandSpec& container);

void RegisterConnectionCommands(Registry& r) {
  auto cmd = [](std::string name, int arity, uint32_t flags, std::string syntax,
                std::string summary, Handler h) {
    return MakeSpec("connection", 0, std::move(name), arity, flags, std::move(syntax),
                    std::move(summary), h, "O(1)");
  };
  r.Add(cmd("ping", -1, kFast, "[message]", "Returns PONG, or the message given.", Ping));
  r.Add(cmd("echo", 2, kFast, "<message>", "Returns the message given.", Echo));
  r.Add(cmd("hello", -1, kFast | kNoAuth,
            "[protover [AUTH <username> <password>] [SETNAME <clientname>]]",
            "Handshakes: selects RESP2 or RESP3, optionally authenticates and names the client.",
            Hello));
  r.Add(cmd("auth", -2, kFast | kNoAuth, "[username] <password>", "Authenticates the connection.",
            Auth));
  r.Add(cmd("quit", -1, kFast | kNoAuth, "", "Replies OK and closes the connection.", Quit));
  r.Add(cmd("reset", 1, kFast | kNoAuth, "",
            "Resets the connection: RESP2, no name, authentication required again if a "
            "password is set.",
            Reset));
  r.Add(cmd("select", 2, kFast, "<index>",
            "Selects the database (0 to databases-1) this connection works in.", Select));

  CommandSpec client = cmd("client", -2, 0, "<subcommand> [arguments]",
                           "Inspects and manages client connections.", nullptr);
  client.subcommands = {
      cmd("id", 2, kFast, "", "Returns this connection's id.", ClientId),
      cmd("setname", 3, kFast, "<name>", "Names this connection.", ClientSetName),
      cmd("getname", 2, kFast, "", "Returns this connection's name, or nil.", ClientGetName),
      cmd("setinfo", 4, kFast, "<LIB-NAME|LIB-VER> <value>",
          "Records the client library's name or version.", ClientSetInfo),
      cmd("list", -2, kAdmin, "[TYPE normal] [ID <id> ...]", "Lists connected clients.",
          ClientList),
      cmd("info", 2, 0, "", "Describes this connection.", ClientInfo),
      cmd("kill", -3, kAdmin,
          "<ip:port> | [ID <id>] [ADDR <ip:port>] [LADDR <ip:port>] [SKIPME yes|no] "
          "[MAXAGE <seconds>]",
          "Closes the matching connections.", ClientKill),
      cmd("help", 2, 0, "", "Lists the CLIENT subcommands.",
          [](Context& ctx) { HelpReply(ctx, *ctx.engine.registry->Find("client")); }),
  };
  for (auto& sub : client.subcommands) sub.complexity = "O(N) in the number of clients";
  r.Add(std::move(client));
}

}  // namespace prefixd::commands
