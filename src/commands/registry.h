// Registry: the command table and the dispatcher the network layer calls. It looks a request's
// command up, checks arity, authentication and memory, runs the handler and keeps statistics.
// Built once at start-up, then read-only; Dispatch runs on any io thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "commands/command.h"
#include "commands/engine.h"
#include "server/dispatcher.h"

namespace prefixd::commands {

class Registry : public server::Dispatcher {
 public:
  explicit Registry(Engine& engine);

  // Looks a command up by name, in any case.
  const CommandSpec* Find(std::string_view name) const;
  // Every top-level command, sorted by name.
  std::vector<const CommandSpec*> All() const;

  std::string OnConnect(const std::shared_ptr<server::ClientState>& client) override;
  void OnDisconnect(const std::shared_ptr<server::ClientState>& client) override;
  void Dispatch(server::ClientState& client, protocol::Request& request,
                protocol::ReplyWriter& reply) override;
  std::string RefuseBeforeLargeArgument(const server::ClientState& client,
                                        const protocol::Request& partial) override;
  void Refuse(server::ClientState& client, const protocol::Request& partial,
              protocol::ReplyWriter& reply, std::string_view refusal) override;
  protocol::ParserLimits LimitsFor(const server::ClientState& client) const override;
  bool WhenDurable(uint64_t lsn, std::function<void()> resume) override;
  bool DurableNow(uint64_t lsn) override;
  int64_t IdleTimeoutSeconds() const override;
  uint64_t OutputBufferLimit() const override;

  void Add(CommandSpec spec);

 private:
  // Runs `answer` against `reply` as CLIENT REPLY asks (ON, OFF, SKIP), then moves the per-command
  // flags (SKIP, ASKING) on to the next command.
  template <class AnswerFn>
  void Answer(server::ClientState& client, protocol::ReplyWriter& reply, const AnswerFn& answer);
  // Dispatch without CLIENT REPLY's filtering.
  void DispatchTo(server::ClientState& client, protocol::Request& request,
                  protocol::ReplyWriter& reply);
  // Answers a request refused before its handler ran, counting it as Redis does.
  void Reject(const CommandSpec* spec, protocol::ReplyWriter& reply, std::string_view message);
  // Runs the handler, timing it and counting the call and any error reply.
  void Run(const CommandSpec& spec, Context& ctx);

  Engine& engine_;
  // Looked up for every request: hashed and compared with ASCII case folded on the fly, so a
  // lookup neither copies nor lower-cases the name.
  struct FoldedHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const;
  };
  struct FoldedEqual {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const;
  };
  std::unordered_map<std::string, CommandSpec, FoldedHash, FoldedEqual> table_;
};

// Redis's protected mode: with protected-mode on and no password, only loopback and unix-socket
// clients are served; the rest get errors::kProtectedMode and are closed.
bool ProtectedModeRefuses(const Settings& settings, const server::ClientState& client);

// Each command family adds its commands to the table.
void RegisterConnectionCommands(Registry& registry);
void RegisterServerCommands(Registry& registry);
void RegisterSsmCommands(Registry& registry);
void RegisterPersistenceCommands(Registry& registry);
void RegisterVstoreCommands(Registry& registry);
void RegisterKvPrefixCommands(Registry& registry);
void RegisterPrefixIndexCommands(Registry& registry);
void RegisterKeyCommands(Registry& registry);
void RegisterStringCommands(Registry& registry);
void RegisterClusterCommands(Registry& registry);
void RegisterMigrateCommands(Registry& registry);

}  // namespace prefixd::commands
