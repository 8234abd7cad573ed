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

void Databases::ForEach(const std::function<void(size_t, Database&)>& visit) const {
  for (size_t i = 0; i < count_; ++i) {
    if (Database* db = Existing(i)) visit(i, *db);
  }
}

}  // namespace prefixd::store
