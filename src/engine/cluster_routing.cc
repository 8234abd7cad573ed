#include "engine/cluster_routing.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/cluster_state.h"
#include "common/key_slot.h"
#include "engine/errors.h"
#include "engine/session.h"

namespace prefixd::commands {
namespace {

using cluster::kNoNode;
using cluster::Topology;

std::string Redirect(std::string_view kind, uint16_t slot, const cluster::Node& node) {
  return std::string(kind) + ' ' + std::to_string(slot) + ' ' + node.Address();
}

}  // namespace

bool ClusterOk(const Engine& engine, const cluster::Topology& t) {
  return !engine.settings().Bool(Setting::kClusterRequireFullCoverage) ||
         t.assigned_slots == kClusterSlots;
}

std::string ClusterRedirect(Engine& engine, const server::ClientState& client,
                            const CommandSpec& spec, const protocol::Request& args,
                            bool* migrating_here) {
  std::vector<KeyPosition> keys = KeyPositions(spec, args);
  if (keys.empty()) return {};
  std::shared_ptr<const Topology> snapshot = engine.cluster->Snapshot();
  const Topology& t = *snapshot;
  const store::Keyspace& keyspace = engine.database(0).keys;
  int slot = -1;
  bool migrating = false, importing = false, multiple_keys = false;
  size_t missing = 0, existing = 0;
  for (const KeyPosition& k : keys) {
    std::string_view key = args[k.index];
    const uint16_t key_slot = KeySlot(key);
    if (slot < 0) {
      slot = key_slot;
      if (t.owner[key_slot] == kNoNode) return std::string(errors::kSlotNotServed);
      if (t.Serves(key_slot)) {
        migrating = t.migrating_to[key_slot] != kNoNode;
      } else {
        importing = t.importing_from[key_slot] != kNoNode;
      }
    } else if (key_slot != slot) {
      return std::string(errors::kCrossSlot);
    } else if (key != args[keys.front().index]) {
      multiple_keys = true;
    }
    if (migrating || importing) (keyspace.Find(key) ? existing : missing) += 1;
  }
  if (!ClusterOk(engine, t)) return std::string(errors::kClusterDown);
  const auto s = static_cast<uint16_t>(slot);
  // MIGRATE runs where it is sent while its slot is open.
  if ((migrating || importing) && spec.full_name == "migrate") return {};
  if (migrating && missing > 0) {
    if (existing > 0) return std::string(errors::kTryAgain);
    return Redirect("ASK", s, t.nodes[t.migrating_to[s]]);
  }
  if (importing && (SessionOf(client).asking || (spec.flags & kAsking))) {
    if (multiple_keys && missing > 0) return std::string(errors::kTryAgain);
    return {};
  }
  if (!t.Serves(s)) return Redirect("MOVED", s, t.nodes[t.owner[s]]);
  if (migrating_here != nullptr) *migrating_here = migrating;
  return {};
}

}  // namespace prefixd::commands
