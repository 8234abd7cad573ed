// StoreSet: the stores one Durability recovers into, logs for and snapshots, given once: a
// server's numbered databases (each record's header names its database), or one database's
// stores alone (tests, tools), where a record naming another database is refused. It holds
// pointers only; the stores guard themselves, so any thread may use it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "persist/mutation.h"
#include "prefixd/status.h"
#include "store/database.h"

namespace prefixd::persist {

class StoreSet {
 public:
  // Every database of a server (database 0 included).
  explicit StoreSet(store::Databases& databases) : databases_(&databases) {}
  // One database's stores: `state` always, the others where given (max_sessions is unused).
  explicit StoreSet(const Stores& single);

  // An error when `db` is past the `databases` setting (or not 0 for a single database).
  Status CheckDatabase(uint16_t db) const;
  // The stores of database `db`, which CheckDatabase accepted (created on first use).
  Stores Of(uint16_t db) const;
  // Each database in use, in index order.
  void ForEach(const std::function<void(uint16_t db, const Stores& stores)>& visit) const;

  // Applies a checked record to the database `db` (its header's): a flush of all empties every
  // database, a swap exchanges two. An error when it names a database past the setting.
  Status Apply(const Mutation& m, uint16_t db, Outcome* outcome = nullptr) const;

  // The stored values' bytes over every database, memory and disk tier (automatic rewrite).
  uint64_t LiveBytes() const;

 private:
  store::Databases* databases_ = nullptr;
  std::optional<Stores> single_;
};

}  // namespace prefixd::persist
