// CommandSpec and Context: a command's metadata (name, arity, flags, key positions, docs) and the
// handler call. The table of specs is the single source for dispatch, COMMAND and the docs.
// Specs are immutable after start-up; handlers run on the io thread of the calling connection.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/reply_writer.h"
#include "protocol/request.h"
#include "server/client_state.h"

namespace prefixd::commands {

class Engine;
struct CommandSpec;

struct Context {
  server::ClientState& client;
  const protocol::Request& args;
  protocol::ReplyWriter& reply;
  Engine& engine;
  const CommandSpec& spec;
};

using Handler = void (*)(Context&);

enum CommandFlag : uint32_t {
  kWrite = 1u << 0,
  kReadonly = 1u << 1,
  kFast = 1u << 2,
  kNoAuth = 1u << 3,
  kAdmin = 1u << 4,
  kDenyOom = 1u << 5,
  kLoading = 1u << 6,
  kStale = 1u << 7,
  kNoScript = 1u << 8,
  kAllowBusy = 1u << 9,
};

// The names COMMAND INFO reports for each flag, in bit order.
std::vector<std::string_view> FlagNames(uint32_t flags);

struct CommandSpec {
  std::string name;  // lower case; for a subcommand, the subcommand alone ("get")
  int arity = 0;     // Redis convention: N exact, -N at least N (the name counts)
  uint32_t flags = 0;
  int first_key = 0, last_key = 0, key_step = 0;
  std::string group;    // "connection", "server", "ssm"
  std::string since;    // prefixd version that added it
  std::string syntax;   // argument synopsis for docs, e.g. "<sid> <layer> <blob>"
  std::string summary;  // one sentence
  std::string complexity;
  Handler handler = nullptr;
  std::vector<CommandSpec> subcommands;

  // "config|get" for subcommands; set when the table is built.
  std::string full_name;
};

// A table entry with the fields every family fills the same way. `keys`: how many leading
// arguments after the name are keys (0: none), as COMMAND reports them.
inline CommandSpec MakeSpec(std::string group, int keys, std::string name, int arity,
                            uint32_t flags, std::string syntax, std::string summary,
                            Handler handler, std::string complexity) {
  CommandSpec s;
  s.name = std::move(name), s.arity = arity, s.flags = flags, s.group = std::move(group);
  if (keys != 0) s.first_key = 1, s.last_key = keys, s.key_step = 1;
  s.since = "0.1.0", s.syntax = std::move(syntax), s.summary = std::move(summary);
  s.handler = handler, s.complexity = std::move(complexity);
  return s;
}

}  // namespace prefixd::commands
