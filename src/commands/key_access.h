// Key lookups as every command makes them: lazy expiry (an expired key is deleted through the
// mutation path and reads as missing), access stamps, the type check before a typed command
// (-WRONGTYPE) and the active expiry cycle. Called on io threads and the expiry thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "commands/command.h"
#include "commands/engine.h"
#include "commands/errors.h"
#include "persist/mutation.h"
#include "store/keyspace.h"

namespace prefixd::commands {

// The reply to a typed command on a key of another type (errors.h holds the text).
using errors::kWrongType;

// Deletes `key` whole, whatever its type (DEL, expiry, eviction), through the mutation path. A
// KV.PREFIX registration goes with its `_pk`/`_pv` sessions and the SSM state stored under its
// name (a hybrid model's prefix: one entry). `applied` when something was there.
struct Deleted {
  bool ok = false;  // false: refused (`error` says why)
  bool applied = false;
  std::string error;
  uint64_t lsn = 0;
};
Deleted DeleteKey(Engine& engine, std::string_view key, store::KeyType type);

// The key's entry, or nullopt when it does not exist or has expired (then it is deleted, the
// reply waiting for that record as for any change). `touch`: a read or write lookup (Redis's
// lookupKey); false for the commands Redis runs with LOOKUP_NOTOUCH.
std::optional<store::KeyInfo> LookupKey(Context& ctx, std::string_view key, bool touch);

// Before a typed command (group ssm, vstore, kvprefix): its keys expire lazily, are touched, and
// one of another type answers -WRONGTYPE. False when the error reply was queued.
bool PrepareTypedKeys(Context& ctx);

// Before a command that may grow memory: while used memory is past maxmemory, evicts whole
// keys by maxmemory-policy (each a logged delete, as Redis propagates evictions). False when it
// is still past the limit (noeviction, or nothing left in the policy's scope): the caller
// answers Redis's -OOM.
bool MakeRoom(Engine& engine);

// The policy maxmemory-policy names now.
store::EvictionPolicy CurrentPolicy(const Engine& engine);

// One active expiry pass: up to `per_shard` expired keys of each shard are deleted. Returns how
// many were.
uint64_t ExpireCycle(Engine& engine, int64_t now_ms, size_t per_shard);

}  // namespace prefixd::commands
