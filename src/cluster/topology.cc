#include "cluster/topology.h"

#include <algorithm>
#include <random>

#include "common/numbers.h"

namespace prefixd::cluster {
namespace {

std::vector<std::string_view> SplitOn(std::string_view text, char separator) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(separator, pos);
    if (end == std::string_view::npos) end = text.size();
    if (end > pos) out.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

std::optional<uint16_t> ParseSlot(std::string_view text) {
  auto n = ParseInt64(text);
  if (!n || *n < 0 || *n >= kClusterSlots) return std::nullopt;
  return static_cast<uint16_t>(*n);
}

// "ip:port@cport[,hostname]"; the ip may be IPv6, so the port follows the last ':'.
bool ParseAddress(std::string_view text, Node& node) {
  if (size_t comma = text.find(','); comma != std::string_view::npos) {
    node.hostname = std::string(text.substr(comma + 1));
    text = text.substr(0, comma);
  }
  std::string_view bus;
  if (size_t at = text.find('@'); at != std::string_view::npos) {
    bus = text.substr(at + 1);
    text = text.substr(0, at);
  }
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return false;
  auto port = ParseInt64(text.substr(colon + 1));
  if (!port || *port < 0 || *port > 65535) return false;
  node.ip = std::string(text.substr(0, colon));
  node.port = static_cast<int>(*port);
  if (bus.empty()) {
    node.bus_port = node.port + 10000 <= 65535 ? node.port + 10000 : 0;
  } else {
    auto b = ParseInt64(bus);
    if (!b || *b < 0 || *b > 65535) return false;
    node.bus_port = static_cast<int>(*b);
  }
  return true;
}

// A slot field of a node line: "N", "N-M", "[N->-id]" (migrating) or "[N-<-id]" (importing).
// Slot ranges are resolved once every node is known, so they are collected first.
struct PendingSlots {
  size_t node;
  std::string_view field;
};

std::string ApplySlotField(Topology& t, const PendingSlots& p) {
  std::string_view f = p.field;
  const auto node = static_cast<int16_t>(p.node);
  if (f.front() == '[') {
    if (f.back() != ']') return "bad slot field";
    f = f.substr(1, f.size() - 2);
    const bool migrating = f.find("->-") != std::string_view::npos;
    size_t sep = f.find(migrating ? "->-" : "-<-");
    if (sep == std::string_view::npos) return "bad slot field";
    auto slot = ParseSlot(f.substr(0, sep));
    int16_t other = t.Find(f.substr(sep + 3));
    if (!slot || other == kNoNode) return "bad slot field";
    // Only this node's own migrations are kept; Redis keeps no others either.
    if (p.node == t.myself) {
      (migrating ? t.migrating_to : t.importing_from)[*slot] = other;
    }
    return {};
  }
  size_t dash = f.find('-');
  auto first = ParseSlot(f.substr(0, dash));
  auto last = dash == std::string_view::npos ? first : ParseSlot(f.substr(dash + 1));
  if (!first || !last || *last < *first) return "bad slot range";
  for (uint32_t s = *first; s <= *last; ++s) {
    if (t.owner[s] != kNoNode) return "slot " + std::to_string(s) + " is served by two nodes";
    t.owner[s] = node;
  }
  return {};
}

}  // namespace

bool IsNodeId(std::string_view text) {
  return text.size() == kNodeIdLength && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string RandomNodeId() {
  std::random_device device;
  std::mt19937_64 random((static_cast<uint64_t>(device()) << 32) ^ device());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(kNodeIdLength, '0');
  for (char& c : id) c = kHex[random() & 15];
  return id;
}

bool Node::HasFlag(std::string_view flag) const {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

int16_t Topology::Find(std::string_view id) const {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].id == id) return static_cast<int16_t>(i);
  }
  return kNoNode;
}

size_t Topology::CountAssignedSlots() const {
  return static_cast<size_t>(
      std::count_if(owner.begin(), owner.end(), [](int16_t n) { return n != kNoNode; }));
}

size_t Topology::ServingMasters() const {
  std::vector<bool> serving(nodes.size(), false);
  for (int16_t n : owner) {
    if (n != kNoNode) serving[static_cast<size_t>(n)] = true;
  }
  return static_cast<size_t>(std::count(serving.begin(), serving.end(), true));
}

std::vector<SlotRange> SlotRanges(const Topology& topology) {
  std::vector<SlotRange> out;
  for (uint32_t s = 0; s < kClusterSlots; ++s) {
    const int16_t n = topology.owner[s];
    if (n == kNoNode) continue;
    if (!out.empty() && out.back().node == n && out.back().last + 1u == s) {
      out.back().last = static_cast<uint16_t>(s);
    } else {
      out.push_back({static_cast<uint16_t>(s), static_cast<uint16_t>(s), n});
    }
  }
  return out;
}

ParsedTopology ParseNodesConf(std::string_view text) {
  ParsedTopology parsed;
  Topology& t = parsed.topology;
  std::vector<PendingSlots> pending;
  bool have_myself = false;
  size_t line_number = 0;
  auto fail = [&](const std::string& why) {
    parsed.error = "nodes.conf line " + std::to_string(line_number) + ": " + why;
    return parsed;
  };
  for (std::string_view line : SplitOn(text, '\n')) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::vector<std::string_view> f = SplitOn(line, ' ');
    if (f.empty()) continue;
    if (f[0] == "vars") {
      for (size_t i = 1; i + 1 < f.size(); i += 2) {
        auto value = ParseInt64(f[i + 1]);
        if (!value || *value < 0) return fail("bad value for " + std::string(f[i]));
        if (f[i] == "currentEpoch") t.current_epoch = static_cast<uint64_t>(*value);
        if (f[i] == "lastVoteEpoch") t.last_vote_epoch = static_cast<uint64_t>(*value);
      }
      continue;
    }
    if (f.size() < 8) return fail("a node line has at least 8 fields");
    Node node;
    if (!IsNodeId(f[0])) return fail("bad node id '" + std::string(f[0]) + "'");
    if (t.Find(f[0]) != kNoNode) return fail("node " + std::string(f[0]) + " is listed twice");
    node.id = std::string(f[0]);
    if (!ParseAddress(f[1], node)) return fail("bad address '" + std::string(f[1]) + "'");
    for (std::string_view flag : SplitOn(f[2], ',')) node.flags.emplace_back(flag);
    node.master_id = std::string(f[3]);
    auto epoch = ParseInt64(f[6]);
    if (!epoch || *epoch < 0) return fail("bad config epoch");
    node.config_epoch = static_cast<uint64_t>(*epoch);
    if (node.HasFlag("myself")) {
      if (have_myself) return fail("two nodes are marked myself");
      have_myself = true;
      t.myself = t.nodes.size();
    }
    for (size_t i = 8; i < f.size(); ++i) pending.push_back({t.nodes.size(), f[i]});
    t.nodes.push_back(std::move(node));
    if (t.nodes.size() > 1000) return fail("more than 1000 nodes");
  }
  if (!have_myself) return fail("no node is marked myself");
  for (const PendingSlots& p : pending) {
    if (std::string error = ApplySlotField(t, p); !error.empty()) {
      return fail(error + " '" + std::string(p.field) + "'");
    }
  }
  return parsed;
}

std::string FormatNodes(const Topology& topology, bool for_file) {
  std::vector<SlotRange> ranges = SlotRanges(topology);
  std::string out;
  auto line = [&](size_t index) {
    const Node& n = topology.nodes[index];
    out += n.id + ' ' + n.Address() + '@' + std::to_string(n.bus_port);
    if (!n.hostname.empty()) out += ',' + n.hostname;
    out += ' ';
    for (size_t i = 0; i < n.flags.size(); ++i) out += (i ? "," : "") + n.flags[i];
    if (n.flags.empty()) out += "noflags";
    out += ' ' + n.master_id + " 0 0 " + std::to_string(n.config_epoch) + " connected";
    for (const SlotRange& r : ranges) {
      if (r.node != static_cast<int16_t>(index)) continue;
      out += ' ' + std::to_string(r.first);
      if (r.last != r.first) out += '-' + std::to_string(r.last);
    }
    if (index == topology.myself) {
      for (uint32_t s = 0; s < kClusterSlots; ++s) {
        if (int16_t to = topology.migrating_to[s]; to != kNoNode) {
          out += " [" + std::to_string(s) + "->-" + topology.nodes[to].id + ']';
        }
        if (int16_t from = topology.importing_from[s]; from != kNoNode) {
          out += " [" + std::to_string(s) + "-<-" + topology.nodes[from].id + ']';
        }
      }
    }
    out += '\n';
  };
  line(topology.myself);
  for (size_t i = 0; i < topology.nodes.size(); ++i) {
    if (i != topology.myself) line(i);
  }
  if (for_file) {
    out += "vars currentEpoch " + std::to_string(topology.current_epoch) + " lastVoteEpoch " +
           std::to_string(topology.last_vote_epoch) + '\n';
  }
  return out;
}

}  // namespace prefixd::cluster
