// Transactions: MULTI, EXEC, DISCARD, WATCH and UNWATCH, as Redis 7.0.15 answers them. Queueing
// happens in the dispatcher (Registry::DispatchTo); EXEC runs here under the whole exec gate, so
// no other client's command runs between the queued ones (docs/architecture.md, "Transactions").
#include <algorithm>
#include <string>

#include "commands/families.h"
#include "common/clock.h"
#include "engine/engine.h"
#include "persist/durability.h"

namespace prefixd::commands {
namespace {

void Multi(Context& ctx) {
  if (ctx.session.in_multi) return ctx.reply.Error(errors::kNestedMulti);
  ctx.session.in_multi = true;
  ctx.client.multi_count.store(0, std::memory_order_relaxed);
  ctx.reply.Simple("OK");
}

void Exec(Context& ctx) {
  server::ClientState& client = ctx.client;
  Session& session = ctx.session;
  if (!session.in_multi) return ctx.reply.Error(errors::kExecWithoutMulti);
  const bool refused = session.multi_refused;
  const bool broken = !refused && ctx.engine.watches().Broken(ctx.engine.databases(), session);
  if (refused || broken) {
    EndTransaction(ctx.engine, client);
    if (refused) {
      return ctx.reply.Error(errors::kExecAbort);
    }
    return ctx.reply.NullArray();
  }
  // As Redis: the watches go first; the client is still in MULTI (CLIENT INFO says so) while
  // its queue runs.
  ctx.engine.watches().UnwatchAll(session);
  std::vector<protocol::Request> queue = std::move(session.multi_queue);
  // However the queue ends (an exception leaves through here too), the transaction is over.
  struct End {
    Context& ctx;
    ~End() {
      EndTransaction(ctx.engine, ctx.client);
      ctx.client.last_command.store(ctx.spec.full_name.c_str(), std::memory_order_relaxed);
    }
  } end{ctx};
  ctx.reply.ArrayLen(queue.size());
  // The queue's records go to the log as one group, all or none across a crash; the whole exec
  // gate keeps every other writer (clients, active expiry) out until it is queued.
  persist::Durability::Group logged(ctx.engine.durability());
  // Replicas get what the queue changed as one MULTI ... EXEC block.
  Replication::Transaction replicated(ctx.engine.replication());
  for (const protocol::Request& request : queue) {
    ctx.engine.registry->RunQueued(client, request, ctx.reply);
  }
  client.reply_needs_lsn = std::max(client.reply_needs_lsn, logged.End());
}

void Discard(Context& ctx) {
  if (!ctx.session.in_multi) return ctx.reply.Error(errors::kDiscardWithoutMulti);
  EndTransaction(ctx.engine, ctx.client);
  ctx.reply.Simple("OK");
}

void Watch(Context& ctx) {
  if (ctx.session.in_multi) return ctx.reply.Error(errors::kWatchInMulti);
  const size_t db = static_cast<size_t>(ctx.client.db.load());
  const int64_t now = NowMs();
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    auto info = Db(ctx).keys.Find(ctx.args[i]);
    const bool stale = info && info->expire_at_ms != 0 && info->expire_at_ms <= now;
    ctx.engine.watches().Watch(ctx.session, db, ctx.args[i], stale);
  }
  ctx.reply.Simple("OK");
}

void Unwatch(Context& ctx) {
  ctx.engine.watches().UnwatchAll(ctx.session);
  ctx.reply.Simple("OK");
}

}  // namespace

void RegisterTransactionCommands(Registry& r) {
  auto cmd = [](std::string name, int arity, uint32_t flags, std::string syntax,
                std::string summary, Handler h, std::string complexity) {
    return MakeSpec("transactions", 0, std::move(name), arity, flags, std::move(syntax),
                    std::move(summary), h, std::move(complexity));
  };
  constexpr uint32_t kControl = kNoScript | kLoading | kStale | kFast | kAllowBusy;
  constexpr uint32_t kTx = kAclTransaction;
  r.Add(AsRedis(
      cmd("multi", 1, kControl, "",
          "Starts a transaction: the commands after it are queued until EXEC.", Multi, "O(1)"),
      "1.2.0", kTx));
  r.Add(AsRedis(cmd("exec", 1, kNoScript | kLoading | kStale | kSkipSlowlog, "",
                    "Runs the queued commands as one step, no other client's command between "
                    "them; a null reply when a WATCHed key changed.",
                    Exec, "Depends on commands in the transaction"),
                "1.2.0", kTx));
  r.Add(AsRedis(cmd("discard", 1, kControl, "", "Drops the queued commands and every WATCH.",
                    Discard, "O(N), when N is the number of queued commands"),
                "2.0.0", kTx));
  CommandSpec watch = AsRedis(cmd("watch", -2, kControl, "<key> [key ...]",
                                  "Makes the next EXEC fail if one of the keys changes before it.",
                                  Watch, "O(1) for every key."),
                              "2.2.0", kTx, {}, {KeyArg("key")});
  watch.arguments[0].flags = kArgMultiple;
  watch.first_key = 1, watch.last_key = -1, watch.key_step = 1;
  watch.key_specs = {RangeKeySpec(kKeyRO, 1, -1)};
  r.Add(std::move(watch));
  r.Add(AsRedis(cmd("unwatch", 1, kControl, "", "Forgets every WATCHed key.", Unwatch, "O(1)"),
                "2.2.0", kTx));
}

}  // namespace prefixd::commands
