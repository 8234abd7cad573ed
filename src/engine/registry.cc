#include "engine/registry.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstring>
#include <new>
#include <optional>

#include "common/ascii.h"
#include "common/clock.h"
#include "engine/cluster_routing.h"
#include "engine/errors.h"
#include "engine/keys.h"
#include "engine/memory_policy.h"
#include "engine/monitor.h"
#include "engine/session.h"
#include "engine/shm_leases.h"
#include "engine/write_path.h"

namespace prefixd::commands {
namespace {

bool ArityOk(int arity, size_t argc) {
  return arity > 0 ? argc == static_cast<size_t>(arity) : argc >= static_cast<size_t>(-arity);
}

// The descriptor passed with a request, claimed for a command that takes one before any check
// can refuse it (the oldest waiting: each such request is sent with its own), and closed once
// the command is done, whatever happened: a refused request never leaves it to the next one.
class ClaimedFd {
 public:
  ClaimedFd(server::ClientState& client, const CommandSpec& spec) {
    if (spec.descriptors != Descriptors::kTakes && spec.descriptors != Descriptors::kCarries) {
      return;
    }
    if (auto& passed = client.fds_received; !passed.empty()) {
      fd_ = passed.front();
      passed.erase(passed.begin());
    }
  }
  ~ClaimedFd() { Close(); }
  ClaimedFd(const ClaimedFd&) = delete;
  ClaimedFd& operator=(const ClaimedFd&) = delete;
  int fd() const { return fd_; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

}  // namespace

bool ProtectedModeRefuses(const Settings& settings, const server::ClientState& client) {
  return settings.Bool(Setting::kProtectedMode) && settings.String(Setting::kRequirePass).empty() &&
         !client.local;
}

void EndTransaction(Engine& engine, server::ClientState& client) {
  Session& session = SessionOf(client);
  session.in_multi = false;
  session.multi_refused = false;
  session.multi_flags = 0;
  session.multi_queue.clear();
  session.multi_queue.shrink_to_fit();
  client.multi_count.store(-1, std::memory_order_relaxed);
  client.multi_bytes.store(0, std::memory_order_relaxed);
  engine.watches().UnwatchAll(session);
}

namespace {
std::atomic<uint64_t> next_registry_id{1};
}  // namespace

Registry::Registry(Engine& engine, const std::function<void(Registry&)>& add_commands)
    : engine_(engine), id_(next_registry_id++) {
  engine_.registry = this;
  add_commands(*this);
  exec_ = Find("exec");
  for (std::string_view name : {"exec", "discard", "multi", "watch", "quit", "reset"}) {
    run_in_multi_.push_back(Find(name));
  }
}

void Registry::Add(CommandSpec spec) {
  spec.name = AsciiLower(spec.name);
  spec.full_name = spec.name;
  spec.stats = std::make_shared<CommandStats>();
  spec.key_type = KeyTypeOfFamily(spec.group);
  for (CommandSpec& sub : spec.subcommands) {
    sub.name = AsciiLower(sub.name);
    sub.full_name = spec.name + "|" + sub.name;
    sub.group = spec.group;
    sub.stats = std::make_shared<CommandStats>();
    sub.key_type = spec.key_type;
  }
  std::string key = spec.name;
  table_.emplace(std::move(key), std::move(spec));
}

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
  // A pipeline sends one command many times in a row: the name as the client spelled it last
  // time on this thread is compared byte for byte before the table is hashed. The table does not
  // change once built, so a remembered entry stays valid while its registry lives.
  struct Last {
    uint64_t registry = 0;
    uint8_t length = 0;
    char name[23];
    const CommandSpec* spec = nullptr;
  };
  thread_local Last last;
  if (last.registry == id_ && name.size() == last.length &&
      std::memcmp(name.data(), last.name, name.size()) == 0) {
    return last.spec;
  }
  auto it = table_.find(name);
  if (it == table_.end()) return nullptr;
  if (name.size() <= sizeof(last.name)) {
    last.registry = id_;
    last.length = static_cast<uint8_t>(name.size());
    std::memcpy(last.name, name.data(), name.size());
    last.spec = &it->second;
  }
  return &it->second;
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
    return std::string(errors::kMaxClients);
  }
  if (ProtectedModeRefuses(engine_.settings(), *client)) {
    engine_.stats().rejected_connections += 1;
    return std::string(errors::kProtectedMode);
  }
  engine_.AddClient(client);
  return {};
}

void Registry::OnDisconnect(const std::shared_ptr<server::ClientState>& client) {
  if (client->replica.load(std::memory_order_relaxed)) {
    engine_.replication().Detach(client->id);
  }
  // A client that never ran a command has no session, and so no watches.
  if (client->session != nullptr) engine_.watches().UnwatchAll(SessionOf(*client));
  // Its leases end now, not when the last reference to its state goes.
  if (client->session != nullptr && SessionOf(*client).shm_leases != nullptr) {
    SessionOf(*client).shm_leases->Clear();
  }
  engine_.RemoveClient(*client);
}

void Registry::Reject(const CommandSpec* spec, protocol::ReplyWriter& reply,
                      std::string_view message) const {
  engine_.stats().rejected_calls.Add();
  if (spec != nullptr) spec->stats->rejected_calls.Add();
  reply.Error(message);
  engine_.stats().errors.Add(reply.last_error_code());
}

void Registry::RejectInTransaction(server::ClientState& client, const CommandSpec* spec,
                                   protocol::ReplyWriter& reply, std::string_view message) const {
  Session& session = SessionOf(client);
  if (!session.in_multi) return Reject(spec, reply, message);
  if (spec == exec_) {
    EndTransaction(engine_, client);
    return Reject(spec, reply, errors::ExecAbortBecause(message.substr(message.starts_with('-'))));
  }
  session.multi_refused = true;
  Reject(spec, reply, message);
}

namespace {

// Error replies already counted by the commands run inside the one running on this thread (the
// queue of an EXEC): EXEC does not count them again.
thread_local uint64_t counted_errors = 0;

}  // namespace

void Registry::Run(const CommandSpec& spec, Context& ctx) const {
  engine_.stats().total_commands.Add();
  const uint64_t errors_before = ctx.reply.error_count();
  const uint64_t counted_before = counted_errors;
  const auto start = CommandClock::BurstStart();
  {
    CommandClock::Scope command_clock(start);
    // A write runs under the replication order (held already when DispatchTo took it).
    Replication::OrderHold order(engine_.replication(), (spec.flags & kWrite) != 0);
    ctx.propagate.set_wanted(order.feeding());
    const uint64_t changes_before = WritePath::ChangesAppliedHere();
    if (spec.handler_checks_key_types || PrepareTypedKeys(ctx)) spec.handler(ctx);
    if (order.feeding()) Propagate(ctx, WritePath::ChangesAppliedHere() != changes_before);
  }
  const auto end = std::chrono::steady_clock::now();
  CommandClock::EndCommand(end);
  const auto ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count());
  CommandStats& stats = *spec.stats;
  stats.calls.Add();
  stats.usec.Add(ns / 1000);
  if (engine_.settings().Bool(Setting::kLatencyTracking)) stats.latency.Record(ns);
  if (engine_.HasMonitors() && !(spec.flags & (kAdmin | kSkipMonitor))) {
    engine_.FeedMonitors(ctx.client, MonitorLine(ctx.client, ctx.args));
  }
  const uint64_t errors =
      ctx.reply.error_count() - errors_before - (counted_errors - counted_before);
  counted_errors += errors;
  if (errors > 0) {
    stats.failed_calls.Add();
    for (uint64_t i = 0; i < errors; ++i) engine_.stats().errors.Add(ctx.reply.last_error_code());
  }
}

void Registry::Propagate(Context& ctx, bool changed) const {
  Replication& replication = engine_.replication();
  const int db = ctx.client.db.load(std::memory_order_relaxed);
  if (!ctx.propagate.replaced()) {
    if (!changed) return;
    std::vector<std::string_view> argv;
    argv.reserve(ctx.args.size());
    for (size_t i = 0; i < ctx.args.size(); ++i) argv.push_back(ctx.args[i]);
    return replication.Feed(db, argv);
  }
  for (std::string& command : ctx.propagate.TakeCommands()) {
    replication.FeedCommand(db, std::move(command));
  }
}

template <class AnswerFn>
void Registry::Answer(server::ClientState& client, protocol::ReplyWriter& reply,
                      const AnswerFn& answer) {
  Session& session = SessionOf(client);
  if (!session.reply_off && !session.reply_skip) {
    answer(reply);
  } else {
    // CLIENT REPLY OFF/SKIP: the command runs against a scratch writer whose bytes are kept only
    // when the command itself turned replies back on (CLIENT REPLY ON).
    protocol::ReplyWriter scratch(reply.protocol());
    answer(scratch);
    if (!session.reply_off && !session.reply_skip) {
      for (auto piece : scratch.Buffers()) {
        reply.Raw({reinterpret_cast<const char*>(piece.data()), piece.size()});
      }
    }
  }
  // CLIENT REPLY SKIP covers the command after it; so does ASKING.
  session.reply_skip = session.reply_skip_next;
  session.reply_skip_next = false;
  session.asking = session.asking_next;
  session.asking_next = false;
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
  Answer(client, reply,
         [&](protocol::ReplyWriter& w) { RejectInTransaction(client, spec, w, refusal); });
}

const CommandSpec* Registry::Resolve(const protocol::Request& request) const {
  const CommandSpec* spec = Find(request[0]);
  if (spec == nullptr || spec->subcommands.empty() || request.size() < 2) return spec;
  std::string sub = AsciiLower(request[1]);
  auto it = std::find_if(spec->subcommands.begin(), spec->subcommands.end(),
                         [&](const CommandSpec& s) { return s.name == sub; });
  return it == spec->subcommands.end() ? nullptr : &*it;
}

void Registry::RunQueued(server::ClientState& client, const protocol::Request& request,
                         protocol::ReplyWriter& reply) const {
  // Checked when it was queued; the table does not change.
  const CommandSpec* spec = Resolve(request);
  if (spec == nullptr) return Reject(nullptr, reply, errors::UnknownCommand(request));
  client.last_command.store(spec->full_name.c_str(), std::memory_order_relaxed);
  // A command that throws answers an error in its place in EXEC's array, and the queue goes on,
  // as the connection does for a request alone.
  const auto mark = reply.GetMark();
  try {
    Context ctx{client, request, reply, engine_, *spec};
    Run(*spec, ctx);
  } catch (const std::exception& e) {
    reply.RewindTo(mark);
    spdlog::warn("Client id={} addr={}: '{}' in EXEC failed: {}", client.id, client.addr,
                 spec->full_name, e.what());
    if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
      reply.Error(errors::NotEnoughMemoryToRun(spec->full_name));
    } else {
      reply.Error(errors::InternalError(spec->full_name, e.what()));
    }
  }
}

void Registry::DispatchTo(server::ClientState& client, protocol::Request& request,
                          protocol::ReplyWriter& reply, const CommandSpec* carrier) {
  client.last_interaction_ms.store(CoarseNowMs(), std::memory_order_relaxed);
  const CommandSpec* spec = Find(request[0]);
  if (spec == nullptr) {
    return RejectInTransaction(client, nullptr, reply, errors::UnknownCommand(request));
  }
  if (!spec->subcommands.empty() && request.size() >= 2) {
    const CommandSpec* sub = Resolve(request);
    if (sub == nullptr) {
      return RejectInTransaction(client, nullptr, reply,
                                 errors::UnknownSubcommand(request[1], spec->name));
    }
    spec = sub;
  }
  // Checked before the claim: a carried SHM.SET must not take a descriptor sent for a later one.
  if (carrier != nullptr && spec->descriptors != Descriptors::kNone) {
    return Reject(spec, reply, errors::ShmCallCannotCarry(carrier->name, spec->full_name));
  }
  client.last_command.store(spec->full_name.c_str(), std::memory_order_relaxed);
  ClaimedFd claimed(client, *spec);
  if (!ArityOk(spec->arity, request.size())) {
    return RejectInTransaction(client, spec, reply, errors::WrongArity(spec->full_name));
  }
  if (!client.authenticated && !(spec->flags & kNoAuth)) {
    return RejectInTransaction(client, spec, reply, errors::kNoAuth);
  }
  // Inside MULTI every command but these few is queued; EXEC is checked as the sum of its queue.
  Session& session = SessionOf(client);
  const bool queue = session.in_multi && std::find(run_in_multi_.begin(), run_in_multi_.end(),
                                                   spec) == run_in_multi_.end();
  const bool exec = session.in_multi && spec == exec_;
  if (queue && (spec->flags & kNoMulti)) {
    return RejectInTransaction(client, spec, reply, errors::kNotAllowedInMulti);
  }
  if (spec->descriptors == Descriptors::kCarries) {
    // SHM.CALL names no key and writes nothing itself: the gate, the orders, routing, memory
    // and the log are the carried command's, dispatched from scratch once SHM.CALL's own run
    // (its statistics, its descriptor) is over, so that nothing here is taken twice.
    protocol::Request carried;
    Context ctx{client, request, reply, engine_, *spec};
    ctx.passed_fd = claimed.fd();
    ctx.carried = &carried;
    Run(*spec, ctx);
    claimed.Close();
    if (carried.empty()) return;
    return DispatchTo(client, carried, reply, spec);
  }
  const uint32_t flags = exec ? session.multi_flags : spec->flags;
  // Taken before any key lock: EXEC runs its queue holding the whole gate, then key locks.
  ExecGate::Hold gate(engine_.exec_gate(), exec || (spec->flags & kWholeGate));
  // A write holds the replication order from here (before a migration's key locks and the
  // evictions that make room for it) to its propagation; so does whatever may evict (an
  // eviction feeds its DEL, and must not take the order under the eviction pass's mutex while a
  // writer holding the order waits for that mutex).
  Replication::OrderHold order(engine_.replication(),
                               exec || queue || (flags & (kWrite | kDenyOom)) != 0);
  // A write to a key of a slot being migrated away holds the key's lock stripes, as MIGRATE does
  // from reading the key to deleting it, and is routed again under them: the key may have left
  // meanwhile (then it is asked for on the target), and a write never lands between MIGRATE's
  // copy and its delete.
  std::optional<KeyLocks> migration_guard;
  if (engine_.cluster != nullptr) {
    if (exec) {
      // Every key of the queue must be served here, in one slot; if not, the transaction ends
      // with the redirect itself, as in Redis.
      std::string redirect = TransactionRedirect(client);
      if (!redirect.empty()) {
        EndTransaction(engine_, client);
        return Reject(spec, reply, redirect);
      }
    } else {
      std::string redirect = ClusterRedirectGuarded(*spec, client, request, migration_guard);
      if (!redirect.empty()) return RejectInTransaction(client, spec, reply, redirect);
    }
  }
  if ((flags & kWrite) && engine_.durability() && !engine_.durability()->healthy()) {
    return RejectInTransaction(client, spec, reply,
                               errors::AofWriteFailed(engine_.durability()->last_error()));
  }
  // Queueing may take memory without end: under OOM, MULTI queues nothing.
  if ((flags & kDenyOom) || queue) {
    if (!MakeRoom(engine_)) {
      return RejectInTransaction(client, spec, reply, errors::kOom);
    }
  }
  if (queue) return Queue(client, *spec, request, reply);
  Context ctx{client, request, reply, engine_, *spec};
  ctx.passed_fd = claimed.fd();
  Run(*spec, ctx);
}

void Registry::Queue(server::ClientState& client, const CommandSpec& spec,
                     const protocol::Request& request, protocol::ReplyWriter& reply) const {
  // A transaction already refused runs nothing: its requests are not kept.
  Session& session = SessionOf(client);
  if (!session.multi_refused) {
    session.multi_queue.push_back(request);
    session.multi_flags |= spec.flags;
    client.multi_count.store(static_cast<int>(session.multi_queue.size()),
                             std::memory_order_relaxed);
    client.multi_bytes.fetch_add(session.multi_queue.back().allocated_bytes() + sizeof(request),
                                 std::memory_order_relaxed);
  }
  reply.Simple("QUEUED");
}

std::string Registry::TransactionRedirect(const server::ClientState& client) const {
  // As Redis's getNodeByQuery for EXEC: the keys of every queued command, as if one command
  // named them all.
  CommandSpec all_keys;
  const Session& session = SessionOf(client);
  all_keys.name = "exec", all_keys.flags = session.multi_flags & (kWrite | kReadonly);
  all_keys.first_key = 1, all_keys.last_key = -1, all_keys.key_step = 1;
  protocol::Request keys;
  keys.AddSmall("exec");
  for (const protocol::Request& queued : session.multi_queue) {
    const CommandSpec* spec = Resolve(queued);
    if (spec == nullptr) continue;
    for (const KeyPosition& k : KeyPositions(*spec, queued)) keys.AddSmall(queued[k.index]);
  }
  if (keys.size() == 1) return {};
  return ClusterRedirect(engine_, client, all_keys, keys);
}

std::string Registry::ClusterRedirectGuarded(const CommandSpec& spec,
                                             const server::ClientState& client,
                                             const protocol::Request& request,
                                             std::optional<KeyLocks>& migration_guard) const {
  bool migrating = false;
  std::string redirect = ClusterRedirect(engine_, client, spec, request, &migrating);
  if (redirect.empty() && migrating && (spec.flags & kWrite)) {
    std::vector<std::string_view> keys;
    for (const KeyPosition& k : KeyPositions(spec, request)) keys.push_back(request[k.index]);
    migration_guard.emplace(engine_, keys);
    redirect = ClusterRedirect(engine_, client, spec, request);
  }
  return redirect;
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

bool Registry::IsDurable(uint64_t lsn) const {
  return engine_.durability() == nullptr || engine_.durability()->IsDurable(lsn);
}

bool Registry::DurableNow(uint64_t lsn) {
  return engine_.durability() == nullptr || engine_.durability()->DurableNow(lsn);
}

int64_t Registry::IdleTimeoutSeconds() const { return engine_.settings().Int(Setting::kTimeout); }

uint64_t Registry::ReplicaOutputBufferLimit() const {
  return static_cast<uint64_t>(engine_.settings().Int(Setting::kReplicaOutputBufferLimit));
}

uint64_t Registry::OutputBufferLimit() const {
  return static_cast<uint64_t>(engine_.settings().Int(Setting::kClientOutputBufferLimit));
}

}  // namespace prefixd::commands
