// Registry: the command table and the dispatcher the network layer calls. It looks a request's
// command up, checks arity, authentication, cluster routing and memory, queues it inside MULTI,
// runs the handler under CLIENT REPLY's switches (the connection's Session), feeds MONITOR and
// replicas and keeps statistics. Built once at start-up, then read-only; Dispatch runs on the
// io thread of the calling connection.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/command.h"
#include "engine/engine.h"
#include "engine/keys.h"
#include "server_api/dispatcher.h"

namespace prefixd::commands {

class Registry : public server::Dispatcher {
 public:
  // `add_commands` fills the table (commands/families.h: AddCommands); read-only after.
  Registry(Engine& engine, const std::function<void(Registry&)>& add_commands);

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
  bool IsDurable(uint64_t lsn) const override;
  int64_t IdleTimeoutSeconds() const override;
  uint64_t OutputBufferLimit() const override;
  uint64_t ReplicaOutputBufferLimit() const override;

  void Add(CommandSpec spec);

  // EXEC: runs one queued request as it would have run alone (statistics, MONITOR), its reply
  // appended to `reply`, under EXEC's hold of the gate.
  void RunQueued(server::ClientState& client, const protocol::Request& request,
                 protocol::ReplyWriter& reply) const;

 private:
  // Runs `answer` against `reply` as CLIENT REPLY asks (ON, OFF, SKIP), then moves the per-command
  // flags (SKIP, ASKING) on to the next command.
  template <class AnswerFn>
  void Answer(server::ClientState& client, protocol::ReplyWriter& reply, const AnswerFn& answer);
  // Dispatch without CLIENT REPLY's filtering. `carrier`: the command that carried `request`
  // (SHM.CALL), which then runs as if it had been received, but may not deal in descriptors.
  void DispatchTo(server::ClientState& client, protocol::Request& request,
                  protocol::ReplyWriter& reply, const CommandSpec* carrier = nullptr);
  // Answers a request refused before its handler ran, counting it as Redis does.
  void Reject(const CommandSpec* spec, protocol::ReplyWriter& reply,
              std::string_view message) const;
  // Reject, and inside MULTI as Redis does: a refused EXEC ends the transaction with
  // EXECABORT, any other refusal marks it so that EXEC answers EXECABORT.
  void RejectInTransaction(server::ClientState& client, const CommandSpec* spec,
                           protocol::ReplyWriter& reply, std::string_view message) const;
  // The command a request names: its subcommand's spec for a container, null when unknown.
  const CommandSpec* Resolve(const protocol::Request& request) const;
  // MULTI: keeps `request` for EXEC and answers +QUEUED.
  void Queue(server::ClientState& client, const CommandSpec& spec, const protocol::Request& request,
             protocol::ReplyWriter& reply) const;
  // Cluster mode: the redirect of a request, holding the lock stripes of its keys in
  // `migration_guard` when it writes to a slot being migrated away.
  std::string ClusterRedirectGuarded(const CommandSpec& spec, const server::ClientState& client,
                                     const protocol::Request& request,
                                     std::optional<KeyLocks>& migration_guard) const;
  // Cluster mode: the redirect of EXEC, from every key of the queue.
  std::string TransactionRedirect(const server::ClientState& client) const;
  // Runs the handler, timing it and counting the call and any error reply.
  void Run(const CommandSpec& spec, Context& ctx) const;
  // Feeds what a write that ran sends to replicas: its Propagation, or the command as received
  // when it `changed` something.
  void Propagate(Context& ctx, bool changed) const;

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
  // Tells this registry's entries in a thread's memo of the last name it found (Find) from those
  // of a registry that lived at the same address before.
  uint64_t id_;
  // The commands that run at once inside MULTI instead of being queued (Redis's list).
  const CommandSpec* exec_ = nullptr;
  std::vector<const CommandSpec*> run_in_multi_;
};

// Redis's protected mode: with protected-mode on and no password, only loopback and unix-socket
// clients are served; the rest get errors::kProtectedMode and are closed.
bool ProtectedModeRefuses(const Settings& settings, const server::ClientState& client);

// Ends the client's transaction, if any: the queue is dropped and every WATCH released (EXEC,
// DISCARD, RESET, a refused EXEC).
void EndTransaction(Engine& engine, server::ClientState& client);

}  // namespace prefixd::commands
