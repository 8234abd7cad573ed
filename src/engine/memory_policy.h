// Memory policy: what keeps the server inside maxmemory and maxdisk. Eviction by
// maxmemory-policy before a write, the disk tier (sessions and strings turned cold, read back,
// trimmed to maxdisk, placed during recovery) and the active expiry cycle with the engine's thread
// that runs it. Called on io threads, the expiry thread and during recovery.
#pragma once

#include <cstdint>
#include <string_view>

#include "engine/engine.h"
#include "persist/mutation.h"
#include "store/database.h"
#include "store/keyspace.h"

namespace prefixd::commands {

// Before a command that may grow memory: while the disk tier is past maxdisk (its cold bytes
// summed over every database), deletes cold keys; while used memory is past maxmemory, evicts
// whole keys by maxmemory-policy, in exact order within a database and across databases from
// the one holding the most memory (with persistence on, an SSM session goes to the disk tier
// instead; a deletion is logged, as Redis propagates evictions). False when it is still past
// the limit (noeviction, or nothing left in the policy's scope): the caller answers Redis's -OOM.
bool MakeRoom(Engine& engine);

// The disk tier: turns an SSM session, a V-store session or a KV.PREFIX registration (its two
// sessions and the SSM state under its name) cold (its bytes stay in the log/snapshot files,
// its keys move to the cold index) once its records are durable, syncing the log if they are
// not yet.
// False when it cannot (the log is failing).
bool MakeCold(Engine& engine, store::Database& database, std::string_view key,
              store::KeyType type = store::KeyType::kSsmPrefix);
// The same for a string (from KeyEntry::kInlineValueBelow on): kNotEligible for a small one
// (or one the log never placed), kNotDurable when the log is failing.
store::StringCold MakeStringCold(Engine& engine, store::Database& database, std::string_view key);
// After recovery, which loads every hot entry: while past maxmemory, sessions of every database
// go cold by the policy (nothing is deleted for memory); then maxdisk applies. Returns how many
// went cold.
uint64_t ColdAfterRecovery(Engine& engine);
// During recovery (Durability's placed_while_recovering), after record `m` of database `db`
// placed values in its file: while past maxmemory, the keys it wrote go cold at once, so the
// restart holds the budget plus one record rather than everything the log holds. Those read
// first stay hot (a snapshot's hot set comes before its log tail); nothing is deleted.
void ColdWhileRecovering(Engine& engine, size_t db, const persist::Mutation& m);
// Before a full read of `key`: a cold session is read back into memory whole when it fits
// under maxmemory (docs/cache-design.md, "The disk tier").
void PromoteOnRead(Engine& engine, store::Database& database, std::string_view key);
// The same for a V-store session: before a read that covers whole layers, or (`always`) before a
// write to it (docs/cache-design.md, "The disk tier").
void PromoteVectorSession(Engine& engine, store::Database& database, std::string_view sid,
                          bool always);

// The policy maxmemory-policy names now.
store::EvictionPolicy CurrentPolicy(const Engine& engine);

// One active expiry pass: up to `per_shard` expired keys of each shard of each database are
// deleted. Returns how many were.
uint64_t ExpireCycle(Engine& engine, int64_t now_ms, size_t per_shard);

}  // namespace prefixd::commands
