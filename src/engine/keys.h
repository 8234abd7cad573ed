// Keys as every command finds and holds them: lookups with lazy expiry (an expired key is deleted
// through the write path, engine/write_path.h, and reads as missing), access stamps, a cold
// string's bytes read back from disk, the type check before a typed command (-WRONGTYPE), the
// key-lock stripes and whole-key deletion. Called on io threads and the expiry thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/command.h"
#include "engine/engine.h"
#include "engine/errors.h"
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
Deleted DeleteKey(Engine& engine, size_t db, std::string_view key, store::KeyType type);
// DeleteKey in the database the command's client has selected.
Deleted DeleteKey(Context& ctx, std::string_view key, store::KeyType type);

// Holds the engine's key-lock stripes of `keys` (each once, ascending) for its lifetime. Stripes
// the calling thread already holds through an enclosing KeyLocks are skipped, so a command run
// under its keys' stripes (a write to a migrating slot) can take them again; the inner keys must
// be among the outer ones, or the ascending order that prevents deadlock is lost.
class KeyLocks {
 public:
  KeyLocks(Engine& engine, std::span<const std::string_view> keys);
  KeyLocks(Engine& engine, std::string_view key) : KeyLocks(engine, std::span(&key, 1)) {}
  ~KeyLocks();
  KeyLocks(const KeyLocks&) = delete;
  KeyLocks& operator=(const KeyLocks&) = delete;

 private:
  // Takes `stripe` unless this thread already holds it.
  void Take(Engine& engine, size_t stripe);

  // Most commands name one key: its stripe is held here without allocating; the others a
  // multi-key command takes go to one vector, sized once.
  struct Held {
    std::unique_lock<std::mutex> lock;
    size_t stripe;
  };
  std::unique_lock<std::mutex> first_held_;
  size_t first_stripe_ = 0;
  std::vector<Held> more_held_;
};

// Deletes `key` of database `db` if its entry has expired by `now_ms`, holding the key's lock
// stripe from the check to the delete: the active pass and a command's lookup race for one key,
// and a value written between one's check and its delete must survive. Only the caller whose
// delete applied counts it in expired_keys. The caller holds no stripe but the key's own.
Deleted ExpireIfDue(Engine& engine, size_t db, std::string_view key, int64_t now_ms);

// The key's entry, or nullopt when it does not exist or has expired (then it is deleted, the
// reply waiting for that record as for any change). `touch`: a read or write lookup (Redis's
// lookupKey); false for the commands Redis runs with LOOKUP_NOTOUCH.
std::optional<store::KeyInfo> LookupKey(Context& ctx, std::string_view key, bool touch);
// LookupKey (touching) for a string command that reads a cold value itself, or part of it
// (GETRANGE, STRLEN): a cold string comes with its `place`, its value not read.
std::optional<store::KeyInfo> LookupKeyPlace(Context& ctx, std::string_view key);
// LookupKey (touching) for a write that replaces the value whole (SET without GET, SETNX, ...):
// the entry's type and expiry only, no value copied and nothing read from disk.
std::optional<store::KeyInfo> LookupKeyToReplace(Context& ctx, std::string_view key);

// The type the keys of a typed family (group ssm, vstore, kvprefix, prefixindex) must have;
// nullopt for the families that take keys of any type.
std::optional<store::KeyType> KeyTypeOfFamily(std::string_view group);

// Before a typed command (CommandSpec::key_type set): its keys expire lazily, are touched, and
// one of another type answers -WRONGTYPE. False when the error reply was queued.
bool PrepareTypedKeys(Context& ctx);

// Reads a cold string's value (`info.place`) into `info.value` (pread, bit-exact); the key is
// promoted back into memory when the value fits under maxmemory. A failed read throws
// std::runtime_error (the client gets an error, the key stays). Does nothing for a hot key.
void LoadColdString(Engine& engine, store::Database& database, std::string_view key,
                    store::KeyInfo& info);
// Whether reading a cold string of `bytes` promotes it (it fits under maxmemory): what
// LoadColdString decides, for a reader that streams the value instead when it does not.
bool PromotesOnRead(const Engine& engine, uint64_t bytes);

}  // namespace prefixd::commands
