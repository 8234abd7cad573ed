// CommandSpec and Context: a command's metadata (name, arity, flags, key specs, arguments, ACL
// categories, tips, docs) and the handler call, shaped as Redis's command JSON. The table of specs
// is the single source for dispatch, COMMAND INFO/DOCS/GETKEYS/LIST and docs/commands.md.
// Specs are immutable after start-up; handlers run on the io thread of the calling connection.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/session.h"
#include "protocol/command_encoding.h"
#include "protocol/reply_writer.h"
#include "protocol/request.h"
#include "server_api/client_state.h"
#include "store/key_entry.h"

namespace prefixd::commands {

class Engine;
struct CommandSpec;
struct CommandStats;

// What a write command sends to replicas (engine/replication.h). By default the command as
// received, once it changed something (Redis's server.dirty moved); a handler whose effect
// Redis propagates in another form (SET EX -> SET PXAT, GETDEL -> DEL, SPOP -> SREM, ...) names
// that form with Send, or sends nothing with Nothing. While no replica is attached `wanted()` is
// false and Send costs one branch.
class Propagation {
 public:
  bool wanted() const { return wanted_; }
  // The first call replaces the command as received; later calls add commands after it. Each is
  // encoded at once, so its words (a value among them) are copied once, and only when wanted.
  void Send(std::span<const std::string_view> argv) {
    replaced_ = true;
    if (wanted_) commands_.push_back(protocol::EncodeCommand(argv));
  }
  void Send(std::initializer_list<std::string_view> argv) {
    Send(std::span<const std::string_view>(argv.begin(), argv.size()));
  }
  void Nothing() { replaced_ = true, commands_.clear(); }
  bool replaced() const { return replaced_; }
  // The replacement commands, encoded, handed over once the command has run.
  std::vector<std::string> TakeCommands() { return std::move(commands_); }
  void set_wanted(bool wanted) { wanted_ = wanted; }

 private:
  bool wanted_ = false;
  bool replaced_ = false;
  std::vector<std::string> commands_;
};

struct Context {
  server::ClientState& client;
  const protocol::Request& args;
  protocol::ReplyWriter& reply;
  Engine& engine;
  const CommandSpec& spec;
  Propagation propagate{};
  // The connection's command-level state (MULTI, CLIENT REPLY, ASKING).
  Session& session = SessionOf(client);
  // For a command that takes the descriptor passed with its request (CommandSpec::descriptors):
  // the one the registry claimed for it, closed once the command returns; -1 when none came.
  int passed_fd = -1;
  // SHM.CALL (Descriptors::kCarries): where the handler leaves the command it carries, which the
  // registry then dispatches as if it had been received; left empty on a refusal.
  protocol::Request* carried = nullptr;
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
  kPubsub = 1u << 10,
  kBlocking = 1u << 11,
  kSkipMonitor = 1u << 12,
  kSkipSlowlog = 1u << 13,
  kNoMandatoryKeys = 1u << 14,
  kNoAsyncLoading = 1u << 15,
  kNoMulti = 1u << 16,
  kMovableKeys = 1u << 17,
  // Redis keeps these out of COMMAND INFO; they change no reply here either.
  kSentinel = 1u << 18,
  // Served as if ASKING was sent first (RESTORE-ASKING: a key of an importing slot).
  kAsking = 1u << 19,
  // Runs holding the whole exec gate, as EXEC's queue does (SYNC: its snapshot and the start of
  // its stream are one point between commands). Not reported by COMMAND INFO.
  kWholeGate = 1u << 20,
};

// The names COMMAND INFO reports for the flags, in Redis's order.
std::vector<std::string_view> FlagNames(uint32_t flags);

// ACL categories, in the order Redis lists them. A spec names its explicit ones; the implicit ones
// (@write, @read, @admin, @dangerous, @fast/@slow, ...) follow from its flags as in Redis.
enum AclCategory : uint32_t {
  kAclKeyspace = 1u << 0,
  kAclRead = 1u << 1,
  kAclWrite = 1u << 2,
  kAclSet = 1u << 3,
  kAclSortedSet = 1u << 4,
  kAclList = 1u << 5,
  kAclHash = 1u << 6,
  kAclString = 1u << 7,
  kAclBitmap = 1u << 8,
  kAclHyperLogLog = 1u << 9,
  kAclGeo = 1u << 10,
  kAclStream = 1u << 11,
  kAclPubsub = 1u << 12,
  kAclAdmin = 1u << 13,
  kAclFast = 1u << 14,
  kAclSlow = 1u << 15,
  kAclBlocking = 1u << 16,
  kAclDangerous = 1u << 17,
  kAclConnection = 1u << 18,
  kAclTransaction = 1u << 19,
  kAclScripting = 1u << 20,
};

// Every category name without its '@', in Redis's order; index i is bit i.
const std::vector<std::string_view>& AclCategoryNames();

// Key-spec flags (Redis's names, in Redis's order).
enum KeySpecFlag : uint32_t {
  kKeyRO = 1u << 0,
  kKeyRW = 1u << 1,
  kKeyOW = 1u << 2,
  kKeyRM = 1u << 3,
  kKeyAccess = 1u << 4,
  kKeyUpdate = 1u << 5,
  kKeyInsert = 1u << 6,
  kKeyDelete = 1u << 7,
  kKeyNotKey = 1u << 8,
  kKeyIncomplete = 1u << 9,
  kKeyVariableFlags = 1u << 10,
};
std::vector<std::string_view> KeySpecFlagNames(uint32_t flags);

// Where a command's keys are, as Redis's key specs: begin_search finds the first key (a fixed
// argument index, or the argument after a keyword), find_keys the rest (a range, or a count
// argument followed by the keys).
struct KeySpec {
  uint32_t flags = 0;
  std::string notes;
  // begin_search
  bool by_keyword = false;
  int index = 1;  // by index: argv position of the first key
  std::string keyword;
  int keyword_start_from = 1;  // by keyword: where the search starts (negative: from the end)
  // find_keys
  bool by_keynum = false;
  int last_key = 0, key_step = 1, limit = 0;      // range: last relative to the first (-1: end)
  int keynum_index = 0, first_key = 1, step = 1;  // keynum: relative to begin_search
};

// One argument of a command, as in Redis's command JSON and COMMAND DOCS.
enum class ArgType {
  kString,
  kInteger,
  kDouble,
  kKey,
  kPattern,
  kUnixTime,
  kPureToken,
  kOneOf,
  kBlock
};
enum ArgFlag : uint32_t {
  kArgOptional = 1u << 0,
  kArgMultiple = 1u << 1,
  kArgMultipleToken = 1u << 2
};

struct Arg {
  std::string name;
  ArgType type = ArgType::kString;
  std::string token;  // the keyword before the value, or the value of a pure token
  uint32_t flags = 0;
  int key_spec_index = -1;  // for kKey
  std::string summary, since, deprecated_since;
  std::vector<Arg> arguments;  // for kOneOf and kBlock
};

struct KeyPosition;

// What a command does with the descriptors a unix-socket client passes (SCM_RIGHTS). SHM.CALL
// carries no command that deals in them.
enum class Descriptors : uint8_t {
  kNone,
  // Lets the connection receive them (SHM.HELLO).
  kGrants,
  // Takes the oldest one passed (SHM.SET): the registry claims it before any check, so that a
  // refused request never leaves its descriptor to the next one, hands it to the handler
  // (Context::passed_fd) and closes it after.
  kTakes,
  // Takes one as kTakes, and carries another command whose arguments lie in that file (SHM.CALL):
  // the handler leaves that command in Context::carried, and the registry dispatches it as if it
  // had been received.
  kCarries,
};

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

  // Optional, Redis's command-JSON fields. A spec that leaves them empty still works: its key
  // specs are derived from first_key/last_key/key_step and the flags, its categories from the
  // flags, and COMMAND DOCS lists no arguments.
  uint32_t acl_categories = 0;    // explicit ones (AclCategory bits)
  std::vector<std::string> tips;  // "nondeterministic_output", "request_policy:all_shards", ...
  std::vector<KeySpec> key_specs;
  std::vector<Arg> arguments;
  bool redis_command = false;  // a Redis command: DOCS mirror Redis's layout (no "syntax")
  // Where a key spec is incomplete (MIGRATE's keys after KEYS), the command finds its keys
  // itself, as Redis's getkeys_proc: KeyPositions asks it instead of the specs.
  std::vector<KeyPosition> (*find_keys)(const protocol::Request& args) = nullptr;
  // The handler checks its keys' types itself (engine/keys.h, PrepareTypedKeys) after a fast
  // read that finds its key, type and expiry in one lock hold; the registry leaves it to it.
  bool handler_checks_key_types = false;
  Descriptors descriptors = Descriptors::kNone;

  // "config|get" for subcommands; set when the table is built.
  std::string full_name;
  // The type a typed family's keys must have (engine/keys.h, KeyTypeOfFamily); nullopt for the
  // families that take any key. Set when the table is built, so no request compares names.
  std::optional<store::KeyType> key_type;
  // INFO commandstats/latencystats figures; made when the table is built.
  std::shared_ptr<CommandStats> stats;
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

// Marks a spec as one of Redis's commands and fills what Redis 7.0.15's COMMAND reports for it
// beyond the flags: the version that added it, explicit ACL categories, tips and arguments.
inline CommandSpec AsRedis(CommandSpec s, std::string since, uint32_t acl = 0,
                           std::vector<std::string> tips = {}, std::vector<Arg> arguments = {}) {
  s.redis_command = true, s.since = std::move(since), s.acl_categories = acl;
  s.tips = std::move(tips), s.arguments = std::move(arguments);
  return s;
}

// Gives a spec its argument list (COMMAND DOCS), leaving the rest as it is.
inline CommandSpec WithArgs(CommandSpec s, std::vector<Arg> arguments) {
  s.arguments = std::move(arguments);
  return s;
}
// Argument specs by kind (COMMAND DOCS): a key (the first key spec), an integer, a string, a
// block of parts.
inline Arg KeyArg(std::string name) {
  Arg a;
  a.name = std::move(name), a.type = ArgType::kKey, a.key_spec_index = 0;
  return a;
}
inline Arg IntArg(std::string name, uint32_t flags = 0) {
  Arg a;
  a.name = std::move(name), a.type = ArgType::kInteger, a.flags = flags;
  return a;
}
inline Arg StrArg(std::string name, uint32_t flags = 0) {
  Arg a;
  a.name = std::move(name), a.flags = flags;
  return a;
}
inline Arg BlockArg(std::string name, uint32_t flags, std::vector<Arg> parts,
                    std::string token = {}) {
  Arg a;
  a.name = std::move(name), a.type = ArgType::kBlock, a.token = std::move(token);
  a.flags = flags, a.arguments = std::move(parts);
  return a;
}

// A pure token ("NX"), and a choice of one among `choices` (Redis's "oneof").
inline Arg TokenArg(std::string name, std::string token, std::string since = {}) {
  Arg a;
  a.name = std::move(name), a.type = ArgType::kPureToken, a.token = std::move(token);
  a.since = std::move(since);
  return a;
}
inline Arg OneOfArg(std::string name, uint32_t flags, std::vector<Arg> choices,
                    std::string since = {}) {
  Arg a;
  a.name = std::move(name), a.type = ArgType::kOneOf, a.flags = flags;
  a.arguments = std::move(choices), a.since = std::move(since);
  return a;
}
// An argument of any kind introduced by a keyword ("MATCH pattern").
inline Arg Tokened(Arg a, std::string token, std::string since = {}) {
  a.token = std::move(token), a.since = std::move(since);
  return a;
}
inline Arg TypedArg(std::string name, ArgType type, uint32_t flags = 0) {
  Arg a;
  a.name = std::move(name), a.type = type, a.flags = flags;
  return a;
}
// The same argument, repeated (Redis's "multiple") or optional.
inline Arg Many(Arg a) {
  a.flags |= kArgMultiple;
  return a;
}
inline Arg Optional(Arg a) {
  a.flags |= kArgOptional;
  return a;
}
// A key spec found by index with a range after it (`last_key` relative to the first key; -1:
// to the end), Redis's most common shape.
inline KeySpec RangeKeySpec(uint32_t flags, int index, int last_key = 0) {
  KeySpec k;
  k.flags = flags, k.index = index, k.last_key = last_key;
  return k;
}

// Fills what Redis 7.0.15's COMMAND reports for a command of one key at argument 1 (the set,
// list, hash and sorted-set commands).
inline CommandSpec AsRedisOneKey(CommandSpec s, std::string since, uint32_t acl, uint32_t key_flags,
                                 std::vector<Arg> arguments, std::vector<std::string> tips) {
  s = AsRedis(std::move(s), std::move(since), acl, std::move(tips), std::move(arguments));
  s.key_specs = {RangeKeySpec(key_flags, 1)};
  return s;
}

// The key specs COMMAND INFO reports: the explicit ones, or one derived from the legacy triple.
std::vector<KeySpec> EffectiveKeySpecs(const CommandSpec& spec);
// The categories COMMAND INFO reports: explicit plus those implied by the flags.
uint32_t EffectiveAclCategories(const CommandSpec& spec);
// Argument positions (in argv) that are keys of `spec` for this request, with each one's key-spec
// flags; an empty result for a command without keys.
struct KeyPosition {
  size_t index;
  uint32_t flags;
};
std::vector<KeyPosition> KeyPositions(const CommandSpec& spec, const protocol::Request& args);

}  // namespace prefixd::commands
