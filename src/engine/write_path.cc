#include "engine/write_path.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <utility>
#include <variant>
#include <vector>

#include "engine/change_kinds.h"
#include "engine/errors.h"
#include "store/key_entry.h"

namespace prefixd::commands {
namespace {

// Records that changed something, applied by this thread (WritePath::ChangesAppliedHere); a
// server-side deletion leaves it as it was (ServerDeletion).
thread_local uint64_t changes_applied_here = 0;

// The stores of database `db` as the mutation path applies to them.
persist::Stores StoresOf(Engine& engine, store::Database& db) {
  return persist::Stores{db.state, &db.vectors,
                         static_cast<uint64_t>(engine.settings().Int(Setting::kVstoreMaxSessions)),
                         &db.keys, &db.prefixes};
}

// The disk tier (docs/cache-design.md): once a record is in the log, where its values sit in it
// is recorded in the store of the record's database (the store object, wherever SWAPDB moves
// it), so they may leave memory once that is durable. One function per Placement.

// Rows name the session they were written to by its index (a session created again has another).
persist::Placed PlacedRows(store::VectorStore& vectors, const persist::VStore& rows) {
  const auto info = vectors.Describe(rows.sid);
  if (!info) return {};
  return
      [&vectors, sid = rows.sid, index = info->index, layer = rows.layer, start = rows.start,
       count = rows.rows](const std::shared_ptr<const store::ColdFile>& file, uint64_t payload_at) {
        vectors.Place(sid, index, layer, start, count, file,
                      payload_at + persist::VStoreRowsOffset(sid));
      };
}

persist::Placed PlacedLayers(store::StateStore& state, const persist::SsmPut& put) {
  struct Where {
    uint32_t layer;
    const uint8_t* data;
    uint64_t offset;
  };
  std::vector<Where> where;
  const std::vector<uint64_t> offsets = persist::SsmPutValueOffsets(put);
  for (size_t i = 0; i < put.layers.size(); ++i) {
    where.push_back(Where{put.layers[i].first, put.layers[i].second.data(), offsets[i]});
  }
  return [&state, sid = put.sid, where = std::move(where)](
             const std::shared_ptr<const store::ColdFile>& file, uint64_t payload_at) {
    for (const Where& w : where) state.Place(sid, w.layer, w.data, file, payload_at + w.offset);
  };
}

// Whether a string write may hold a value to place: a value kept in its entry has no place to
// record (the common, small SET asks nothing more).
bool MayPlaceStrings(const persist::StringSet& set) {
  return set.value.size() >= store::KeyEntry::kInlineValueBelow;
}
bool MayPlaceStrings(const persist::StringMultiSet&) { return true; }

// A string's large value is recorded with its key, if the key still holds that buffer
// (docs/cache-design.md, "Strings in the disk tier").
persist::Placed PlacedStrings(store::Keyspace& keys, const persist::Mutation& m) {
  auto where = persist::StringValueOffsets(m, store::KeyEntry::kInlineValueBelow);
  if (where.empty()) return {};
  return [&keys, where = std::move(where)](const std::shared_ptr<const store::ColdFile>& file,
                                           uint64_t payload_at) {
    for (const persist::StringValueAt& w : where) {
      keys.PlaceString(w.key, w.data, file, payload_at + w.offset);
    }
  };
}

persist::Placed PlacedBy(store::Database& database, const persist::Mutation& m) {
  return std::visit(
      [&](const auto& r) -> persist::Placed {
        constexpr Placement placement = kKindOf<decltype(r)>.placement;
        if constexpr (placement == Placement::kNone) {
          return {};
        } else if constexpr (placement == Placement::kVStoreRows) {
          return PlacedRows(database.vectors, r);
        } else if constexpr (placement == Placement::kSsmLayers) {
          return PlacedLayers(database.state, r);
        } else {
          static_assert(placement == Placement::kStrings);
          return MayPlaceStrings(r) ? PlacedStrings(database.keys, m) : persist::Placed{};
        }
      },
      m);
}

// Changes as Redis counts them: each key of an MSET.
uint64_t ChangesIn(const persist::Mutation& m) {
  return std::visit(
      [](const auto& r) -> uint64_t {
        if constexpr (kKindOf<decltype(r)>.reach == Reach::kEntries) {
          return r.entries.size();
        } else {
          return 1;
        }
      },
      m);
}

// What a record reaching whole databases does beyond its own database's stores: SWAPDB exchanges
// the two, FLUSHALL (one record) empties every other.
void ApplyBeyondItsDatabase(Engine& engine, size_t db, const persist::Mutation& m) {
  std::visit(
      [&](const auto& r) {
        constexpr Reach reach = kKindOf<decltype(r)>.reach;
        if constexpr (reach == Reach::kTwoDatabases) {
          engine.databases().Swap(r.a, r.b);
        } else if constexpr (reach == Reach::kAllDatabases) {
          engine.databases().ForEach([&](size_t index, store::Database& other) {
            if (index != db) persist::Apply(m, StoresOf(engine, other), {});
          });
        }
      },
      m);
}

}  // namespace

persist::Limits WritePath::Limits() const {
  const Settings& s = engine_.settings();
  static const uint64_t budget = persist::MemoryBudget();
  return persist::Limits{static_cast<uint64_t>(s.Int(Setting::kMaxSidLen)),
                         static_cast<uint64_t>(s.Int(Setting::kVstoreMaxLayers)),
                         static_cast<uint64_t>(s.Int(Setting::kVstoreMaxTokens)),
                         static_cast<uint64_t>(s.Int(Setting::kVstoreMaxDim)), budget};
}

std::string WritePath::Refusal(const persist::Mutation& m) const {
  const persist::Verdict verdict = persist::Check(m, Limits());
  if (verdict.ok) return {};
  std::string name(std::visit([](const auto& r) { return std::string(r.kName); }, m));
  return errors::Refused(verdict.out_of_memory, name, verdict.why);
}

uint64_t WritePath::ChangesAppliedHere() { return changes_applied_here; }

MutationResult WritePath::Apply(size_t db, const persist::Mutation& m,
                                int64_t strings_only_over_live_at_ms) {
  MutationResult result;
  if (result.error = Refusal(m); !result.error.empty()) return result;
  const ChangeKind kind = KindOf(m);
  const bool whole = kind.whole_databases();
  std::shared_lock shared(engine_.mutation_gate(), std::defer_lock);
  std::unique_lock exclusive(engine_.mutation_gate(), std::defer_lock);
  if (whole) {
    exclusive.lock();
  } else {
    shared.lock();
  }
  persist::Durability* durability = engine_.durability();
  store::Database& database = engine_.database(db);
  // The record is encoded before the stores' locks (under the gate); the hook only queues it. It
  // captures one pointer, so std::function holds it without an allocation.
  struct Logged {
    persist::Durability* durability;
    persist::EncodedRecord record;
    persist::Placed placed;
    uint16_t db;
    uint64_t changes;
    uint64_t& lsn;
  };
  std::optional<Logged> logged;
  std::function<void()> append;
  if (durability != nullptr) {
    logged.emplace(Logged{durability, persist::EncodeRecord(m),
                          kind.placement == Placement::kNone ? nullptr : PlacedBy(database, m),
                          static_cast<uint16_t>(db),
                          kind.reach == Reach::kEntries ? ChangesIn(m) : 1, result.lsn});
    append = [log = &*logged] {
      log->lsn = log->durability->Append(std::move(log->record), log->db, std::move(log->placed),
                                         log->changes);
    };
  }
  // WATCH: nobody watches (one atomic load), or the change breaks the watches it touches.
  const bool watched = engine_.watches().any();
  if (watched && whole) engine_.watches().BeforeChange(engine_.databases(), db, m);
  persist::Stores stores = StoresOf(engine_, database);
  stores.strings_only_over_live_at_ms = strings_only_over_live_at_ms;
  result.outcome = persist::Apply(m, stores, append);
  if (result.outcome->kind == persist::Outcome::Kind::kApplied) {
    ++changes_applied_here;
    // Without the log, SAVE's rdb_changes_since_last_save is counted here, as Append counts it.
    if (persist::LoglessSnapshots* snapshots = engine_.logless_snapshots(); snapshots != nullptr) {
      snapshots->CountChanges(kind.reach == Reach::kEntries ? ChangesIn(m) : 1);
    }
  }
  if (watched && !whole) {
    engine_.watches().AfterChange(engine_.databases(), db, m,
                                  result.outcome->kind != persist::Outcome::Kind::kUnchanged);
  }
  if (whole) ApplyBeyondItsDatabase(engine_, db, m);
  return result;
}

std::optional<persist::Outcome> Mutate(Context& ctx, const persist::Mutation& m,
                                       int64_t strings_only_over_live_at_ms) {
  MutationResult result =
      WritePath(ctx.engine)
          .Apply(static_cast<size_t>(ctx.client.db.load()), m, strings_only_over_live_at_ms);
  if (!result.outcome) {
    ctx.reply.Error(result.error);
    return std::nullopt;
  }
  ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, result.lsn);
  return result.outcome;
}

ServerDeletion::ServerDeletion(Engine& engine)
    : engine_(engine), order_(engine.replication(), true), changes_(changes_applied_here) {}

ServerDeletion::~ServerDeletion() { changes_applied_here = changes_; }

void ServerDeletion::Feed(size_t db, std::string_view key) {
  if (order_.feeding()) engine_.replication().Feed(static_cast<int>(db), {"DEL", key});
}

}  // namespace prefixd::commands
