#include "store/database.h"

namespace prefixd::store {

Databases::Databases(size_t count)
    : count_(count), slots_(std::make_unique<std::atomic<Database*>[]>(count)) {
  for (size_t i = 0; i < count_; ++i) slots_[i].store(nullptr, std::memory_order_relaxed);
}

Databases::~Databases() {
  for (size_t i = 0; i < count_; ++i) delete slots_[i].load(std::memory_order_relaxed);
}

Database& Databases::At(size_t index) {
  if (Database* db = Existing(index)) return *db;
  std::lock_guard lock(create_mu_);
  if (Database* db = Existing(index)) return *db;
  auto* created = new Database();
  slots_[index].store(created, std::memory_order_release);
  return *created;
}

void Databases::Swap(size_t a, size_t b) {
  At(a), At(b);
  std::lock_guard lock(create_mu_);
  Database* first = slots_[a].load(std::memory_order_acquire);
  slots_[a].store(slots_[b].load(std::memory_order_acquire), std::memory_order_release);
  slots_[b].store(first, std::memory_order_release);
}

void Databases::ForEach(const std::function<void(size_t, Database&)>& visit) const {
  for (size_t i = 0; i < count_; ++i) {
    if (Database* db = Existing(i)) visit(i, *db);
  }
}

}  // namespace prefixd::store
