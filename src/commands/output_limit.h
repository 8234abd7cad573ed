// The client-output-buffer-limit check a handler makes before it builds a large reply: the reply
// plus everything already queued for the client (copied, or referenced and so pinned) must fit.
// A pure function over the handler's Context; called on the handler's io thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/command.h"
#include "engine/engine.h"
#include "engine/errors.h"

namespace prefixd::commands {

// True when `reply_bytes` more fit; nothing is queued either way.
inline bool FitsOutputLimitQuietly(const Context& ctx, uint64_t reply_bytes) {
  const auto limit =
      static_cast<uint64_t>(ctx.engine.settings().Int(Setting::kClientOutputBufferLimit));
  const uint64_t queued = ctx.reply.held_bytes();
  return reply_bytes <= limit && queued <= limit - reply_bytes;
}

// True when `reply_bytes` more fit; otherwise queues errors::OutputLimit (the reply would exceed
// client-output-buffer-limit; `advice` says what to do instead) and returns false.
inline bool FitsOutputLimit(Context& ctx, uint64_t reply_bytes, std::string_view command,
                            std::string_view advice) {
  if (FitsOutputLimitQuietly(ctx, reply_bytes)) return true;
  const auto limit =
      static_cast<uint64_t>(ctx.engine.settings().Int(Setting::kClientOutputBufferLimit));
  ctx.reply.Error(errors::OutputLimit(command, reply_bytes, limit, advice));
  return false;
}

}  // namespace prefixd::commands
