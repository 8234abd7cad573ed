// Mutate: how a handler changes stored state so that the change reaches the durability log in
// the same order as the store, and the reply waits until the record is durable. Called on the
// handler's io thread.
#pragma once

#include <algorithm>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "commands/command.h"
#include "commands/engine.h"
#include "persist/mutation.h"

namespace prefixd::commands {

// Applies a change through `apply(hook)`, which must pass `hook` to the store call (or call it
// itself). With durability on, the change's record is encoded here, outside the store lock, and
// appended by the hook; the reply is then held until the record is durable.
template <typename Apply>
void MutateHoldingGate(Context& ctx, const persist::Mutation& m, Apply apply) {
  persist::Durability* durability = ctx.engine.durability();
  if (durability == nullptr) return apply(store::StateStore::Hook([] {}));
  std::vector<Bytes> payload = persist::EncodePayload(m);
  uint64_t lsn = 0;
  apply(store::StateStore::Hook([&] { lsn = durability->Append(m.type, std::move(payload)); }));
  ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, lsn);
}

// Every change but FLUSHALL: many run at once (the gate is shared).
template <typename Apply>
void Mutate(Context& ctx, const persist::Mutation& m, Apply apply) {
  std::shared_lock gate(ctx.engine.mutation_gate());
  MutateHoldingGate(ctx, m, apply);
}

// FLUSHALL: no other change runs meanwhile, so the stores can be cleared shard by shard after
// the record is appended and still match the log.
template <typename Apply>
void MutateExclusive(Context& ctx, const persist::Mutation& m, Apply apply) {
  std::unique_lock gate(ctx.engine.mutation_gate());
  MutateHoldingGate(ctx, m, apply);
}

}  // namespace prefixd::commands
