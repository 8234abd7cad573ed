// Lending values to a same-host client (docs/shm-transport.md): whether a connection may use the
// shared path, and a value's answer as its place in an arena under a lease of the connection, or
// as its bytes. Used by every command that answers places (SHM.GET, SSM.PREFIX.SHMFETCH,
// SSM.PREFIX.CKPT.SHMFETCH, V.SHMFETCH, KV.PREFIX.SHMBFETCH, KV.PREFIX.SHMLFETCH), on the
// handler's io thread.
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

// A piece's answer: where it lies under the call's lease (`place` set, `lease` its id), or its
// bytes (`place` empty: not in an arena). A value adopted from a client's memfd (SHM.SET) lies in
// a file of its own: `in_file()`, `place->arena` unused and `place->offset` the value's offset in
// that file and `place->generation` its inode number; the reply names arena -1 and passes a
// read-only descriptor of the file with it (SCM_RIGHTS). `alone`: no other piece shares the lease.
struct ShmLent {
  std::optional<shm::Place> place;
  uint64_t lease = 0;
  bool alone = false;
  // The adopted file the value lies in (then `place` is its offset and inode), else -1.
  int file_fd = -1;
  bool in_file() const { return file_fd >= 0; }
};

// One lease for the whole answer: every value that lies in an arena (null entries are skipped)
// gets its place, under one lease of the connection that holds all their allocations, so
// shm-max-leases counts calls. `key` is what the values were read through (a string's key, a
// session, a namespace) in the client's database: while the lease holds bytes the key holds too,
// eviction passes over it. Past the connection's cap nothing is leased, the error is queued and
// false returned.
bool ShmLendAll(Context& ctx, std::string_view key, std::span<const Bytes* const> values,
                std::vector<ShmLent>& lent);
// `[arena, offset, length, generation, checksum|nil, lease]`, or the bytes when not lent (or
// when a file's descriptor cannot be duplicated: a lease of that piece alone is then given back).
// `checksum`: the value's XXH3-64 as 16 hex digits in the checksum slot (the server reads every
// byte), else nil.
void ReplyShmLent(Context& ctx, const Bytes& value, const ShmLent& lent, bool checksum);

// A trailing CHECKSUM word among args[first, end): when there is one, `end` is moved before it
// and true returned. For the piece forms, whose other arguments are never that word where it can
// stand (numbers, or FMT NATIVE before it).
bool TakeChecksumOption(const Context& ctx, size_t first, size_t& end);

}  // namespace prefixd::commands
