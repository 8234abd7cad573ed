#include "persist/store_set.h"

#include <algorithm>
#include <string>

namespace prefixd::persist {
namespace {

Stores StoresOf(store::Database& d) { return Stores{d.state, &d.vectors, 0, &d.keys, &d.prefixes}; }

}  // namespace

StoreSet::StoreSet(const Stores& single) : single_(single) {
  single_->max_sessions = 0;  // recovery applies whatever was logged
  single_->strings_only_over_live_at_ms = 0;
}

Status StoreSet::CheckDatabase(uint16_t db) const {
  if (databases_ == nullptr) {
    if (db != 0) {
      return Status::Corruption("it names database " + std::to_string(db) +
                                " of a single database");
    }
  } else if (db >= databases_->count()) {
    return Status::Corruption("it names database " + std::to_string(db) + ", past the " +
                              std::to_string(databases_->count()) +
                              " the `databases` setting allows");
  }
  return {};
}

Stores StoreSet::Of(uint16_t db) const {
  return databases_ == nullptr ? *single_ : StoresOf(databases_->At(db));
}

void StoreSet::ForEach(const std::function<void(uint16_t db, const Stores& stores)>& visit) const {
  if (databases_ == nullptr) return visit(0, *single_);
  databases_->ForEach(
      [&](size_t index, store::Database& d) { visit(static_cast<uint16_t>(index), StoresOf(d)); });
}

Status StoreSet::Apply(const Mutation& m, uint16_t db, Outcome* outcome) const {
  PREFIXD_RETURN_IF_ERROR(CheckDatabase(db));
  Outcome ignored;
  if (outcome == nullptr) outcome = &ignored;
  if (databases_ == nullptr) {
    if (const auto* swap = std::get_if<SwapDb>(&m); swap != nullptr && (swap->a | swap->b) != 0) {
      return Status::Corruption("it swaps databases " + std::to_string(swap->a) + " and " +
                                std::to_string(swap->b) + " of a single database");
    }
    *outcome = persist::Apply(m, *single_, {});
    return {};
  }
  if (const auto* swap = std::get_if<SwapDb>(&m)) {
    if (std::max(swap->a, swap->b) >= databases_->count()) {
      return Status::Corruption("it swaps database " + std::to_string(std::max(swap->a, swap->b)) +
                                ", past the " + std::to_string(databases_->count()) +
                                " the `databases` setting allows");
    }
    databases_->Swap(swap->a, swap->b);
    return {};
  }
  *outcome = persist::Apply(m, StoresOf(databases_->At(db)), {});
  if (std::holds_alternative<FlushAll>(m)) {  // one record empties every database
    databases_->ForEach([&](size_t index, store::Database& other) {
      if (index != db) persist::Apply(m, StoresOf(other), {});
    });
  }
  return {};
}

uint64_t StoreSet::LiveBytes() const {
  uint64_t live = 0;
  ForEach([&](uint16_t, const Stores& s) {
    const store::StoreStats stats = s.state.Stats();
    live += stats.payload_bytes + stats.cold_bytes +
            (s.vectors != nullptr ? s.vectors->Stats().payload_bytes : 0);
  });
  return live;
}

}  // namespace prefixd::persist
