// The primary side of Redis's replication protocol: SYNC and PSYNC (always a full
// resynchronisation: an RDB of this moment, then the stream), REPLCONF, ROLE, the Replication
// section of INFO, and REPLICAOF/SLAVEOF (prefixd is never a replica: refused).
// docs/replication.md.
#include <algorithm>
#include <string>

#include "commands/arg_reader.h"
#include "commands/families.h"
#include "common/ascii.h"
#include "common/clock.h"
#include "common/numbers.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "persist/rdb.h"

namespace prefixd::commands {

namespace {

// An RDB of every database's keys of Redis types with their expiry (the keys already past it
// left out). Run under the whole exec gate: no command changes a key meanwhile.
std::string SnapshotRdb(Engine& engine, const Replication& replication) {
  persist::RdbWriter rdb(kRedisCompatVersion, engine.UsedMemory(), replication.replid(),
                         replication.offset());
  const int64_t now = NowMs();
  engine.databases().ForEach([&](size_t index, store::Database& database) {
    // One pass, each key encoded as it is visited; RESIZEDB's sizes are only the loader's hints,
    // so the keyspace's count (prefixd's own types included) serves.
    bool opened = false;
    database.keys.ForEach([&](const std::string& key, const store::KeyInfo& visited) {
      if (!persist::RdbWriter::Encodable(visited.type)) return;
      if (visited.expire_at_ms != 0 && visited.expire_at_ms <= now) return;
      if (!opened) rdb.SelectDb(index, database.keys.size(), 0), opened = true;
      // A string in the disk tier is read back from its file.
      if (visited.type == store::KeyType::kString && visited.cold &&
          visited.place.file != nullptr) {
        store::KeyInfo info = visited;
        std::string error;
        if (!database.keys.ReadColdString(info.place, 0, info.place.length, info.value, error)) {
          throw std::runtime_error("reading a cold string for the replica's RDB failed: " + error);
        }
        rdb.Key(key, info);
        return;
      }
      rdb.Key(key, visited);
    });
  });
  return rdb.Finish();
}

std::shared_ptr<server::ClientState> SharedClient(Engine& engine, uint64_t id) {
  for (auto& c : engine.Clients()) {
    if (c->id == id) return c;
  }
  return nullptr;
}

// SYNC and PSYNC: the RDB of this moment as `$<length>\r\n<payload>` (no CRLF after it, as
// Redis), then the client is a replica and receives the stream. PSYNC first answers
// +FULLRESYNC with the stream's id and the offset the RDB stands for: prefixd keeps no backlog,
// so a partial resynchronisation is never offered.
void FullResync(Context& ctx, bool psync) {
  if (ctx.client.replica.load(std::memory_order_relaxed)) return;  // as Redis: ignored
  if (!ctx.reply.empty()) {
    return ctx.reply.Error(errors::kSyncWithPendingOutput);
  }
  if (psync && !ArgReader(ctx, 2).Integer()) return;
  auto client = SharedClient(ctx.engine, ctx.client.id);
  if (client == nullptr) return ctx.reply.Error(errors::kConnectionClosing);
  Replication& replication = ctx.engine.replication();
  const uint64_t offset = replication.offset();
  const std::string rdb = SnapshotRdb(ctx.engine, replication);
  if (psync) {
    ctx.reply.Raw("+FULLRESYNC " + replication.replid() + " " + std::to_string(offset) + "\r\n");
  }
  ctx.reply.Raw("$" + std::to_string(rdb.size()) + "\r\n");
  ctx.reply.Raw(rdb);
  replication.Attach(client);
}

void Sync(Context& ctx) { FullResync(ctx, false); }
void PSync(Context& ctx) { FullResync(ctx, true); }

// REPLCONF option value ...: what a replica says of itself before SYNC/PSYNC (+OK), and its
// acknowledgements after (no reply), as Redis's replconfCommand.
void ReplConf(Context& ctx) {
  const auto& args = ctx.args;
  if (args.size() % 2 == 0) return ctx.reply.Error(errors::kSyntax);
  for (ArgReader r(ctx, 1); r.more();) {
    const std::string_view option = r.Peek();
    if (r.Keyword("listening-port")) {
      auto port = r.Integer();
      if (!port) return;
      ctx.client.replica_listening_port.store(static_cast<int>(*port), std::memory_order_relaxed);
    } else if (r.Keyword("ip-address")) {
      const std::string_view value = r.Next();
      // NET_HOST_STR_LEN (256) as Redis.
      if (value.size() >= 256) {
        return ctx.reply.Error(errors::ReplconfIpTooLong(value.size()));
      }
      std::lock_guard lock(ctx.client.names_mu);
      ctx.client.replica_ip = std::string(value);
    } else if (r.Keyword("capa")) {
      // eof and psync2 are what replicas announce; the answer does not depend on them here (a
      // full resync with a length-prefixed RDB is what every replica understands).
      r.Next();
    } else if (auto ack = r.OneOf({"ack", "fack"})) {
      // From a replica: its processed offset; never answered (a bad one is ignored).
      if (!ctx.client.replica.load(std::memory_order_relaxed)) return;
      if (*ack == 0) {
        if (auto offset = ParseInt64(r.Next()); offset && *offset >= 0) {
          ctx.engine.replication().Ack(ctx.client.id, static_cast<uint64_t>(*offset));
        }
      }
      return;
    } else if (r.Keyword("getack")) {
      // Asked of a replica by its primary; a primary has nothing to acknowledge.
      return;
    } else if (r.Keyword("rdb-only")) {
      if (!r.Integer(0, 1)) return;
    } else {
      return ctx.reply.Error(errors::UnrecognizedReplconf(option));
    }
  }
  ctx.reply.Simple("OK");
}

void Role(Context& ctx) {
  Replication& replication = ctx.engine.replication();
  const auto replicas = replication.Replicas();
  ctx.reply.ArrayLen(3);
  ctx.reply.Bulk("master");
  ctx.reply.Integer(static_cast<int64_t>(replication.offset()));
  ctx.reply.ArrayLen(replicas.size());
  for (const auto& r : replicas) {
    ctx.reply.ArrayLen(3);
    ctx.reply.Bulk(r.ip);
    ctx.reply.Bulk(std::to_string(r.port));
    ctx.reply.Bulk(std::to_string(r.ack_offset));
  }
}

// REPLICAOF NO ONE is what a primary already is; becoming a replica is not something prefixd
// does (docs/compatibility.md).
void ReplicaOf(Context& ctx) {
  if (ctx.engine.cluster != nullptr) {
    return ctx.reply.Error(errors::kReplicaOfInCluster);
  }
  if (EqualsIgnoreCase(ctx.args[1], "no") && EqualsIgnoreCase(ctx.args[2], "one")) {
    return ctx.reply.Simple("OK");
  }
  ctx.reply.Error(errors::kPrimaryOnly);
}

}  // namespace

void ReplicationInfo(Engine& engine, std::string& out) {
  Replication& replication = engine.replication();
  const auto replicas = replication.Replicas();
  const uint64_t offset = replication.offset();
  out += "role:master\r\n";
  out += "connected_slaves:" + std::to_string(replicas.size()) + "\r\n";
  for (size_t i = 0; i < replicas.size(); ++i) {
    const auto& r = replicas[i];
    out += "slave" + std::to_string(i) + ":ip=" + r.ip + ",port=" + std::to_string(r.port) +
           ",state=online,offset=" + std::to_string(r.ack_offset) +
           ",lag=" + std::to_string(r.lag_s) + "\r\n";
  }
  out += "master_failover_state:no-failover\r\n";
  out += "master_replid:" + replication.replid() + "\r\n";
  out += "master_replid2:0000000000000000000000000000000000000000\r\n";
  out += "master_repl_offset:" + std::to_string(offset) + "\r\n";
  out += "second_repl_offset:-1\r\n";
  // No backlog: every resynchronisation is a full one.
  out += "repl_backlog_active:0\r\n";
  out += "repl_backlog_size:0\r\n";
  out += "repl_backlog_first_byte_offset:0\r\n";
  out += "repl_backlog_histlen:0\r\n";
}

void RegisterReplicationCommands(Registry& r) {
  auto cmd = [](std::string name, int arity, uint32_t flags, std::string syntax,
                std::string summary, Handler h) {
    return MakeSpec("server", 0, std::move(name), arity, flags, std::move(syntax),
                    std::move(summary), h, "O(1)");
  };
  constexpr uint32_t kSyncFlags = kAdmin | kNoScript | kNoAsyncLoading | kNoMulti | kWholeGate;
  r.Add(AsRedis(cmd("sync", 1, kSyncFlags, "",
                    "Makes this connection a replica: an RDB of the keys Redis has types for, "
                    "then the stream of writes.",
                    Sync),
                "1.0.0"));
  r.Add(AsRedis(cmd("psync", -3, kSyncFlags, "<replicationid> <offset>",
                    "As SYNC, answering +FULLRESYNC first (never a partial resync).", PSync),
                "2.8.0", 0, {}, {StrArg("replicationid"), IntArg("offset")}));
  r.Add(AsRedis(cmd("replconf", -1, kAdmin | kNoScript | kLoading | kStale | kAllowBusy,
                    "<option> <value> [option value ...]",
                    "What a replica says of itself, and its acknowledged offset.", ReplConf),
                "3.0.0"));
  r.Add(AsRedis(cmd("role", 1, kNoScript | kLoading | kStale | kFast | kSentinel, "",
                    "This server's role (master), offset and replicas.", Role),
                "2.8.12", kAclAdmin | kAclDangerous));
  const std::vector<Arg> host_port = {StrArg("host"), IntArg("port")};
  r.Add(AsRedis(cmd("replicaof", 3, kAdmin | kNoScript | kStale | kNoAsyncLoading, "<host> <port>",
                    "Refused (prefixd is a primary only); NO ONE answers OK.", ReplicaOf),
                "5.0.0", 0, {}, host_port));
  r.Add(AsRedis(cmd("slaveof", 3, kAdmin | kNoScript | kStale | kNoAsyncLoading, "<host> <port>",
                    "As REPLICAOF.", ReplicaOf),
                "1.0.0", 0, {}, host_port));
}

}  // namespace prefixd::commands
