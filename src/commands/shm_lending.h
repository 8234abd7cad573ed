// Lending values to a same-host client (docs/shm-transport.md): whether a connection may use the
// shared path, and a value's answer as its place in an arena under a lease of the connection, or
// as its bytes. Used by every command that answers places (SHM.GET, SSM.PREFIX.SHMFETCH,
// V.SHMFETCH, KV.PREFIX.SHMBFETCH, KV.PREFIX.SHMLFETCH), on the handler's io thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "common/shm_arena.h"
#include "engine/command.h"

namespace prefixd::commands {

// Whether the connection may use SHM.* at all (the unix socket, arenas on); the error queued
// when not.
bool ShmServed(Context& ctx);
// ShmServed, and SHM.HELLO has passed this connection's credentials.
bool ShmGreeted(Context& ctx);

// A value's answer: where it lies under a new lease (`place` set, `lease` its id, 0 when the cap
// refused it), or its bytes (`place` empty: not in an arena). A value adopted from a client's
// memfd (SHM.SET) lies in a file of its own: `in_file`, `place->arena` unused and
// `place->offset` the value's offset in that file and `place->generation` its inode number; the
// reply names arena -1 and passes a read-only descriptor of the file with it (SCM_RIGHTS).
struct ShmLent {
  std::optional<shm::Place> place;
  uint64_t lease = 0;
  bool in_file = false;
};

// `key` is what the value was read through (a string's key, a session, a namespace) in the
// client's database: while the lease holds bytes the key holds too, eviction passes over it.
ShmLent ShmLend(Context& ctx, std::string_view key, const Bytes& value);
// Leases each value that lies in an arena (null entries are skipped); all or none: past the
// connection's cap the leases taken are given back, the error is queued and false returned.
bool ShmLendAll(Context& ctx, std::string_view key, std::span<const Bytes* const> values,
                std::vector<ShmLent>& lent);
// `[arena, offset, length, generation, checksum|nil, lease]`, or the bytes when not lent (or
// when a file's descriptor cannot be duplicated: its lease is then given back).
void ReplyShmLent(Context& ctx, const Bytes& value, const ShmLent& lent, bool checksum);

}  // namespace prefixd::commands
