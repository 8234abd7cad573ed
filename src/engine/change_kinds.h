// ChangeKinds: what the engine knows of each kind of change (persist/mutation.h) beyond its Check
// and Apply: what it reaches (the keys WATCH sees change, or whole databases, which take the
// mutation gate exclusively) and which of its values the disk tier places from the log. One
// KindOf overload per kind and no catch-all, so a kind added to persist::Mutation without its
// line here fails to compile (the static_assert below). Pure data and functions; any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "persist/mutation.h"

namespace prefixd::commands {

// What a change reaches, and so which of its fields name it.
enum class Reach : uint8_t {
  kNothing,       // no key: a snapshot's end marker
  kKey,           // one key, the record's `key`
  kSid,           // one session's key, the record's `sid`
  kNamespace,     // one namespace's key, the record's `ns`
  kRegistration,  // a KV.PREFIX registration `ns` and its sessions `<ns>_pk`, `<ns>_pv`
  kEntries,       // each entry's `key` (MSET: one record, many keys)
  kDatabase,      // the record's whole database (FLUSHDB)
  kAllDatabases,  // every database (FLUSHALL)
  kTwoDatabases,  // databases `a` and `b`, which exchange their contents (SWAPDB)
};

// Which values of a logged change the disk tier records the place of, so they may leave memory
// once durable (docs/cache-design.md, "The disk tier").
enum class Placement : uint8_t {
  kNone,
  kSsmLayers,   // each layer of an SSM put, in its session's state store
  kVStoreRows,  // a V-store rows record's rows, in its session
  kStrings,     // each string value too large to sit in its key's entry
};

struct ChangeKind {
  Reach reach = Reach::kNothing;
  Placement placement = Placement::kNone;

  // FLUSHALL, FLUSHDB, SWAPDB: what they touch depends on whole databases.
  constexpr bool whole_databases() const {
    return reach == Reach::kDatabase || reach == Reach::kAllDatabases ||
           reach == Reach::kTwoDatabases;
  }
};

template <class R>
using KindTag = std::type_identity<R>;

// One line per kind of change.
constexpr ChangeKind KindOf(KindTag<persist::SsmPut>) {
  return {Reach::kSid, Placement::kSsmLayers};
}
constexpr ChangeKind KindOf(KindTag<persist::SsmDropLayer>) { return {Reach::kSid}; }
constexpr ChangeKind KindOf(KindTag<persist::SsmDropSession>) { return {Reach::kSid}; }
constexpr ChangeKind KindOf(KindTag<persist::FlushAll>) { return {Reach::kAllDatabases}; }
constexpr ChangeKind KindOf(KindTag<persist::FlushDb>) { return {Reach::kDatabase}; }
constexpr ChangeKind KindOf(KindTag<persist::SwapDb>) { return {Reach::kTwoDatabases}; }
constexpr ChangeKind KindOf(KindTag<persist::SnapshotEnd>) { return {Reach::kNothing}; }
constexpr ChangeKind KindOf(KindTag<persist::KeyExpire>) { return {Reach::kKey}; }
constexpr ChangeKind KindOf(KindTag<persist::StringSet>) {
  return {Reach::kKey, Placement::kStrings};
}
constexpr ChangeKind KindOf(KindTag<persist::StringMultiSet>) {
  return {Reach::kEntries, Placement::kStrings};
}
constexpr ChangeKind KindOf(KindTag<persist::StringDel>) { return {Reach::kKey}; }
constexpr ChangeKind KindOf(KindTag<persist::SetValue>) { return {Reach::kKey}; }
constexpr ChangeKind KindOf(KindTag<persist::ListValue>) { return {Reach::kKey}; }
constexpr ChangeKind KindOf(KindTag<persist::HashValue>) { return {Reach::kKey}; }
constexpr ChangeKind KindOf(KindTag<persist::ZsetValue>) { return {Reach::kKey}; }
constexpr ChangeKind KindOf(KindTag<persist::StreamValue>) { return {Reach::kKey}; }
constexpr ChangeKind KindOf(KindTag<persist::VCreate>) { return {Reach::kSid}; }
constexpr ChangeKind KindOf(KindTag<persist::VStore>) {
  return {Reach::kSid, Placement::kVStoreRows};
}
constexpr ChangeKind KindOf(KindTag<persist::VDrop>) { return {Reach::kSid}; }
constexpr ChangeKind KindOf(KindTag<persist::KvRegister>) { return {Reach::kRegistration}; }
constexpr ChangeKind KindOf(KindTag<persist::KvPrefix>) { return {Reach::kRegistration}; }
constexpr ChangeKind KindOf(KindTag<persist::KvDrop>) { return {Reach::kRegistration}; }
constexpr ChangeKind KindOf(KindTag<persist::PrefixNamespace>) { return {Reach::kNamespace}; }
constexpr ChangeKind KindOf(KindTag<persist::PrefixBlocks>) { return {Reach::kNamespace}; }
constexpr ChangeKind KindOf(KindTag<persist::PrefixCheckpoints>) { return {Reach::kNamespace}; }
constexpr ChangeKind KindOf(KindTag<persist::PrefixDrop>) { return {Reach::kNamespace}; }
constexpr ChangeKind KindOf(KindTag<persist::PrefixNamespaceDrop>) { return {Reach::kNamespace}; }

// Whether every alternative of variant V has its KindOf.
template <class V>
inline constexpr bool kEveryKindKnown = false;
template <class... R>
inline constexpr bool kEveryKindKnown<std::variant<R...>> = (requires { KindOf(KindTag<R>{}); } &&
                                                             ...);

static_assert(kEveryKindKnown<persist::Mutation>,
              "a kind of change in persist::Mutation has no KindOf in engine/change_kinds.h");

template <class R>
inline constexpr ChangeKind kKindOf = KindOf(KindTag<std::remove_cvref_t<R>>{});

// The kinds of a variant's alternatives, in its order: a record's kind is one load.
template <class V>
struct KindTable;
template <class... R>
struct KindTable<std::variant<R...>> {
  static constexpr std::array<ChangeKind, sizeof...(R)> kinds = {kKindOf<R>...};
};

inline ChangeKind KindOf(const persist::Mutation& m) {
  return KindTable<persist::Mutation>::kinds[m.index()];
}

// Calls visit(std::string_view) with each key change `m` names (none for whole databases).
template <class Visit>
void ForEachNamedKey(const persist::Mutation& m, Visit&& visit) {
  std::visit(
      [&](const auto& r) {
        constexpr Reach reach = kKindOf<decltype(r)>.reach;
        if constexpr (reach == Reach::kKey) {
          visit(std::string_view(r.key));
        } else if constexpr (reach == Reach::kSid) {
          visit(std::string_view(r.sid));
        } else if constexpr (reach == Reach::kNamespace) {
          visit(std::string_view(r.ns));
        } else if constexpr (reach == Reach::kRegistration) {
          visit(std::string_view(r.ns));
          visit(std::string_view(r.ns + "_pk"));
          visit(std::string_view(r.ns + "_pv"));
        } else if constexpr (reach == Reach::kEntries) {
          for (const auto& e : r.entries) visit(std::string_view(e.key));
        } else {
          static_assert(reach == Reach::kNothing || kKindOf<decltype(r)>.whole_databases());
        }
      },
      m);
}

// The keys whose values `m` leaves for the disk tier to place (Placement): where recovery past
// maxmemory looks for what may go cold at once.
std::vector<std::string> KeysPlacedBy(const persist::Mutation& m);

}  // namespace prefixd::commands
