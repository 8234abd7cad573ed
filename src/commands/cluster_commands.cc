// Cluster commands: CLUSTER and its subcommands, ASKING, READONLY and READWRITE (the routing
// check every keyed command passes in cluster mode is engine/cluster_routing.h). The topology is
// pushed by whoever manages the cluster (nodes.conf, CLUSTER SETSLOT/ADDSLOTS on every node):
// there is no gossip bus (docs/cluster.md).
#include <algorithm>
#include <string>
#include <vector>

#include "cluster/cluster_state.h"
#include "commands/arg_reader.h"
#include "commands/families.h"
#include "common/ascii.h"
#include "common/key_slot.h"
#include "common/numbers.h"
#include "engine/cluster_routing.h"
#include "engine/errors.h"

namespace prefixd::commands {
namespace {

using cluster::kNoNode;
using cluster::Topology;

constexpr uint32_t kAdminFlags = kAdmin | kStale | kNoAsyncLoading;

cluster::ClusterState* ClusterOrReply(Context& ctx) {
  if (ctx.engine.cluster == nullptr) ctx.reply.Error(errors::kClusterDisabled);
  return ctx.engine.cluster.get();
}

std::shared_ptr<const Topology> SnapshotOrReply(Context& ctx) {
  cluster::ClusterState* state = ClusterOrReply(ctx);
  return state != nullptr ? state->Snapshot() : nullptr;
}

// Redis's getSlotOrReply.
std::optional<uint16_t> SlotOrReply(Context& ctx, size_t index) {
  auto n = ArgReader(ctx, index).Integer(0, kClusterSlots - 1, errors::kInvalidSlot);
  if (!n) return std::nullopt;
  return static_cast<uint16_t>(*n);
}

// Replies with the error, or +OK, of a topology change.
void ReplyToChange(Context& ctx, const std::string& error) {
  if (error.empty()) return ctx.reply.Simple("OK");
  ctx.reply.Error(error);
}

void ClusterInfo(Context& ctx) {
  auto t = SnapshotOrReply(ctx);
  if (!t) return;
  const size_t assigned = t->assigned_slots;
  std::string out;
  auto line = [&](std::string_view name, const std::string& value) {
    out.append(name).append(":").append(value).append("\r\n");
  };
  line("cluster_state", ClusterOk(ctx.engine, *t) ? "ok" : "fail");
  line("cluster_slots_assigned", std::to_string(assigned));
  line("cluster_slots_ok", std::to_string(assigned));
  line("cluster_slots_pfail", "0");
  line("cluster_slots_fail", "0");
  line("cluster_known_nodes", std::to_string(t->nodes.size()));
  line("cluster_size", std::to_string(t->ServingMasters()));
  line("cluster_current_epoch", std::to_string(t->current_epoch));
  line("cluster_my_epoch", std::to_string(t->Myself().config_epoch));
  line("cluster_stats_messages_sent", "0");
  line("cluster_stats_messages_received", "0");
  line("total_cluster_links_buffer_limit_exceeded", "0");
  ctx.reply.Verbatim(out);
}

void ClusterMyId(Context& ctx) {
  if (auto t = SnapshotOrReply(ctx)) ctx.reply.Bulk(t->Myself().id);
}

void ClusterNodes(Context& ctx) {
  if (auto t = SnapshotOrReply(ctx)) ctx.reply.Verbatim(cluster::FormatNodes(*t, false));
}

// One node of CLUSTER SLOTS: ip, port, id, and a map of extra endpoints (its hostname).
void SlotsNode(Context& ctx, const cluster::Node& n) {
  ctx.reply.ArrayLen(4);
  ctx.reply.Bulk(n.ip);
  ctx.reply.Integer(n.port);
  ctx.reply.Bulk(n.id);
  ctx.reply.MapLen(n.hostname.empty() ? 0 : 1);
  if (!n.hostname.empty()) ctx.reply.Bulk("hostname"), ctx.reply.Bulk(n.hostname);
}

void ClusterSlots(Context& ctx) {
  auto t = SnapshotOrReply(ctx);
  if (!t) return;
  std::vector<cluster::SlotRange> ranges = cluster::SlotRanges(*t);
  ctx.reply.ArrayLen(ranges.size());
  for (const cluster::SlotRange& r : ranges) {
    ctx.reply.ArrayLen(3);
    ctx.reply.Integer(r.first);
    ctx.reply.Integer(r.last);
    SlotsNode(ctx, t->nodes[static_cast<size_t>(r.node)]);
  }
}

void ClusterShards(Context& ctx) {
  auto t = SnapshotOrReply(ctx);
  if (!t) return;
  std::vector<cluster::SlotRange> ranges = cluster::SlotRanges(*t);
  // One shard per master: every node is one.
  ctx.reply.ArrayLen(t->nodes.size());
  for (size_t i = 0; i < t->nodes.size(); ++i) {
    const cluster::Node& n = t->nodes[i];
    ctx.reply.MapLen(2);
    ctx.reply.Bulk("slots");
    size_t mine = static_cast<size_t>(std::count_if(
        ranges.begin(), ranges.end(), [&](const auto& r) { return r.node == int16_t(i); }));
    ctx.reply.ArrayLen(2 * mine);
    for (const cluster::SlotRange& r : ranges) {
      if (r.node != static_cast<int16_t>(i)) continue;
      ctx.reply.Integer(r.first);
      ctx.reply.Integer(r.last);
    }
    ctx.reply.Bulk("nodes");
    ctx.reply.ArrayLen(1);
    ctx.reply.MapLen(n.hostname.empty() ? 7 : 8);
    ctx.reply.Bulk("id"), ctx.reply.Bulk(n.id);
    ctx.reply.Bulk("port"), ctx.reply.Integer(n.port);
    ctx.reply.Bulk("ip"), ctx.reply.Bulk(n.ip);
    ctx.reply.Bulk("endpoint"), ctx.reply.Bulk(n.ip);
    if (!n.hostname.empty()) ctx.reply.Bulk("hostname"), ctx.reply.Bulk(n.hostname);
    ctx.reply.Bulk("role"), ctx.reply.Bulk("master");
    ctx.reply.Bulk("replication-offset"), ctx.reply.Integer(0);
    ctx.reply.Bulk("health"), ctx.reply.Bulk("online");
  }
}

void ClusterKeySlot(Context& ctx) {
  if (ClusterOrReply(ctx)) ctx.reply.Integer(KeySlot(ctx.args[2]));
}

void ClusterCountKeysInSlot(Context& ctx) {
  if (!ClusterOrReply(ctx)) return;
  auto slot = ArgReader(ctx, 2).Integer();
  if (!slot) return;
  if (*slot < 0 || *slot >= kClusterSlots) return ctx.reply.Error(errors::kInvalidSlotShort);
  ctx.reply.Integer(
      static_cast<int64_t>(ctx.engine.database(0).keys.CountInSlot(static_cast<uint16_t>(*slot))));
}

void ClusterGetKeysInSlot(Context& ctx) {
  if (!ClusterOrReply(ctx)) return;
  ArgReader r(ctx, 2);
  auto slot = r.Integer();
  if (!slot) return;
  auto count = r.Integer();
  if (!count) return;
  if (*count < 0 || *slot < 0 || *slot >= kClusterSlots) {
    return ctx.reply.Error(errors::kInvalidSlotOrCount);
  }
  std::vector<std::string> keys = ctx.engine.database(0).keys.KeysInSlot(
      static_cast<uint16_t>(*slot), static_cast<size_t>(*count));
  ctx.reply.ArrayLen(keys.size());
  for (const std::string& key : keys) ctx.reply.Bulk(key);
}

// The slots ADDSLOTS/DELSLOTS (one per argument) or their RANGE forms (pairs) name, from
// argument 2 on; nullopt once an error was replied.
std::optional<std::vector<uint16_t>> SlotsOrReply(Context& ctx, bool ranges) {
  std::vector<uint16_t> slots;
  const size_t argc = ctx.args.size();
  if (ranges && argc % 2 == 1) {
    ctx.reply.Error(errors::WrongArity(ctx.spec.full_name));
    return std::nullopt;
  }
  for (size_t i = 2; i < argc; i += ranges ? 2 : 1) {
    auto first = SlotOrReply(ctx, i);
    if (!first) return std::nullopt;
    auto last = ranges ? SlotOrReply(ctx, i + 1) : first;
    if (!last) return std::nullopt;
    if (*first > *last) {
      ctx.reply.Error(errors::StartSlotAfterEnd(*first, *last));
      return std::nullopt;
    }
    for (uint32_t s = *first; s <= *last; ++s) slots.push_back(static_cast<uint16_t>(s));
  }
  return slots;
}

void ChangeSlots(Context& ctx, bool add, bool ranges) {
  cluster::ClusterState* state = ClusterOrReply(ctx);
  if (state == nullptr) return;
  auto slots = SlotsOrReply(ctx, ranges);
  if (!slots) return;
  ReplyToChange(ctx, state->Change([&](Topology& t) -> std::string {
    std::vector<bool> seen(kClusterSlots, false);
    for (uint16_t s : *slots) {
      if (add && t.owner[s] != kNoNode) return errors::SlotBusy(s);
      if (!add && t.owner[s] == kNoNode) {
        return errors::SlotUnassigned(s);
      }
      if (seen[s]) return errors::SlotRepeated(s);
      seen[s] = true;
    }
    for (uint16_t s : *slots) {
      t.owner[s] = add ? static_cast<int16_t>(t.myself) : kNoNode;
      t.importing_from[s] = kNoNode;
      if (!add) t.migrating_to[s] = kNoNode;
    }
    return {};
  }));
}

void ClusterAddSlots(Context& ctx) { ChangeSlots(ctx, true, false); }
void ClusterAddSlotsRange(Context& ctx) { ChangeSlots(ctx, true, true); }
void ClusterDelSlots(Context& ctx) { ChangeSlots(ctx, false, false); }
void ClusterDelSlotsRange(Context& ctx) { ChangeSlots(ctx, false, true); }

void ClusterFlushSlots(Context& ctx) {
  cluster::ClusterState* state = ClusterOrReply(ctx);
  if (state == nullptr) return;
  if (ctx.engine.database(0).keys.size() != 0) {
    return ctx.reply.Error(errors::kFlushSlotsNotEmpty);
  }
  ReplyToChange(ctx, state->Change([](Topology& t) -> std::string {
    for (int16_t& owner : t.owner) {
      if (owner == static_cast<int16_t>(t.myself)) owner = kNoNode;
    }
    return {};
  }));
}

// Redis's clusterBumpConfigEpochWithoutConsensus: this node takes a config epoch above every
// other unless it already holds the greatest. True when it bumped.
bool BumpConfigEpoch(Topology& t) {
  uint64_t greatest = t.current_epoch;
  for (const cluster::Node& n : t.nodes) greatest = std::max(greatest, n.config_epoch);
  cluster::Node& self = t.nodes[t.myself];
  if (self.config_epoch != 0 && self.config_epoch == greatest) return false;
  t.current_epoch = greatest + 1;
  self.config_epoch = t.current_epoch;
  return true;
}

void ClusterSetSlot(Context& ctx) {
  cluster::ClusterState* state = ClusterOrReply(ctx);
  if (state == nullptr) return;
  auto slot = SlotOrReply(ctx, 2);
  if (!slot) return;
  const std::string action = AsciiLower(ctx.args[3]);
  const size_t argc = ctx.args.size();
  const bool with_node = action == "migrating" || action == "importing" || action == "node";
  if (!(with_node && argc == 5) && !(action == "stable" && argc == 4)) {
    return ctx.reply.Error(errors::kInvalidSetslot);
  }
  const std::string node_id = argc == 5 ? std::string(ctx.args[4]) : std::string();
  const uint64_t keys_in_slot = ctx.engine.database(0).keys.CountInSlot(*slot);
  ReplyToChange(ctx, state->Change([&](Topology& t) -> std::string {
    const uint16_t s = *slot;
    const auto self = static_cast<int16_t>(t.myself);
    const int16_t node = with_node ? t.Find(node_id) : kNoNode;
    if (action == "migrating") {
      if (t.owner[s] != self) return errors::NotSlotOwner(s);
      if (node == kNoNode) return errors::DontKnowNode(node_id);
      t.migrating_to[s] = node;
    } else if (action == "importing") {
      if (t.owner[s] == self) return errors::AlreadySlotOwner(s);
      if (node == kNoNode) return errors::DontKnowNode(node_id);
      t.importing_from[s] = node;
    } else if (action == "stable") {
      t.migrating_to[s] = t.importing_from[s] = kNoNode;
    } else {
      if (node == kNoNode) return errors::UnknownNode(node_id);
      // Keys may not be left behind on a node that no longer serves their slot.
      if (t.owner[s] == self && node != self && keys_in_slot != 0) {
        return errors::SlotHasKeys(s);
      }
      if (keys_in_slot == 0) t.migrating_to[s] = kNoNode;
      if (node == self && t.importing_from[s] != kNoNode) {
        BumpConfigEpoch(t);
        t.importing_from[s] = kNoNode;
      }
      t.owner[s] = node;
    }
    return {};
  }));
}

void ClusterBumpEpoch(Context& ctx) {
  cluster::ClusterState* state = ClusterOrReply(ctx);
  if (state == nullptr) return;
  bool bumped = false;
  uint64_t epoch = 0;
  std::string error = state->Change([&](Topology& t) -> std::string {
    bumped = BumpConfigEpoch(t);
    epoch = t.Myself().config_epoch;
    return {};
  });
  if (!error.empty()) return ctx.reply.Error(error);
  ctx.reply.Simple((bumped ? "BUMPED " : "STILL ") + std::to_string(epoch));
}

void ClusterSetConfigEpoch(Context& ctx) {
  cluster::ClusterState* state = ClusterOrReply(ctx);
  if (state == nullptr) return;
  auto epoch = ArgReader(ctx, 2).Integer();
  if (!epoch) return;
  if (*epoch < 0) {
    return ctx.reply.Error(errors::InvalidConfigEpoch(*epoch));
  }
  ReplyToChange(ctx, state->Change([&](Topology& t) -> std::string {
    if (t.nodes.size() > 1) {
      return std::string(errors::kEpochWithOtherNodes);
    }
    if (t.Myself().config_epoch != 0) return std::string(errors::kEpochAlreadySet);
    t.nodes[t.myself].config_epoch = static_cast<uint64_t>(*epoch);
    t.current_epoch = std::max(t.current_epoch, static_cast<uint64_t>(*epoch));
    return {};
  }));
}

// Removes node `index`, its slots and every migration naming it; indexes above it shift down.
void RemoveNode(Topology& t, int16_t index) {
  auto fix = [&](int16_t& n) {
    if (n == index) {
      n = kNoNode;
    } else if (n > index) {
      --n;
    }
  };
  for (int16_t& n : t.owner) fix(n);
  for (int16_t& n : t.migrating_to) fix(n);
  for (int16_t& n : t.importing_from) fix(n);
  t.nodes.erase(t.nodes.begin() + index);
  if (t.myself > static_cast<size_t>(index)) --t.myself;
}

void ClusterForget(Context& ctx) {
  cluster::ClusterState* state = ClusterOrReply(ctx);
  if (state == nullptr) return;
  const std::string id(ctx.args[2]);
  ReplyToChange(ctx, state->Change([&](Topology& t) -> std::string {
    const int16_t node = t.Find(id);
    if (node == kNoNode) return errors::UnknownNode(id);
    if (node == static_cast<int16_t>(t.myself)) {
      return std::string(errors::kForgetMyself);
    }
    RemoveNode(t, node);
    return {};
  }));
}

void ClusterReset(Context& ctx) {
  cluster::ClusterState* state = ClusterOrReply(ctx);
  if (state == nullptr) return;
  bool hard = false;
  if (ctx.args.size() == 3) {
    const std::string mode = AsciiLower(ctx.args[2]);
    if (mode != "hard" && mode != "soft") return ctx.reply.Error(errors::kSyntax);
    hard = mode == "hard";
  } else if (ctx.args.size() > 3) {
    return ctx.reply.Error(errors::kSyntax);
  }
  if (ctx.engine.database(0).keys.size() != 0) {
    return ctx.reply.Error(errors::kResetWithKeys);
  }
  ReplyToChange(ctx, state->Change([&](Topology& t) -> std::string {
    cluster::Node self = t.Myself();
    Topology fresh;
    if (hard) {
      self.id = cluster::RandomNodeId();
      self.config_epoch = 0;
    } else {
      fresh.current_epoch = t.current_epoch;
      fresh.last_vote_epoch = t.last_vote_epoch;
    }
    fresh.nodes.push_back(std::move(self));
    t = std::move(fresh);
    return {};
  }));
}

// True when the node named by argument 2 is known; otherwise replies Redis's error.
bool NamedNodeOrReply(Context& ctx) {
  auto t = SnapshotOrReply(ctx);
  if (!t) return false;
  if (t->Find(ctx.args[2]) != kNoNode) return true;
  ctx.reply.Error(errors::UnknownNode(ctx.args[2]));
  return false;
}

// No bus, so no failure reports.
void ClusterCountFailureReports(Context& ctx) {
  if (NamedNodeOrReply(ctx)) ctx.reply.Integer(0);
}

// Every node is a master without replicas.
void ClusterReplicas(Context& ctx) {
  if (NamedNodeOrReply(ctx)) ctx.reply.ArrayLen(0);
}

void ClusterLinks(Context& ctx) {
  if (ClusterOrReply(ctx)) ctx.reply.ArrayLen(0);
}

void ClusterSaveConfig(Context& ctx) {
  cluster::ClusterState* state = ClusterOrReply(ctx);
  if (state == nullptr) return;
  std::string error = state->Save();
  if (!error.empty()) return ctx.reply.Error(errors::ClusterConfigSave(error));
  ctx.reply.Simple("OK");
}

// No cluster bus: the topology is written by whoever manages the cluster (docs/cluster.md).
void ClusterNoBus(Context& ctx) {
  if (!ClusterOrReply(ctx)) return;
  ctx.reply.Error(errors::ClusterUnsupported(AsciiUpper(ctx.args[1])));
}

void Asking(Context& ctx) {
  if (!ClusterOrReply(ctx)) return;
  ctx.session.asking_next = true;
  ctx.reply.Simple("OK");
}

void ReadOnly(Context& ctx) {
  if (!ClusterOrReply(ctx)) return;
  ctx.session.readonly = true;
  ctx.reply.Simple("OK");
}

void ReadWrite(Context& ctx) {
  if (!ClusterOrReply(ctx)) return;
  ctx.session.readonly = false;
  ctx.reply.Simple("OK");
}

}  // namespace

void RegisterClusterCommands(Registry& r) {
  auto cmd = [](std::string name, int arity, uint32_t flags, std::string syntax,
                std::string summary, Handler h, std::string complexity = "O(1)") {
    return MakeSpec("cluster", 0, std::move(name), arity, flags, std::move(syntax),
                    std::move(summary), h, std::move(complexity));
  };
  const std::vector<std::string> nondeterministic = {"nondeterministic_output"};
  auto view = [&](std::string name, int arity, std::string syntax, std::string summary, Handler h,
                  bool deterministic, std::string since, std::vector<Arg> args = {}) {
    return AsRedis(cmd(std::move(name), arity, kStale, std::move(syntax), std::move(summary), h),
                   std::move(since), 0,
                   deterministic ? std::vector<std::string>{} : nondeterministic, std::move(args));
  };
  auto admin = [&](std::string name, int arity, std::string syntax, std::string summary, Handler h,
                   std::string since, std::vector<Arg> args = {}, uint32_t flags = kAdminFlags,
                   std::vector<std::string> tips = {}) {
    return AsRedis(cmd(std::move(name), arity, flags, std::move(syntax), std::move(summary), h),
                   std::move(since), 0, std::move(tips), std::move(args));
  };
  const Arg node_id = StrArg("node-id");
  const Arg slot_range =
      BlockArg("range", kArgMultiple, {IntArg("start-slot"), IntArg("end-slot")});
  CommandSpec container =
      AsRedis(cmd("cluster", -2, 0, "<subcommand> [arguments]",
                  "Reads and changes this node's view of the cluster.", nullptr),
              "3.0.0");
  container.subcommands = {
      view("info", 2, "", "Cluster state, slot counts and epochs, as Redis's lines.", ClusterInfo,
           false, "3.0.0"),
      view("myid", 2, "", "This node's id.", ClusterMyId, true, "3.0.0"),
      view("nodes", 2, "", "The topology as nodes.conf lines, this node's first.", ClusterNodes,
           false, "3.0.0"),
      view("slots", 2, "", "Slot ranges with the node serving each.", ClusterSlots, false, "3.0.0"),
      view("shards", 2, "", "Each shard's slot ranges and node.", ClusterShards, false, "7.0.0"),
      view("links", 2, "", "Links to peers over the cluster bus: none (no bus).", ClusterLinks,
           false, "7.0.0"),
      view("keyslot", 3, "<key>", "The hash slot of a key.", ClusterKeySlot, true, "3.0.0",
           {StrArg("key")}),
      view("countkeysinslot", 3, "<slot>", "Keys this node holds in a slot.",
           ClusterCountKeysInSlot, true, "3.0.0", {IntArg("slot")}),
      view("getkeysinslot", 4, "<slot> <count>", "Up to count keys this node holds in a slot.",
           ClusterGetKeysInSlot, false, "3.0.0", {IntArg("slot"), IntArg("count")}),
      admin("addslots", -3, "<slot> [slot ...]", "Assigns slots to this node.", ClusterAddSlots,
            "3.0.0", {IntArg("slot", kArgMultiple)}),
      admin("addslotsrange", -4, "<start-slot> <end-slot> [...]",
            "Assigns ranges of slots to this node.", ClusterAddSlotsRange, "7.0.0", {slot_range}),
      admin("delslots", -3, "<slot> [slot ...]", "Unassigns slots in this node's view.",
            ClusterDelSlots, "3.0.0", {IntArg("slot", kArgMultiple)}),
      admin("delslotsrange", -4, "<start-slot> <end-slot> [...]",
            "Unassigns ranges of slots in this node's view.", ClusterDelSlotsRange, "7.0.0",
            {slot_range}),
      admin("flushslots", 2, "", "Unassigns every slot of this node (its database is empty).",
            ClusterFlushSlots, "3.0.0"),
      admin("setslot", -4, "<slot> <IMPORTING node-id|MIGRATING node-id|NODE node-id|STABLE>",
            "Marks a slot migrating, importing or stable, or names the node serving it.",
            ClusterSetSlot, "3.0.0",
            {IntArg("slot"),
             OneOfArg(
                 "subcommand", 0,
                 {Tokened(StrArg("node-id"), "IMPORTING"), Tokened(StrArg("node-id"), "MIGRATING"),
                  Tokened(StrArg("node-id"), "NODE"), TokenArg("stable", "STABLE")})}),
      admin("bumpepoch", 2, "", "Gives this node a config epoch above every other.",
            ClusterBumpEpoch, "3.0.0", {}, kAdminFlags, nondeterministic),
      admin("set-config-epoch", 3, "<config-epoch>", "Sets a new node's config epoch.",
            ClusterSetConfigEpoch, "3.0.0", {IntArg("config-epoch")}),
      admin("forget", 3, "<node-id>", "Removes a node from this node's view.", ClusterForget,
            "3.0.0", {node_id}),
      admin("reset", -2, "[HARD|SOFT]",
            "Forgets every other node and slot (the database is empty).", ClusterReset, "3.0.0",
            {OneOfArg("reset-type", kArgOptional,
                      {TokenArg("hard", "HARD"), TokenArg("soft", "SOFT")})},
            kAdmin | kNoScript | kStale),
      admin("saveconfig", 2, "", "Writes nodes.conf again.", ClusterSaveConfig, "3.0.0"),
      admin("count-failure-reports", 3, "<node-id>", "Failure reports about a node: 0 (no bus).",
            ClusterCountFailureReports, "3.0.0", {node_id}, kAdmin | kStale, nondeterministic),
      admin("replicas", 3, "<node-id>", "A node's replicas: none.", ClusterReplicas, "5.0.0",
            {node_id}, kAdmin | kStale, nondeterministic),
      admin("slaves", 3, "<node-id>", "A node's replicas: none.", ClusterReplicas, "3.0.0",
            {node_id}, kAdmin | kStale, nondeterministic),
      admin("meet", -4, "<ip> <port> [cluster-bus-port]", "Not supported: no cluster bus.",
            ClusterNoBus, "3.0.0"),
      admin("replicate", 3, "<node-id>", "Not supported: every node is a master.", ClusterNoBus,
            "3.0.0"),
      admin("failover", -2, "[FORCE|TAKEOVER]", "Not supported: every node is a master.",
            ClusterNoBus, "3.0.0"),
      AsRedis(cmd("help", 2, kLoading | kStale, "", "Lists the CLUSTER subcommands.",
                  [](Context& ctx) { HelpReply(ctx, *ctx.engine.registry->Find("cluster")); }),
              "5.0.0"),
  };
  r.Add(std::move(container));
  r.Add(AsRedis(cmd("asking", 1, kFast, "",
                    "Lets the next command reach a slot this node is importing.", Asking),
                "3.0.0", kAclConnection));
  r.Add(AsRedis(cmd("readonly", 1, kLoading | kStale | kFast, "",
                    "Accepted for cluster clients; every node is a master.", ReadOnly),
                "3.0.0", kAclConnection));
  r.Add(AsRedis(cmd("readwrite", 1, kLoading | kStale | kFast, "",
                    "Accepted for cluster clients; every node is a master.", ReadWrite),
                "3.0.0", kAclConnection));
}

}  // namespace prefixd::commands
