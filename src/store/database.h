// Databases: the numbered keyspaces SELECT chooses (Redis's `databases`), each with its own
// stores and key directory, so every key type — SSM sessions, V-store sessions, KV.PREFIX
// registrations, strings, prefix-index namespaces — lives in exactly one database. A database is
// created on first use and lives as long as the server; an unused index costs one pointer.
// Thread-safe: any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "store/keyspace.h"
#include "store/prefix_index.h"
#include "store/state_store.h"
#include "store/vector_store.h"

namespace prefixd::store {

struct Database {
  // Small SSM sessions live in their keys' entries (StateStore::KeepSmallSessionsIn).
  Database() { state.KeepSmallSessionsIn(&keys); }
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  StateStore state;
  VectorStore vectors;
  Keyspace keys;
  PrefixStore prefixes;
};

class Databases {
 public:
  // The most databases a server may have: the log records a record's database in 16 bits.
  static constexpr size_t kMaxCount = 65536;

  explicit Databases(size_t count);
  Databases(const Databases&) = delete;
  Databases& operator=(const Databases&) = delete;
  ~Databases();

  size_t count() const { return count_; }
  // Database `index` (below count()), created on first use.
  Database& At(size_t index);
  // Database `index` if it was ever used, else nullptr.
  Database* Existing(size_t index) const {
    return index < count_ ? slots_[index].load(std::memory_order_acquire) : nullptr;
  }
  // Databases `a` and `b` (below count()) exchange places: whoever looks either index up from
  // now on finds the other's contents. The caller keeps writers out.
  void Swap(size_t a, size_t b);
  // Every database in use, in index order.
  void ForEach(const std::function<void(size_t index, Database& db)>& visit) const;

 private:
  size_t count_;
  std::unique_ptr<std::atomic<Database*>[]> slots_;
  std::mutex create_mu_;
};

}  // namespace prefixd::store
