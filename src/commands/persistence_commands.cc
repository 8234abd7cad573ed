// Persistence commands: SAVE, BGSAVE and LASTSAVE, over the durability layer.
#include <chrono>

#include <spdlog/spdlog.h>

#include "commands/families.h"
#include "engine/engine.h"
#include "engine/errors.h"

namespace prefixd::commands {
namespace {

void Save(Context& ctx) {
  auto* d = ctx.engine.durability();
  if (d == nullptr) return ctx.reply.Error(errors::kPersistenceOff);
  if (d->Stats().bgsave_in_progress) {
    return ctx.reply.Error(errors::kBgsaveInProgress);
  }
  if (Status saved = d->Save(); !saved.ok())
    return ctx.reply.Error(errors::Because(saved.message()));
  ctx.reply.Simple("OK");
}

void BgSave(Context& ctx) {
  auto* d = ctx.engine.durability();
  if (d == nullptr) return ctx.reply.Error(errors::kPersistenceOff);
  if (ctx.args.size() > 2) return ctx.reply.Error(errors::kSyntax);
  if (Status started = d->BackgroundSave(); !started.ok()) {
    return ctx.reply.Error(errors::Because(started.message()));
  }
  ctx.reply.Simple("Background saving started");
}

// Without persistence nothing was ever saved: Redis answers its start time then too.
void LastSave(Context& ctx) {
  auto* d = ctx.engine.durability();
  if (d != nullptr) return ctx.reply.Integer(d->Stats().last_save_time);
  ctx.reply.Integer(
      std::chrono::duration_cast<std::chrono::seconds>(ctx.engine.started().time_since_epoch())
          .count());
}

}  // namespace

void RegisterPersistenceCommands(Registry& r) {
  auto cmd = [](std::string name, int arity, uint32_t flags, std::string syntax,
                std::string summary, Handler h, std::string complexity) {
    return MakeSpec("server", 0, std::move(name), arity, flags, std::move(syntax),
                    std::move(summary), h, std::move(complexity));
  };
  r.Add(AsRedis(cmd("save", 1, kAdmin | kNoScript | kNoAsyncLoading | kNoMulti, "",
                    "Writes a snapshot now (the calling connection waits) and cuts the log.", Save,
                    "O(N) in the stored bytes"),
                "1.0.0"));
  r.Add(AsRedis(cmd("bgsave", -1, kAdmin | kNoScript | kNoAsyncLoading, "[SCHEDULE]",
                    "Writes a snapshot in the background and cuts the log; clients keep being "
                    "served.",
                    BgSave, "O(1) to start"),
                "1.0.0"));
  r.Add(AsRedis(cmd("lastsave", 1, kFast | kLoading | kStale, "",
                    "Returns the unix time of the last successful snapshot (the start before the "
                    "first).",
                    LastSave, "O(1)"),
                "1.0.0", kAclAdmin | kAclDangerous, {"nondeterministic_output"}));
}

}  // namespace prefixd::commands
