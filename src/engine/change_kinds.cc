#include "engine/change_kinds.h"

#include "store/key_entry.h"

namespace prefixd::commands {

std::vector<std::string> KeysPlacedBy(const persist::Mutation& m) {
  std::vector<std::string> keys;
  std::visit(
      [&](const auto& r) {
        constexpr Placement placement = kKindOf<decltype(r)>.placement;
        if constexpr (placement == Placement::kSsmLayers || placement == Placement::kVStoreRows) {
          keys.push_back(r.sid);
        } else if constexpr (placement == Placement::kStrings) {
          for (const persist::StringValueAt& w :
               persist::StringValueOffsets(m, store::KeyEntry::kInlineValueBelow)) {
            keys.emplace_back(w.key);
          }
        }
      },
      m);
  return keys;
}

}  // namespace prefixd::commands
