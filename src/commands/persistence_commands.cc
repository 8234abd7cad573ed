// Persistence commands: SAVE, BGSAVE and LASTSAVE, over the durability layer.
#include <chrono>
#include <memory>
#include <mutex>
#include <shared_mutex>

#include <spdlog/spdlog.h>

#include "commands/families.h"
#include "common/ascii.h"
#include "engine/engine.h"
#include "engine/errors.h"

namespace prefixd::commands {
namespace {

// SAVE's hold without the log: every other writer waits at the mutation gate. No EXEC runs
// meanwhile, since this command's thread holds its stripe of the exec gate.
std::shared_ptr<void> HoldWritesForSave(Engine& engine) {
  return std::make_shared<std::unique_lock<std::shared_mutex>>(engine.mutation_gate());
}

// BGSAVE's, on its own thread: the whole exec gate first, so that no EXEC is part way through
// its queue when the mutation gate is taken; then the gate alone, so reads go on being served.
std::shared_ptr<void> HoldWritesForBackgroundSave(Engine& engine) {
  auto writes = std::make_shared<std::unique_lock<std::shared_mutex>>(engine.mutation_gate(),
                                                                      std::defer_lock);
  ExecGate::Hold whole(engine.exec_gate(), /*exclusive=*/true);
  writes->lock();
  return writes;
}

void Save(Context& ctx) {
  if (ctx.engine.durability() == nullptr && ctx.engine.logless_snapshots() == nullptr) {
    return ctx.reply.Error(errors::kPersistenceOff);
  }
  if (Status saved = SaveNow(ctx.engine); !saved.ok()) {
    return ctx.reply.Error(errors::Because(saved.message()));
  }
  ctx.reply.Simple("OK");
}

void BgSave(Context& ctx) {
  // Redis's one argument: SCHEDULE, which matters only while another child runs (prefixd has
  // none but the save itself, which answers "already in progress" either way).
  if (ctx.args.size() > 2 || (ctx.args.size() == 2 && !EqualsIgnoreCase(ctx.args[1], "SCHEDULE")))
    return ctx.reply.Error(errors::kSyntax);
  Status started;
  if (auto* d = ctx.engine.durability(); d != nullptr) {
    started = d->BackgroundSave();
  } else if (auto* s = ctx.engine.logless_snapshots(); s != nullptr) {
    started =
        s->BackgroundSave([&engine = ctx.engine] { return HoldWritesForBackgroundSave(engine); });
  } else {
    return ctx.reply.Error(errors::kPersistenceOff);
  }
  if (!started.ok()) return ctx.reply.Error(errors::Because(started.message()));
  ctx.reply.Simple("Background saving started");
}

// Before the first snapshot Redis answers its start time, and so does this.
void LastSave(Context& ctx) {
  if (auto* d = ctx.engine.durability(); d != nullptr) {
    return ctx.reply.Integer(d->Stats().last_save_time);
  }
  if (auto* s = ctx.engine.logless_snapshots(); s != nullptr) {
    return ctx.reply.Integer(s->Stats().last_save_time);
  }
  ctx.reply.Integer(
      std::chrono::duration_cast<std::chrono::seconds>(ctx.engine.started().time_since_epoch())
          .count());
}

}  // namespace

Status SaveNow(Engine& engine) {
  if (auto* d = engine.durability(); d != nullptr) {
    // The same words as Durability's own, for a save that begins meanwhile.
    if (d->Stats().bgsave_in_progress)
      return Status::Aborted("Background save already in progress");
    return d->Save();
  }
  if (auto* s = engine.logless_snapshots(); s != nullptr) {
    return s->Save([&engine] { return HoldWritesForSave(engine); });
  }
  return Status::Unavailable("persistence is off");
}

void RegisterPersistenceCommands(Registry& r) {
  auto cmd = [](std::string name, int arity, uint32_t flags, std::string syntax,
                std::string summary, Handler h, std::string complexity) {
    return MakeSpec("server", 0, std::move(name), arity, flags, std::move(syntax),
                    std::move(summary), h, std::move(complexity));
  };
  r.Add(AsRedis(cmd("save", 1, kAdmin | kNoScript | kNoAsyncLoading | kNoMulti, "",
                    "Writes a snapshot now (the calling connection waits) and cuts the log; "
                    "without the log, writes wait too.",
                    Save, "O(N) in the stored bytes"),
                "1.0.0"));
  r.Add(AsRedis(cmd("bgsave", -1, kAdmin | kNoScript | kNoAsyncLoading, "[SCHEDULE]",
                    "Writes a snapshot in the background and cuts the log; clients keep being "
                    "served (without the log, writes wait until it is written).",
                    BgSave, "O(1) to start"),
                "1.0.0"));
  r.Add(AsRedis(cmd("lastsave", 1, kFast | kLoading | kStale, "",
                    "Returns the unix time of the last successful snapshot (the start before the "
                    "first).",
                    LastSave, "O(1)"),
                "1.0.0", kAclAdmin | kAclDangerous, {"nondeterministic_output"}));
}

}  // namespace prefixd::commands
