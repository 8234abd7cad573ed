// Mutate: how a handler changes stored state so that the change reaches the durability log in
// the same order as the store, and the reply waits until the record is durable. Called on the
// handler's io thread.
#pragma once

#include <algorithm>
#include <vector>

#include "commands/command.h"
#include "commands/engine.h"
#include "persist/mutation.h"

namespace prefixd::commands {

// Applies a change through `apply(hook)`, which must pass `hook` to the store call. With
// durability on, the change's record is encoded here, outside the store lock, and appended
// inside it by the hook; the reply is then held until the record is durable.
template <typename Apply>
void Mutate(Context& ctx, const persist::Mutation& m, Apply apply) {
  persist::Durability* durability = ctx.engine.durability();
  if (durability == nullptr) return apply(store::StateStore::Hook());
  std::vector<Bytes> payload = persist::EncodePayload(m);
  uint64_t lsn = 0;
  apply([&] { lsn = durability->Append(m.type, std::move(payload)); });
  ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, lsn);
}

}  // namespace prefixd::commands
