#include "engine/watches.h"

#include <algorithm>
#include <type_traits>
#include <variant>

#include "common/clock.h"
#include "engine/change_kinds.h"
#include "engine/session.h"

namespace prefixd::commands {
namespace {

enum class KeyState { kMissing, kLive, kExpired };

KeyState StateOf(store::Databases& databases, size_t db, std::string_view key) {
  if (db >= databases.count()) return KeyState::kMissing;
  auto info = databases.At(db).keys.Find(key);
  if (!info) return KeyState::kMissing;
  return info->expire_at_ms != 0 && info->expire_at_ms <= NowMs() ? KeyState::kExpired
                                                                  : KeyState::kLive;
}

}  // namespace

void Watches::Watch(Session& session, size_t db, std::string_view key, bool stale) {
  std::lock_guard lock(mu_);
  SessionWatches& mine = by_session_[&session];
  for (const WatchedKey& w : mine.keys) {
    if (w.db == db && w.key == key) return;
  }
  mine.keys.push_back(WatchedKey{db, std::string(key)});
  by_db_[db][std::string(key)].push_back(Watcher{&session, stale});
  session.watching = true;
  watched_keys_.fetch_add(1, std::memory_order_release);
}

void Watches::UnwatchAll(Session& session) {
  if (!session.watching) return;
  session.watching = false;
  std::lock_guard lock(mu_);
  auto it = by_session_.find(&session);
  if (it == by_session_.end()) return;
  for (const WatchedKey& w : it->second.keys) {
    KeyWatchers& keys = by_db_[w.db];
    auto k = keys.find(w.key);
    if (k == keys.end()) continue;
    std::erase_if(k->second, [&](const Watcher& x) { return x.session == &session; });
    if (k->second.empty()) keys.erase(k);
    watched_keys_.fetch_sub(1, std::memory_order_release);
  }
  by_session_.erase(it);
}

bool Watches::Broken(store::Databases& databases, const Session& session) {
  if (!session.watching) return false;
  std::lock_guard lock(mu_);
  auto it = by_session_.find(&session);
  if (it == by_session_.end()) return false;
  if (it->second.broken) return true;
  // A key live when watched that has expired since, even if nothing deleted it yet.
  for (const WatchedKey& w : it->second.keys) {
    const std::vector<Watcher>& watchers = by_db_[w.db][w.key];
    auto me = std::find_if(watchers.begin(), watchers.end(),
                           [&](const Watcher& x) { return x.session == &session; });
    if (me != watchers.end() && !me->stale &&
        StateOf(databases, w.db, w.key) == KeyState::kExpired) {
      return true;
    }
  }
  return false;
}

void Watches::TouchLocked(store::Databases& databases, size_t db, std::string_view key) {
  auto d = by_db_.find(db);
  if (d == by_db_.end()) return;
  auto k = d->second.find(std::string(key));
  if (k == d->second.end()) return;
  for (Watcher& w : k->second) {
    // A key expired when watched and deleted now (its lazy or active expiry): no logical
    // change, and from now on it is a missing key like any other.
    if (w.stale && StateOf(databases, db, key) == KeyState::kMissing) {
      w.stale = false;
      continue;
    }
    by_session_[w.session].broken = true;
  }
}

void Watches::TouchDatabaseLocked(store::Databases& databases, size_t emptied,
                                  int64_t replaced_with) {
  auto d = by_db_.find(emptied);
  if (d == by_db_.end()) return;
  for (auto& [key, watchers] : d->second) {
    const KeyState before = StateOf(databases, emptied, key);
    const KeyState after = replaced_with < 0
                               ? KeyState::kMissing
                               : StateOf(databases, static_cast<size_t>(replaced_with), key);
    if (before == KeyState::kMissing && after == KeyState::kMissing) continue;
    for (Watcher& w : watchers) {
      if (w.stale) {
        // Expired before and gone or still expired after: no logical change.
        if (after == KeyState::kMissing) {
          w.stale = false;
          continue;
        }
        if (after == KeyState::kExpired) continue;
      } else if (before == KeyState::kMissing && after == KeyState::kExpired) {
        // Nothing replaced by an expired key: still nothing, logically.
        w.stale = true;
        continue;
      }
      by_session_[w.session].broken = true;
    }
  }
}

void Watches::BeforeChange(store::Databases& databases, size_t db, const persist::Mutation& m) {
  std::lock_guard lock(mu_);
  std::visit(
      [&](const auto& r) {
        constexpr Reach reach = kKindOf<decltype(r)>.reach;
        if constexpr (reach == Reach::kAllDatabases) {
          for (size_t i = 0; i < databases.count(); ++i) TouchDatabaseLocked(databases, i, -1);
        } else if constexpr (reach == Reach::kDatabase) {
          TouchDatabaseLocked(databases, db, -1);
        } else if constexpr (reach == Reach::kTwoDatabases) {
          if (r.a == r.b) return;
          TouchDatabaseLocked(databases, r.a, r.b);
          TouchDatabaseLocked(databases, r.b, r.a);
        }
      },
      m);
}

void Watches::AfterChange(store::Databases& databases, size_t db, const persist::Mutation& m,
                          bool applied) {
  if (!applied) return;
  std::lock_guard lock(mu_);
  ForEachNamedKey(m, [&](std::string_view key) { TouchLocked(databases, db, key); });
}

}  // namespace prefixd::commands
