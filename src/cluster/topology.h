// Topology: one immutable view of a Redis Cluster — its nodes, the node serving each of the 16384
// hash slots, and the slots being migrated out or imported — read from and written as Redis 7's
// nodes.conf. Pure values and functions; a Topology is shared read-only between threads.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/key_slot.h"

namespace prefixd::cluster {

// A node id: 40 lower-case hex characters, as Redis makes them.
inline constexpr size_t kNodeIdLength = 40;
bool IsNodeId(std::string_view text);
std::string RandomNodeId();

struct Node {
  std::string id;
  std::string ip;
  int port = 0;
  int bus_port = 0;
  std::string hostname;            // optional, after a comma in the address field
  std::vector<std::string> flags;  // "myself", "master", ... as nodes.conf lists them
  std::string master_id = "-";
  uint64_t config_epoch = 0;

  bool HasFlag(std::string_view flag) const;
  std::string Address() const { return ip + ":" + std::to_string(port); }
};

inline constexpr int16_t kNoNode = -1;

struct Topology {
  std::vector<Node> nodes;
  size_t myself = 0;  // index into nodes
  uint64_t current_epoch = 0;
  uint64_t last_vote_epoch = 0;
  // The node (index into nodes) serving each slot, kNoNode when none does.
  std::array<int16_t, kClusterSlots> owner;
  // Slots this node is handing over (MIGRATING, to that node) or taking over (IMPORTING, from it).
  std::array<int16_t, kClusterSlots> migrating_to;
  std::array<int16_t, kClusterSlots> importing_from;

  Topology() {
    owner.fill(kNoNode);
    migrating_to.fill(kNoNode);
    importing_from.fill(kNoNode);
  }

  // How many slots have a node, counted once per published view (ClusterState counts after every
  // change) so the routing check before each command does not walk 16384 slots.
  size_t assigned_slots = 0;

  const Node& Myself() const { return nodes[myself]; }
  // The index of the node with `id`, or kNoNode.
  int16_t Find(std::string_view id) const;
  bool Serves(uint16_t slot) const { return owner[slot] == static_cast<int16_t>(myself); }
  // Counts the slots that have a node (what assigned_slots caches).
  size_t CountAssignedSlots() const;
  // Masters that serve at least one slot (cluster_size).
  size_t ServingMasters() const;
};

// A run of consecutive slots served by one node.
struct SlotRange {
  uint16_t first;
  uint16_t last;
  int16_t node;
};
// Every run of assigned slots, in slot order.
std::vector<SlotRange> SlotRanges(const Topology& topology);

// Parses nodes.conf: one CLUSTER NODES line per node (exactly one marked `myself`) and a
// `vars currentEpoch N lastVoteEpoch M` line. An error text says which line is wrong.
struct ParsedTopology {
  Topology topology;
  std::string error;
};
ParsedTopology ParseNodesConf(std::string_view text);

// CLUSTER NODES: a line per node, this node's first (hiredis-cluster reads it first), each
// ending in '\n'; `for_file` adds the vars line that nodes.conf ends with.
std::string FormatNodes(const Topology& topology, bool for_file);

}  // namespace prefixd::cluster
