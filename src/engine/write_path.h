// WritePath: the one door through which stored state changes, for a client's command (Mutate) or
// the server itself (active expiry, eviction). A change is a typed record (persist/mutation.h);
// where its bytes land in the log, and what the disk tier records of that, stays behind this
// door. Runs on the thread of whoever changes something: an io thread, the expiry thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/command.h"
#include "engine/engine.h"
#include "persist/mutation.h"

namespace prefixd::commands {

struct MutationResult {
  std::optional<persist::Outcome> outcome;  // nullopt: refused, `error` says why
  std::string error;                        // the error reply's text
  uint64_t lsn = 0;                         // the record's lsn (0: not logged)
};

class WritePath {
 public:
  explicit WritePath(Engine& engine) : engine_(engine) {}

  // Checks, logs and applies `m` to database `db`: refused (nothing logged) when the limits do
  // not admit it; else encoded outside any lock, appended to the log under the store lock that
  // orders it (log order is the order of changes) and applied by persist::Apply, the function
  // replay uses. FLUSHALL, FLUSHDB and SWAPDB hold the mutation gate exclusively, every other
  // change shares it. `strings_only_over_live_at_ms`: persist::Stores' field of that name (0 for
  // every other write).
  MutationResult Apply(size_t db, const persist::Mutation& m,
                       int64_t strings_only_over_live_at_ms = 0);

  // Why the limits refuse `m` (the error reply's text), or empty when they admit it. Apply asks
  // first; a command that must make room before its record (a string write over a key of another
  // type deletes that key by its own record) asks before it changes anything.
  std::string Refusal(const persist::Mutation& m) const;
  // The limits a live change is checked against: the settings now.
  persist::Limits Limits() const;

  // Records that changed something, applied by this thread so far: a command is propagated to
  // replicas when this moved while it ran (Redis's server.dirty).
  static uint64_t ChangesAppliedHere();

 private:
  Engine& engine_;
};

// WritePath::Apply for a command, in the client's database: nullopt (with the error queued as the
// reply) when refused; the reply waits until the record is durable.
std::optional<persist::Outcome> Mutate(Context& ctx, const persist::Mutation& m,
                                       int64_t strings_only_over_live_at_ms = 0);

// A deletion the server makes by itself (an expired key, an evicted one): fed to replicas as
// `DEL key` in its place in the stream, and not counted as a change of the command it happens
// in. Construct before any key lock; Feed once the key is gone.
class ServerDeletion {
 public:
  explicit ServerDeletion(Engine& engine);
  ~ServerDeletion();
  ServerDeletion(const ServerDeletion&) = delete;
  ServerDeletion& operator=(const ServerDeletion&) = delete;
  void Feed(size_t db, std::string_view key);

 private:
  Engine& engine_;
  Replication::OrderHold order_;
  uint64_t changes_;
};

}  // namespace prefixd::commands
