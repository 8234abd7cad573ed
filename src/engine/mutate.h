// Mutate: the one way a handler changes stored state. The record is checked against the limits
// before anything is logged, encoded outside any lock, appended to the durability log under the
// store lock that orders the change (so log order is the order of changes) and applied by
// persist::Apply, the same function replay uses; the reply then waits until the record is
// durable. Called on the handler's io thread.
#pragma once

#include <algorithm>
#include <functional>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <variant>
#include <vector>

#include "engine/command.h"
#include "engine/engine.h"
#include "persist/mutation.h"

namespace prefixd::commands {

// The limits a live change is checked against: the settings now.
inline persist::Limits LiveLimits(const Engine& e) {
  const Settings& s = e.settings();
  static const uint64_t budget = persist::MemoryBudget();
  return persist::Limits{static_cast<uint64_t>(s.Int(Setting::kMaxSidLen)),
                         static_cast<uint64_t>(s.Int(Setting::kVstoreMaxLayers)),
                         static_cast<uint64_t>(s.Int(Setting::kVstoreMaxTokens)),
                         static_cast<uint64_t>(s.Int(Setting::kVstoreMaxDim)), budget};
}

struct MutationResult {
  std::optional<persist::Outcome> outcome;  // nullopt: refused, `error` says why
  std::string error;                        // the error reply's text
  uint64_t lsn = 0;                         // the record's lsn (0: not logged)
};

// The stores of database `db` as the mutation path applies to them.
inline persist::Stores StoresOf(Engine& engine, store::Database& db) {
  return persist::Stores{db.state, &db.vectors,
                         static_cast<uint64_t>(engine.settings().Int(Setting::kVstoreMaxSessions)),
                         &db.keys, &db.prefixes};
}

// A string set's (or multi set's) large values: where each landed in the log is recorded with
// its key, if the key still holds that buffer (docs/cache-design.md, "Strings in the disk tier").
inline persist::Placed PlacedStrings(store::Keyspace& keys, const persist::Mutation& m) {
  auto where = persist::StringValueOffsets(m, store::KeyEntry::kInlineValueBelow);
  if (where.empty()) return {};
  return [&keys, where = std::move(where)](const std::shared_ptr<const store::ColdFile>& file,
                                           uint64_t payload_at) {
    for (const persist::StringValueAt& w : where) {
      keys.PlaceString(w.key, w.data, file, payload_at + w.offset);
    }
  };
}

// The disk tier: once an SSM put's or V-store rows record is in the log, where its values sit
// in it is recorded in the store of the record's database (the store object, wherever SWAPDB
// moves it), so the session may leave memory once that is durable (docs/cache-design.md).
// Rows name the session they were written to by its index (a session created again has another).
// Empty for any other record.
inline persist::Placed PlacedBy(store::Database& database, const persist::Mutation& m) {
  if (const auto* rows = std::get_if<persist::VStore>(&m); rows != nullptr) {
    const auto info = database.vectors.Describe(rows->sid);
    if (!info) return {};
    return [&vectors = database.vectors, sid = rows->sid, index = info->index, layer = rows->layer,
            start = rows->start, count = rows->rows](
               const std::shared_ptr<const store::ColdFile>& file, uint64_t payload_at) {
      vectors.Place(sid, index, layer, start, count, file,
                    payload_at + persist::VStoreRowsOffset(sid));
    };
  }
  if (const auto* set = std::get_if<persist::StringSet>(&m)) {
    // A value kept in its entry has no place to record (the common, small write asks nothing).
    if (set->value.size() < store::KeyEntry::kInlineValueBelow) return {};
    return PlacedStrings(database.keys, m);
  }
  if (std::holds_alternative<persist::StringMultiSet>(m)) return PlacedStrings(database.keys, m);
  store::StateStore& state = database.state;
  const auto* put = std::get_if<persist::SsmPut>(&m);
  if (put == nullptr) return {};
  struct Where {
    uint32_t layer;
    const uint8_t* data;
    uint64_t offset;
  };
  std::vector<Where> where;
  const std::vector<uint64_t> offsets = persist::SsmPutValueOffsets(*put);
  for (size_t i = 0; i < put->layers.size(); ++i) {
    where.push_back(Where{put->layers[i].first, put->layers[i].second.data(), offsets[i]});
  }
  return [&state, sid = put->sid, where = std::move(where)](
             const std::shared_ptr<const store::ColdFile>& file, uint64_t payload_at) {
    for (const Where& w : where) state.Place(sid, w.layer, w.data, file, payload_at + w.offset);
  };
}

// Checks, logs and applies `m` to database `db` for any caller, a client's command or the server
// itself (active expiry, eviction). The record carries its database in the log. FLUSHALL (every
// database) and FLUSHDB hold the mutation gate exclusively, so they can append their record and
// clear the stores shard by shard with no write landing in between; every other change holds it
// shared.
// Why the limits refuse `m` (the error reply's text), or empty when they admit it. MutateEngine
// asks first; a command that must make room before its record (a string write over a key of
// another type deletes that key by its own record) asks before it changes anything.
inline std::string Refusal(Engine& engine, const persist::Mutation& m) {
  const persist::Verdict verdict = persist::Check(m, LiveLimits(engine));
  if (verdict.ok) return {};
  std::string name(std::visit([](const auto& r) { return std::string(r.kName); }, m));
  return (verdict.out_of_memory ? "OOM " : "ERR ") + name + " refused: " + verdict.why;
}

// Records that changed something, applied by this thread: a command is propagated to replicas
// when this moved while it ran (Redis's server.dirty); a server-side deletion (expiry, eviction)
// feeds its own DEL and leaves it as it was (Replication's ServerChange).
inline thread_local uint64_t changes_applied_here = 0;

// `strings_only_over_live_at_ms`: persist::Stores' field of that name (0 for every other write).
inline MutationResult MutateEngine(Engine& engine, size_t db, const persist::Mutation& m,
                                   int64_t strings_only_over_live_at_ms = 0) {
  MutationResult result;
  if (result.error = Refusal(engine, m); !result.error.empty()) return result;
  const bool flush_all = std::holds_alternative<persist::FlushAll>(m);
  std::shared_lock shared(engine.mutation_gate(), std::defer_lock);
  std::unique_lock exclusive(engine.mutation_gate(), std::defer_lock);
  const auto* swap = std::get_if<persist::SwapDb>(&m);
  if (flush_all || swap != nullptr || std::holds_alternative<persist::FlushDb>(m)) {
    exclusive.lock();
  } else {
    shared.lock();
  }
  persist::Durability* durability = engine.durability();
  store::Database& database = engine.database(db);
  // The record is encoded before the stores' locks (under the gate); the hook only queues it. It
  // captures one pointer, so std::function holds it without an allocation.
  struct Logged {
    persist::Durability* durability;
    persist::EncodedRecord record;
    persist::Placed placed;
    uint16_t db;
    uint64_t changes;  // as Redis counts them: each key of an MSET
    uint64_t& lsn;
  };
  std::optional<Logged> logged;
  std::function<void()> append;
  if (durability != nullptr) {
    const auto* multi = std::get_if<persist::StringMultiSet>(&m);
    logged.emplace(Logged{durability, persist::EncodeRecord(m), PlacedBy(database, m),
                          static_cast<uint16_t>(db), multi != nullptr ? multi->entries.size() : 1,
                          result.lsn});
    append = [log = &*logged] {
      log->lsn = log->durability->Append(std::move(log->record), log->db, std::move(log->placed),
                                         log->changes);
    };
  }
  // WATCH: nobody watches (one atomic load), or the change breaks the watches it touches.
  const bool watched = engine.watches().any();
  const bool whole = flush_all || swap != nullptr || std::holds_alternative<persist::FlushDb>(m);
  if (watched && whole) engine.watches().BeforeChange(engine.databases(), db, m);
  persist::Stores stores = StoresOf(engine, database);
  stores.strings_only_over_live_at_ms = strings_only_over_live_at_ms;
  result.outcome = persist::Apply(m, stores, append);
  if (result.outcome->kind == persist::Outcome::Kind::kApplied) ++changes_applied_here;
  if (watched && !whole) {
    engine.watches().AfterChange(engine.databases(), db, m,
                                 result.outcome->kind != persist::Outcome::Kind::kUnchanged);
  }
  if (swap != nullptr) engine.databases().Swap(swap->a, swap->b);
  if (flush_all) {  // one record empties every database
    engine.databases().ForEach([&](size_t index, store::Database& other) {
      if (index != db) persist::Apply(m, StoresOf(engine, other), {});
    });
  }
  return result;
}

// A deletion the server makes by itself (an expired key, an evicted one): fed to replicas as
// `DEL key` in its place in the stream, and not counted as a change of the command it happens
// in. Construct before any key lock; Feed once the key is gone.
class ServerDeletion {
 public:
  explicit ServerDeletion(Engine& engine)
      : engine_(engine), order_(engine.replication(), true), changes_(changes_applied_here) {}
  ~ServerDeletion() { changes_applied_here = changes_; }
  ServerDeletion(const ServerDeletion&) = delete;
  ServerDeletion& operator=(const ServerDeletion&) = delete;
  void Feed(size_t db, std::string_view key) {
    if (order_.feeding()) engine_.replication().Feed(static_cast<int>(db), {"DEL", key});
  }

 private:
  Engine& engine_;
  Replication::OrderHold order_;
  uint64_t changes_;
};

// MutateEngine for a command: nullopt (with the error queued as the reply) when the check
// refuses it; the reply waits until the record is durable.
inline std::optional<persist::Outcome> Mutate(Context& ctx, const persist::Mutation& m,
                                              int64_t strings_only_over_live_at_ms = 0) {
  MutationResult result = MutateEngine(ctx.engine, static_cast<size_t>(ctx.client.db.load()), m,
                                       strings_only_over_live_at_ms);
  if (!result.outcome) {
    ctx.reply.Error(result.error);
    return std::nullopt;
  }
  ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, result.lsn);
  return result.outcome;
}

}  // namespace prefixd::commands
