// Watches: the keys sessions named with WATCH, and which sessions' watches a change has broken
// (EXEC then answers a null array). Changes are reported by the write path (engine/write_path.h)
// from any thread; when nobody watches, that costs one atomic load. Thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "persist/mutation.h"
#include "store/database.h"

namespace prefixd::commands {

struct Session;  // engine/session.h

class Watches {
 public:
  // Whether any key is watched: the mutation path's test before it reports a change.
  bool any() const { return watched_keys_.load(std::memory_order_acquire) != 0; }

  // WATCH `key` of database `db` for `session`. A key that exists but has expired (stale) is
  // watched as such: its deletion is then no change, as in Redis.
  void Watch(Session& session, size_t db, std::string_view key, bool stale);
  // UNWATCH, EXEC, DISCARD, RESET, disconnect: drops every watch of `session`.
  void UnwatchAll(Session& session);
  // At EXEC: whether a key `session` watches was changed since, or has expired since (it was
  // live when watched). `databases` are the engine's, looked in for the keys' states.
  bool Broken(store::Databases& databases, const Session& session);

  // Reports change `m` to database `db`. Key changes are reported after they are applied
  // (`applied`: false when the change found nothing to do); FLUSHALL, FLUSHDB and SWAPDB before,
  // under the exclusive mutation gate, since what they touch depends on what the databases held.
  void BeforeChange(store::Databases& databases, size_t db, const persist::Mutation& m);
  void AfterChange(store::Databases& databases, size_t db, const persist::Mutation& m,
                   bool applied);

 private:
  struct Watcher {
    const Session* session;
    bool stale;
  };
  struct WatchedKey {
    size_t db;
    std::string key;
  };
  struct SessionWatches {
    bool broken = false;
    std::vector<WatchedKey> keys;
  };
  // A key's watchers, by database.
  using KeyWatchers = std::unordered_map<std::string, std::vector<Watcher>>;

  // A key changed: breaks its watchers' transactions. Under mu_.
  void TouchLocked(store::Databases& databases, size_t db, std::string_view key);
  // Database `emptied` loses its contents, replaced by those of `replaced_with` (SWAPDB) or by
  // nothing (-1: FLUSHDB, FLUSHALL). Under mu_.
  void TouchDatabaseLocked(store::Databases& databases, size_t emptied, int64_t replaced_with);

  std::mutex mu_;
  std::unordered_map<size_t, KeyWatchers> by_db_;
  std::unordered_map<const Session*, SessionWatches> by_session_;
  std::atomic<size_t> watched_keys_{0};
};

}  // namespace prefixd::commands
