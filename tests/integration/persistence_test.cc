// Checks durability end to end against the real server binary: acknowledged writes survive
// SIGKILL at random moments under concurrent writers (a crash loop; PREFIXD_CRASH_ROUNDS sets the
// rounds), graceful restarts under every appendfsync policy and under load, BGSAVE during writes
// and log compaction, a full disk (-MISCONF, then recovery once space is freed), and a damaged
// log (refused at start, or skipped with --log-skip-corrupt; a torn tail is cut).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <csignal>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kLayers = 4;  // every session uses layers 0 .. kLayers-1

// ---------------------------------------------------------------------------------------------
// The model: what each (session, layer) must hold. Blobs are described by (size, seed) and
// regenerated for comparison, so the model stays small while the data is big.

struct Value {
  bool present = false;
  uint32_t size = 0;
  uint64_t seed = 0;
  bool operator==(const Value&) const = default;
};

std::string MakeBlob(size_t size, uint64_t seed) {
  std::string out(size, '\0');
  std::mt19937_64 rng(seed);
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  for (; i < size; ++i) out[i] = static_cast<char>(rng());
  return out;
}

std::string Materialize(const Value& v) { return MakeBlob(v.size, v.seed); }

using Key = std::pair<std::string, uint32_t>;
using Model = std::map<Key, Value>;  // absent keys are simply missing

std::string KeyName(const Key& k) { return k.first + "/" + std::to_string(k.second); }

struct Op {
  enum Kind { kStore, kMStore, kDropLayer, kDropSession } kind = kStore;
  std::string sid;
  std::vector<std::pair<uint32_t, Value>> layers;  // the new value of every key it touches

  std::vector<std::string> Args() const {
    switch (kind) {
      case kStore:
        return {"SSM.PREFIX.STORE", sid, std::to_string(layers[0].first),
                Materialize(layers[0].second)};
      case kMStore: {
        std::vector<std::string> args = {"SSM.PREFIX.MSTORE", sid};
        for (const auto& [layer, value] : layers) {
          args.push_back(std::to_string(layer));
          args.push_back(Materialize(value));
        }
        return args;
      }
      case kDropLayer:
        return {"SSM.PREFIX.DROP", sid, std::to_string(layers[0].first)};
      case kDropSession:
        return {"SSM.PREFIX.DROP", sid};
    }
    return {};
  }

  void ApplyTo(Model& model) const {
    for (const auto& [layer, value] : layers) {
      if (value.present) {
        model[{sid, layer}] = value;
      } else {
        model.erase({sid, layer});
      }
    }
  }

  std::string Describe() const {
    static const char* kNames[] = {"STORE", "MSTORE", "DROP layer", "DROP session"};
    std::string out = std::string(kNames[kind]) + " " + sid;
    for (const auto& [layer, value] : layers) {
      out += " " + std::to_string(layer) +
             (value.present ? "=" + std::to_string(value.size) + "B" : "=nil");
    }
    return out;
  }
};

// Blob sizes from 1 B to 2 MiB, most of them small.
uint32_t RandomSize(std::mt19937_64& rng) {
  int r = static_cast<int>(rng() % 100);
  if (r < 40) return 1 + static_cast<uint32_t>(rng() % 256);
  if (r < 75) return 256 + static_cast<uint32_t>(rng() % (64 * 1024 - 256));
  if (r < 95) return 64 * 1024 + static_cast<uint32_t>(rng() % (448 * 1024));
  return 512 * 1024 + static_cast<uint32_t>(rng() % (1536 * 1024 + 1));
}

Op RandomOp(std::mt19937_64& rng, const std::vector<std::string>& sids) {
  Op op;
  op.sid = sids[rng() % sids.size()];
  int r = static_cast<int>(rng() % 100);
  if (r < 65) {
    op.kind = Op::kStore;
    op.layers.emplace_back(rng() % kLayers, Value{true, RandomSize(rng), rng()});
  } else if (r < 88) {
    op.kind = Op::kMStore;
    uint32_t first = rng() % kLayers;
    uint32_t count = 2 + rng() % (kLayers - 1);
    for (uint32_t i = 0; i < count; ++i) {
      op.layers.emplace_back((first + i) % kLayers, Value{true, RandomSize(rng), rng()});
    }
  } else if (r < 95) {
    op.kind = Op::kDropLayer;
    op.layers.emplace_back(rng() % kLayers, Value{});
  } else {
    op.kind = Op::kDropSession;
    for (uint32_t l = 0; l < kLayers; ++l) op.layers.emplace_back(l, Value{});
  }
  return op;
}

// Sends `op`; true on +OK. On a broken connection returns false with `*broken` set; any other
// reply is described in `*unexpected`.
bool Send(redisContext* ctx, const Op& op, bool* broken, std::string* unexpected) {
  std::vector<std::string> args = op.Args();
  std::vector<std::string_view> views(args.begin(), args.end());
  RedisReply r = HiredisCommand(ctx, views);
  if (r == nullptr) {
    *broken = true;
    return false;
  }
  if (r->type == REDIS_REPLY_STATUS && std::string_view(r->str, r->len) == "OK") return true;
  *unexpected = op.Describe() + " answered " + DescribeReply(r.get());
  return false;
}

// What the server holds for these sessions: every layer, read one session at a time with
// MFETCH (a consistent view of the session). Sets `*error` on a failed read.
std::map<Key, std::optional<std::string>> ReadSessions(redisContext* ctx,
                                                       const std::vector<std::string>& sids,
                                                       std::string* error) {
  std::map<Key, std::optional<std::string>> out;
  for (const std::string& sid : sids) {
    std::vector<std::string> args = {"SSM.PREFIX.MFETCH", sid};
    for (uint32_t l = 0; l < kLayers; ++l) args.push_back(std::to_string(l));
    std::vector<std::string_view> views(args.begin(), args.end());
    RedisReply r = HiredisCommand(ctx, views);
    if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != kLayers) {
      *error = "MFETCH " + sid + " answered " +
               (r ? DescribeReply(r.get()) : std::string("nothing: ") + ctx->errstr);
      return out;
    }
    for (uint32_t l = 0; l < kLayers; ++l) {
      const redisReply* e = r->element[l];
      if (e->type == REDIS_REPLY_STRING) {
        out[{sid, l}] = std::string(e->str, e->len);
      } else if (e->type == REDIS_REPLY_NIL) {
        out[{sid, l}] = std::nullopt;
      } else {
        *error = "MFETCH " + sid + " layer " + std::to_string(l) + ": " + DescribeReply(e);
        return out;
      }
    }
  }
  return out;
}

bool Matches(const std::optional<std::string>& observed, const std::optional<Value>& expected) {
  bool present = expected.has_value() && expected->present;
  if (observed.has_value() != present) return false;
  return !present || (observed->size() == expected->size && *observed == Materialize(*expected));
}

std::string DescribeObserved(const std::optional<std::string>& v) {
  return v ? std::to_string(v->size()) + " bytes" : std::string("nil");
}

std::optional<Value> Lookup(const Model& model, const Key& k) {
  auto it = model.find(k);
  if (it == model.end()) return std::nullopt;
  return it->second;
}

// Compares what the server holds for `sids` with `model`. Each op in `in_flight` (sent, never
// answered) may have been applied or not, but wholly: all its keys old or all new. Applied ones
// are added to `model`. Returns a description of every mismatch, empty when all is well.
std::string Verify(redisContext* ctx, const std::vector<std::string>& sids, Model& model,
                   const std::vector<Op>& in_flight, int* applied = nullptr) {
  std::string error;
  auto observed = ReadSessions(ctx, sids, &error);
  if (!error.empty()) return error;
  std::ostringstream problems;
  std::map<Key, bool> uncertain;
  for (const Op& op : in_flight) {
    for (const auto& [layer, value] : op.layers) uncertain[{op.sid, layer}] = true;
  }
  for (const auto& [key, value] : observed) {
    if (uncertain.contains(key)) continue;
    if (!Matches(value, Lookup(model, key))) {
      auto expected = Lookup(model, key);
      problems << "acknowledged state of " << KeyName(key) << " lost: expected "
               << (expected ? std::to_string(expected->size) + " bytes" : "nil") << ", found "
               << DescribeObserved(value) << "\n";
    }
  }
  for (const Op& op : in_flight) {
    Model after = model;
    op.ApplyTo(after);
    bool all_old = true, all_new = true;
    std::string detail;
    for (const auto& [layer, value] : op.layers) {
      Key key{op.sid, layer};
      bool is_old = Matches(observed[key], Lookup(model, key));
      bool is_new = Matches(observed[key], Lookup(after, key));
      all_old &= is_old;
      all_new &= is_new;
      detail += " " + KeyName(key) + ":" + DescribeObserved(observed[key]) +
                (is_old ? "(old)" : "") + (is_new ? "(new)" : "") +
                (!is_old && !is_new ? "(NEITHER)" : "");
    }
    if (!all_old && !all_new) {
      problems << "unacknowledged " << op.Describe() << " is partial or damaged:" << detail << "\n";
    } else if (all_new && !all_old) {
      model = after;
      if (applied) ++*applied;
    }
  }
  return problems.str();
}

std::string InfoField(redisContext* ctx, const std::string& field) {
  RedisReply r = HiredisCommand(ctx, {"INFO", "persistence"});
  if (r == nullptr || r->type != REDIS_REPLY_STRING) return "";
  std::string text(r->str, r->len);
  std::string prefix = field + ":";
  size_t pos = text.find("\r\n" + prefix);
  if (pos == std::string::npos) {
    if (text.rfind(prefix, 0) != 0) return "";
    pos = 0;
  } else {
    pos += 2;
  }
  size_t end = text.find("\r\n", pos);
  return text.substr(pos + prefix.size(), end - pos - prefix.size());
}

// Waits until no snapshot is being written; false if one is still running after `timeout`.
bool WaitBgsaveDone(redisContext* ctx, Millis timeout = 60s) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (InfoField(ctx, "rdb_bgsave_in_progress") == "0") return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

struct SegmentFile {
  std::string path;
  uint64_t bytes;
};

std::vector<SegmentFile> LogSegments(const std::string& dir) {
  std::vector<SegmentFile> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.starts_with("log-") && name.ends_with(".seg")) {
      out.push_back({entry.path().string(), static_cast<uint64_t>(entry.file_size())});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const SegmentFile& a, const SegmentFile& b) { return a.path < b.path; });
  return out;
}

uint64_t LogBytes(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& s : LogSegments(dir)) total += s.bytes;
  return total;
}

// Start offsets of the records in a segment, walked through their length fields (32-byte file
// header; 32-byte record headers with the payload length, little-endian, at byte 24).
std::vector<uint64_t> RecordStarts(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<uint64_t> out;
  uint64_t pos = 32;
  while (pos + 32 <= bytes.size()) {
    out.push_back(pos);
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<uint8_t>(bytes[pos + 24 + i]);
    pos += 32 + length;
  }
  return out;
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

uint64_t EnvSeed(const char* name) {
  const char* v = std::getenv(name);
  if (v != nullptr && *v != '\0') return std::strtoull(v, nullptr, 10);
  return std::random_device()() | (uint64_t{std::random_device()()} << 32);
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) {
    ++n;
  }
  return n;
}

RedisContext Connect(const ServerProcess& server) {
  std::string error;
  RedisContext ctx = ConnectHiredis(server.port(), 60s, &error);
  EXPECT_NE(ctx, nullptr) << error;
  return ctx;
}

// ---------------------------------------------------------------------------------------------
// a. Crash loop

// Rounds of concurrent writers, each on its own sessions, interrupted by stopping the server
// (SIGKILL, SIGTERM or SHUTDOWN); after each the server is restarted on the same directory and
// must hold every acknowledged write, and each write in flight at the stop wholly or not at all.
class WriterRounds {
 public:
  static constexpr int kWriters = 4;

  WriterRounds(ServerProcess& server, ServerProcess::Options options, uint64_t seed)
      : server_(server), options_(std::move(options)), rng_(seed), sids_(kWriters) {
    for (int t = 0; t < kWriters; ++t) {
      for (int s = 0; s < 6; ++s) {
        sids_[t].push_back("w" + std::to_string(t) + "-s" + std::to_string(s));
        all_sids_.push_back(sids_[t].back());
      }
    }
  }

  // One round: writers run until `interrupt(rng)` returns with the server stopped.
  void Round(const std::function<void(std::mt19937_64&)>& interrupt) {
    std::vector<RedisContext> contexts;
    for (int t = 0; t < kWriters; ++t) {
      contexts.push_back(Connect(server_));
      ASSERT_NE(contexts.back(), nullptr);
    }
    std::vector<Model> acked(kWriters);  // each writer's own sessions only
    for (int t = 0; t < kWriters; ++t) {
      for (const auto& [key, value] : model_) {
        if (key.first.starts_with("w" + std::to_string(t) + "-")) acked[t][key] = value;
      }
    }
    std::vector<std::optional<Op>> in_flight(kWriters);
    std::vector<std::string> unexpected(kWriters);
    std::vector<uint64_t> counts(kWriters, 0);
    std::atomic<bool> stop{false};
    std::vector<std::thread> writers;
    for (int t = 0; t < kWriters; ++t) {
      writers.emplace_back([&, t, thread_seed = rng_()] {
        std::mt19937_64 rng(thread_seed);
        while (!stop.load()) {
          Op op = RandomOp(rng, sids_[t]);
          in_flight[t] = op;
          bool broken = false;
          if (!Send(contexts[t].get(), op, &broken, &unexpected[t])) return;
          in_flight[t].reset();
          op.ApplyTo(acked[t]);
          ++counts[t];
        }
      });
    }
    interrupt(rng_);
    stop = true;
    for (auto& w : writers) w.join();
    for (int t = 0; t < kWriters; ++t) {
      EXPECT_EQ(unexpected[t], "") << "writer " << t;
      acked_ += counts[t];
    }
    ASSERT_TRUE(server_.Restart(options_)) << "restart failed";
    std::vector<Op> pending;
    for (auto& op : in_flight) {
      if (op) pending.push_back(*op);
    }
    in_flight_ += pending.size();
    model_.clear();
    for (const Model& m : acked) model_.insert(m.begin(), m.end());
    auto ctx = Connect(server_);
    ASSERT_NE(ctx, nullptr);
    int applied = 0;
    std::string problems = Verify(ctx.get(), all_sids_, model_, pending, &applied);
    applied_ += static_cast<uint64_t>(applied);
    ASSERT_EQ(problems, "") << "after the restart";
  }

  std::string Summary() const {
    return std::to_string(acked_) + " acknowledged writes, " + std::to_string(in_flight_) +
           " in flight at a stop (" + std::to_string(applied_) + " of them found applied)";
  }
  uint64_t acked() const { return acked_; }

 private:
  ServerProcess& server_;
  ServerProcess::Options options_;
  std::mt19937_64 rng_;
  std::vector<std::vector<std::string>> sids_;
  std::vector<std::string> all_sids_;
  Model model_;
  uint64_t acked_ = 0, in_flight_ = 0, applied_ = 0;
};

TEST(DurabilityCrashTest, AcknowledgedWritesSurviveSigkillUnderConcurrentWriters) {
  const int rounds = EnvInt("PREFIXD_CRASH_ROUNDS", 20);
  const uint64_t seed = EnvSeed("PREFIXD_CRASH_SEED");
  std::cout << "[ crash   ] " << rounds << " rounds, seed " << seed
            << " (PREFIXD_CRASH_SEED to repeat)" << std::endl;
  ServerProcess::Options options;
  // Small segments and a low rewrite threshold: kills also land in rotations and snapshots.
  options.flags = {"--appendfsync",
                   "always",
                   "--log-segment-size",
                   "4mb",
                   "--auto-aof-rewrite-min-size",
                   "24mb",
                   "--auto-aof-rewrite-percentage",
                   "100"};
  options.startup_timeout = 60s;
  ServerProcess server;
  ASSERT_TRUE(server.Start(options));
  WriterRounds loop(server, options, seed);
  uint64_t bgsaves = 0;
  auto started = Clock::now();
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round) + " of seed " + std::to_string(seed));
    if (round % 10 == 9) {
      // Compact now and then, so long soaks keep the log (and each restart's replay) bounded:
      // the automatic rewrite measures growth from the log size at startup, which a round
      // rarely doubles.
      auto c = Connect(server);
      ASSERT_NE(c, nullptr);
      RedisReply r = HiredisCommand(c.get(), {"SAVE"});
      ASSERT_NE(r, nullptr) << c->errstr;
      ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << "SAVE: " << DescribeReply(r.get());
    }
    ASSERT_NO_FATAL_FAILURE(loop.Round([&](std::mt19937_64& rng) {
      auto round_start = Clock::now();
      auto kill_after = Millis(50 + static_cast<int>(rng() % 351));
      if (rng() % 3 == 0) {
        // A snapshot (and the compaction after it) racing the writers and the kill.
        std::this_thread::sleep_for(Millis(rng() % kill_after.count()));
        if (auto c = Connect(server)) {
          RedisReply r = HiredisCommand(c.get(), {"BGSAVE"});
          if (r && r->type == REDIS_REPLY_STATUS) ++bgsaves;
        }
      }
      std::this_thread::sleep_until(round_start + kill_after);
      bool was_running = server.Running();
      EXPECT_TRUE(was_running) << "the server died before it was killed";
      EXPECT_TRUE(server.Kill() || !was_running);
    }));
  }
  std::string log = server.ReadLog();
  std::cout << "[ crash   ] " << rounds << " rounds in "
            << std::chrono::duration_cast<Millis>(Clock::now() - started).count()
            << " ms: " << loop.Summary() << ", " << Count(log, "torn tail") << " torn tails cut, "
            << bgsaves << " BGSAVEs, " << Count(log, "Snapshot saved") << " snapshots completed"
            << std::endl;
  EXPECT_GT(loop.acked(), 0u);
  EXPECT_EQ(Count(log, "corrupt"), 0u) << "recovery reported corruption after a plain SIGKILL";
}

// ---------------------------------------------------------------------------------------------
// b. Graceful restarts

// (appendfsync policy, "sigterm" or "shutdown").
class DurabilityRestartTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(DurabilityRestartTest, GracefulRestartKeepsEverything) {
  const auto& [policy, how] = GetParam();
  ServerProcess::Options options;
  options.flags = {"--appendfsync", policy};
  ServerProcess server;
  ASSERT_TRUE(server.Start(options));
  std::vector<std::string> sids = {"g0", "g1", "g2", "g3", "g4"};
  Model model;
  std::mt19937_64 rng(std::hash<std::string>()(policy + how));
  for (int cycle = 0; cycle < 2; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    auto ctx = Connect(server);
    ASSERT_NE(ctx, nullptr);
    for (int i = 0; i < 40; ++i) {
      Op op = RandomOp(rng, sids);
      bool broken = false;
      std::string unexpected;
      ASSERT_TRUE(Send(ctx.get(), op, &broken, &unexpected)) << unexpected << ctx->errstr;
      op.ApplyTo(model);
    }
    // A pipelined burst: every reply is read before stopping.
    std::vector<Op> burst;
    for (int i = 0; i < 30; ++i) {
      burst.push_back(RandomOp(rng, sids));
      std::vector<std::string> args = burst.back().Args();
      std::vector<const char*> argv;
      std::vector<size_t> lens;
      for (const auto& a : args) argv.push_back(a.data()), lens.push_back(a.size());
      ASSERT_EQ(redisAppendCommandArgv(ctx.get(), static_cast<int>(args.size()), argv.data(),
                                       lens.data()),
                REDIS_OK);
    }
    for (const Op& op : burst) {
      void* raw = nullptr;
      ASSERT_EQ(redisGetReply(ctx.get(), &raw), REDIS_OK) << ctx->errstr;
      RedisReply r(static_cast<redisReply*>(raw));
      ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
      op.ApplyTo(model);
    }
    ASSERT_EQ(Verify(ctx.get(), sids, model, {}), "") << "before the restart";
    ctx.reset();
    if (how == "sigterm") {
      std::string text;
      ASSERT_TRUE(server.Stop(&text)) << text;
    } else {
      auto c = RawConnection::Tcp(server.port());
      ASSERT_NE(c, nullptr);
      ASSERT_TRUE(c->Send(Multibulk({"SHUTDOWN"})));
      std::string extra;
      EXPECT_TRUE(c->WaitClosed(10s, &extra)) << "SHUTDOWN left the connection open";
      EXPECT_EQ(extra, "") << "SHUTDOWN replied";
      ASSERT_TRUE(server.WaitForExit(20s)) << "the server did not exit after SHUTDOWN";
      std::string text;
      ASSERT_TRUE(server.Stop(&text)) << text;
    }
    ASSERT_TRUE(server.Restart(options));
    ctx = Connect(server);
    ASSERT_NE(ctx, nullptr);
    ASSERT_EQ(Verify(ctx.get(), sids, model, {}), "") << "after the restart";
    EXPECT_EQ(InfoField(ctx.get(), "aof_last_write_status"), "ok");
    EXPECT_NE(InfoField(ctx.get(), "recovered_records"), "0");
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, DurabilityRestartTest,
                         ::testing::Combine(::testing::Values("always", "everysec", "no"),
                                            ::testing::Values("sigterm", "shutdown")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

// Under everysec and no a connection writes its own pipelined batch's records before it replies
// (no round trip through the log thread): the replies still wait for the write, so what was
// acknowledged is in the file and survives a SIGKILL (the page cache outlives the process).
class DurabilityCallerWritesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DurabilityCallerWritesTest, PipelinedWritesAreAcknowledgedOnceWrittenAndSurviveSigkill) {
  ServerProcess::Options options;
  options.flags = {"--appendfsync", GetParam()};
  ServerProcess server;
  ASSERT_TRUE(server.Start(options));
  constexpr int kBatches = 50, kPerBatch = 40;
  {
    auto ctx = Connect(server);
    ASSERT_NE(ctx, nullptr);
    for (int b = 0; b < kBatches; ++b) {
      for (int i = 0; i < kPerBatch; ++i) {
        const std::string key = "k" + std::to_string(b * kPerBatch + i);
        const std::string value = "v" + std::to_string(b) + "-" + std::to_string(i);
        const char* argv[] = {"SET", key.data(), value.data()};
        const size_t lens[] = {3, key.size(), value.size()};
        ASSERT_EQ(redisAppendCommandArgv(ctx.get(), 3, argv, lens), REDIS_OK);
      }
      for (int i = 0; i < kPerBatch; ++i) {
        void* raw = nullptr;
        ASSERT_EQ(redisGetReply(ctx.get(), &raw), REDIS_OK) << ctx->errstr;
        RedisReply r(static_cast<redisReply*>(raw));
        ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
      }
    }
    // Every acknowledged record is written, and connections wrote (nearly) all batches.
    const uint64_t written = std::stoull(InfoField(ctx.get(), "log_written_lsn"));
    EXPECT_GE(written, uint64_t{kBatches * kPerBatch});
    const uint64_t caller_writes = std::stoull(InfoField(ctx.get(), "log_caller_writes"));
    EXPECT_GE(caller_writes, uint64_t{kBatches / 2})
        << "connections left the writes to the log thread";
  }
  ASSERT_TRUE(server.Kill());
  ASSERT_TRUE(server.Restart(options));
  auto ctx = Connect(server);
  ASSERT_NE(ctx, nullptr);
  for (int b = 0; b < kBatches; ++b) {
    for (int i = 0; i < kPerBatch; ++i) {
      const std::string key = "k" + std::to_string(b * kPerBatch + i);
      RedisReply r = HiredisCommand(ctx.get(), {"GET", key});
      ASSERT_NE(r, nullptr) << ctx->errstr;
      ASSERT_EQ(r->type, REDIS_REPLY_STRING) << key << " lost: " << DescribeReply(r.get());
      EXPECT_EQ(std::string(r->str, r->len), "v" + std::to_string(b) + "-" + std::to_string(i));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, DurabilityCallerWritesTest, ::testing::Values("everysec", "no"),
                         [](const auto& info) { return info.param; });

TEST(DurabilityRestartUnderLoadTest, SigtermAndShutdownDuringConcurrentWritesExitCleanly) {
  // Stops with writes in flight: the server must exit with status 0 (replies still waiting for
  // the log at that moment included) and keep every acknowledged write.
  const uint64_t seed = EnvSeed("PREFIXD_CRASH_SEED");
  ServerProcess::Options options;
  options.flags = {"--appendfsync", "always", "--log-segment-size", "4mb"};
  options.startup_timeout = 60s;
  ServerProcess server;
  ASSERT_TRUE(server.Start(options));
  WriterRounds loop(server, options, seed);
  for (int round = 0; round < 8; ++round) {
    SCOPED_TRACE("round " + std::to_string(round) + " of seed " + std::to_string(seed));
    bool shutdown_command = round % 2 == 1;
    ASSERT_NO_FATAL_FAILURE(loop.Round([&](std::mt19937_64& rng) {
      std::this_thread::sleep_for(Millis(50 + rng() % 250));
      if (shutdown_command) {
        if (auto c = RawConnection::Tcp(server.port())) c->Send(Multibulk({"SHUTDOWN"}));
        EXPECT_TRUE(server.WaitForExit(20s)) << "no exit 20 s after SHUTDOWN";
      }
      std::string how;
      EXPECT_TRUE(server.Stop(&how)) << (shutdown_command ? "SHUTDOWN: " : "SIGTERM: ") << how;
    }));
  }
  std::cout << "[ restart ] 8 graceful stops under load, seed " << seed << ": " << loop.Summary()
            << std::endl;
}

// ---------------------------------------------------------------------------------------------
// c. Snapshots and compaction

TEST(DurabilitySnapshotTest, BgsaveDuringConcurrentWritesLosesNothing) {
  ServerProcess::Options options;
  options.flags = {"--appendfsync",
                   "everysec",
                   "--log-segment-size",
                   "1mb",
                   "--auto-aof-rewrite-percentage",
                   "0"};
  options.startup_timeout = 60s;
  ServerProcess server;
  ASSERT_TRUE(server.Start(options));
  constexpr int kWriters = 4;
  std::vector<std::vector<std::string>> sids(kWriters);
  std::vector<std::string> all_sids;
  for (int t = 0; t < kWriters; ++t) {
    for (int s = 0; s < 5; ++s) {
      sids[t].push_back("b" + std::to_string(t) + "-" + std::to_string(s));
      all_sids.push_back(sids[t].back());
    }
  }
  std::vector<Model> models(kWriters);
  std::vector<std::string> failures(kWriters);
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      auto ctx = Connect(server);
      if (!ctx) return;
      std::mt19937_64 rng(1000 + t);
      while (!stop.load()) {
        Op op = RandomOp(rng, sids[t]);
        bool broken = false;
        if (!Send(ctx.get(), op, &broken, &failures[t])) {
          if (broken) failures[t] = std::string("connection broke: ") + ctx->errstr;
          return;
        }
        op.ApplyTo(models[t]);
      }
    });
  }
  auto admin = Connect(server);
  ASSERT_NE(admin, nullptr);
  int started = 0;
  auto until = Clock::now() + 3s;
  while (Clock::now() < until) {
    std::this_thread::sleep_for(100ms);
    RedisReply r = HiredisCommand(admin.get(), {"BGSAVE"});
    ASSERT_NE(r, nullptr);
    if (r->type == REDIS_REPLY_STATUS) ++started;
  }
  stop = true;
  for (auto& w : writers) w.join();
  for (int t = 0; t < kWriters; ++t) EXPECT_EQ(failures[t], "") << "writer " << t;
  ASSERT_TRUE(WaitBgsaveDone(admin.get()));
  EXPECT_GE(started, 3);
  EXPECT_EQ(InfoField(admin.get(), "rdb_last_bgsave_status"), "ok");
  EXPECT_TRUE(fs::exists(server.data_dir() + "/snapshot.pds"));
  Model model;
  for (const Model& m : models) model.insert(m.begin(), m.end());
  ASSERT_EQ(Verify(admin.get(), all_sids, model, {}), "") << "before the restart";
  admin.reset();
  // A crash, not a clean stop: nothing acknowledged may depend on the shutdown flush.
  ASSERT_TRUE(server.Kill());
  ASSERT_TRUE(server.Restart(options));
  auto ctx = Connect(server);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(Verify(ctx.get(), all_sids, model, {}), "") << "after SIGKILL and restart";
}

TEST(DurabilitySnapshotTest, RestartAfterCompactionEqualsTheStateBeforeIt) {
  ServerProcess::Options options;
  options.flags = {
      "--appendfsync", "always", "--log-segment-size", "2mb", "--auto-aof-rewrite-percentage", "0"};
  options.startup_timeout = 60s;
  ServerProcess server;
  ASSERT_TRUE(server.Start(options));
  auto ctx = Connect(server);
  ASSERT_NE(ctx, nullptr);
  std::vector<std::string> sids = {"c0", "c1", "c2"};
  Model model;
  std::mt19937_64 rng(7);
  // ~24 MB of overwrites for at most 12 live keys.
  for (int i = 0; i < 48; ++i) {
    Op op;
    op.kind = Op::kStore;
    op.sid = sids[i % 3];
    op.layers.emplace_back(i % kLayers, Value{true, 512 * 1024, rng()});
    bool broken = false;
    std::string unexpected;
    ASSERT_TRUE(Send(ctx.get(), op, &broken, &unexpected)) << unexpected;
    op.ApplyTo(model);
  }
  Op drop;
  drop.kind = Op::kDropSession;
  drop.sid = "c2";
  for (uint32_t l = 0; l < kLayers; ++l) drop.layers.emplace_back(l, Value{});
  bool broken = false;
  std::string unexpected;
  ASSERT_TRUE(Send(ctx.get(), drop, &broken, &unexpected)) << unexpected;
  drop.ApplyTo(model);
  uint64_t before = LogBytes(server.data_dir());
  ASSERT_GT(before, 20u << 20);
  ASSERT_EQ(Verify(ctx.get(), sids, model, {}), "");

  RedisReply r = HiredisCommand(ctx.get(), {"BGSAVE"});
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
  ASSERT_TRUE(WaitBgsaveDone(ctx.get()));
  EXPECT_EQ(InfoField(ctx.get(), "rdb_last_bgsave_status"), "ok");
  EXPECT_EQ(InfoField(ctx.get(), "rdb_saves"), "1");
  ASSERT_TRUE(fs::exists(server.data_dir() + "/snapshot.pds"));
  uint64_t snapshot = fs::file_size(server.data_dir() + "/snapshot.pds");
  uint64_t after = LogBytes(server.data_dir());
  EXPECT_LT(after, before / 4) << "compaction left " << after << " of " << before << " log bytes";
  EXPECT_GT(snapshot, 8u * 512 * 1024);
  EXPECT_LT(snapshot, 9u * 512 * 1024);
  EXPECT_EQ(InfoField(ctx.get(), "aof_current_size"), std::to_string(after));
  ASSERT_EQ(Verify(ctx.get(), sids, model, {}), "") << "right after compaction";
  ctx.reset();

  for (bool crash : {false, true}) {
    SCOPED_TRACE(crash ? "SIGKILL" : "SIGTERM");
    if (crash) {
      ASSERT_TRUE(server.Kill());
    } else {
      std::string text;
      ASSERT_TRUE(server.Stop(&text)) << text;
    }
    ASSERT_TRUE(server.Restart(options));
    ctx = Connect(server);
    ASSERT_NE(ctx, nullptr);
    EXPECT_EQ(Verify(ctx.get(), sids, model, {}), "") << "after a restart on the compacted log";
  }
}

// ---------------------------------------------------------------------------------------------
// d. Disk full

// A small tmpfs mounted for one test and unmounted (lazily, if busy) when it ends.
class TmpfsMount {
 public:
  // Empty on success, otherwise why mounting was not possible.
  std::string Mount(size_t bytes) {
    std::string base = (fs::temp_directory_path() / "prefixd-full-XXXXXX").string();
    std::vector<char> tmpl(base.begin(), base.end());
    tmpl.push_back('\0');
    if (::mkdtemp(tmpl.data()) == nullptr) return std::string("mkdtemp: ") + strerror(errno);
    dir_ = tmpl.data();
    std::string data = "size=" + std::to_string(bytes);
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, data.c_str()) != 0) {
      return std::string("mount -t tmpfs: ") + strerror(errno);
    }
    mounted_ = true;
    return {};
  }
  ~TmpfsMount() {
    if (mounted_ && ::umount(dir_.c_str()) != 0) ::umount2(dir_.c_str(), MNT_DETACH);
    if (!dir_.empty()) ::rmdir(dir_.c_str());
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

std::string StoreRequest(const std::string& sid, uint32_t layer, const Value& v) {
  return Multibulk({"SSM.PREFIX.STORE", sid, std::to_string(layer), Materialize(v)});
}

// How a test makes the data directory run out of space: a small tmpfs filled almost full
// (needs root or CAP_SYS_ADMIN), or, as any user, a file-size limit on the server process
// (RLIMIT_FSIZE set with prlimit, SIGXFSZ ignored: a write past it fails with EFBIG, the way a
// full disk fails it with ENOSPC). Both run: the second makes these tests run everywhere.
enum class FullDisk { kTmpfs, kFileSizeLimit };

class DiskFiller {
 public:
  explicit DiskFiller(FullDisk kind) : kind_(kind) {}
  // Leaves about `free_bytes` for the server; returns why that is not possible here, or empty.
  std::string Prepare(uint64_t free_bytes) {
    free_bytes_ = free_bytes;
    if (kind_ == FullDisk::kFileSizeLimit) {
      ::signal(SIGXFSZ, SIG_IGN);  // inherited by the server: the write fails instead
      return {};
    }
    if (std::string why = mount_.Mount(32u << 20); !why.empty()) {
      return "needs a 32 MiB tmpfs (root or CAP_SYS_ADMIN): " + why;
    }
    filler_ = mount_.dir() + "/filler";
    std::ofstream out(filler_, std::ios::binary);
    std::string chunk(1 << 20, 'F');
    for (uint64_t i = 0; i < (32u << 20) / chunk.size() - free_bytes / chunk.size(); ++i) {
      out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    }
    if (!out.good()) return "can't write the filler file";
    return {};
  }
  // The data directory to start the server on (empty: its own temp root).
  std::string data_dir() const { return kind_ == FullDisk::kTmpfs ? mount_.dir() + "/data" : ""; }
  // Call once the server runs.
  void Apply(const ServerProcess& server) {
    if (kind_ == FullDisk::kFileSizeLimit) SetLimit(server.pid(), free_bytes_);
  }
  // Gives the space back.
  void Free(const ServerProcess& server) {
    if (kind_ == FullDisk::kFileSizeLimit) {
      // A stopped server needs nothing: the next start runs without the limit.
      rlimit none{RLIM_INFINITY, RLIM_INFINITY};
      if (::prlimit(server.pid(), RLIMIT_FSIZE, &none, nullptr) != 0) ASSERT_EQ(errno, ESRCH);
    } else {
      ASSERT_EQ(::unlink(filler_.c_str()), 0);
    }
  }
  std::string_view error_text() const {
    return kind_ == FullDisk::kTmpfs ? "No space left on device" : "File too large";
  }

 private:
  static void SetLimit(pid_t pid, rlim_t bytes) {
    rlimit limit{bytes, RLIM_INFINITY};
    ASSERT_EQ(::prlimit(pid, RLIMIT_FSIZE, &limit, nullptr), 0) << strerror(errno);
  }

  FullDisk kind_;
  TmpfsMount mount_;  // unmounted after the server (declared in the test before it) stops
  std::string filler_;
  uint64_t free_bytes_ = 0;
};

class DurabilityDiskFullTest : public ::testing::TestWithParam<FullDisk> {};

TEST_P(DurabilityDiskFullTest, WritesAreRefusedWhileTheDiskIsFullAndResumeAfterwards) {
  DiskFiller disk(GetParam());  // declared first: released after the server has stopped
  if (std::string why = disk.Prepare(6u << 20); !why.empty()) GTEST_SKIP() << why;
  ServerProcess::Options options;
  options.data_dir = disk.data_dir();
  options.flags = {"--auto-aof-rewrite-percentage", "0"};
  ServerProcess server;
  ASSERT_TRUE(server.Start(options));
  ASSERT_NO_FATAL_FAILURE(disk.Apply(server));

  Model model;
  const std::string sid = "full";
  auto writer = RawConnection::Tcp(server.port());
  ASSERT_NE(writer, nullptr);
  std::optional<std::pair<uint32_t, Value>> held;  // sent, reply held back
  bool refused = false;
  uint32_t layer = 0;
  for (; layer < 200 && !held && !refused; ++layer) {
    Value v{true, 256 * 1024 + layer, 5000 + layer};
    ASSERT_TRUE(writer->Send(StoreRequest(sid, layer, v)));
    std::optional<std::string> reply = writer->ReadReply(3s);
    if (!reply) {
      held.emplace(layer, v);
    } else if (*reply == "+OK\r\n") {
      model[{sid, layer}] = v;
    } else {
      ASSERT_EQ(reply->rfind("-MISCONF Errors writing to the AOF file: ", 0), 0u) << *reply;
      refused = true;
    }
  }
  ASSERT_TRUE(held || refused) << "the log never ran out of space";
  ASSERT_GT(model.size(), 0u) << "nothing could be written at all";

  // Another client's write is refused with -MISCONF naming the error.
  auto other = RawConnection::Tcp(server.port());
  ASSERT_NE(other, nullptr);
  std::string reply = other->Call(Multibulk({"SSM.PREFIX.STORE", "other", "0", "small"}), 5s);
  EXPECT_EQ(reply.rfind("-MISCONF Errors writing to the AOF file: ", 0), 0u) << reply;
  EXPECT_NE(reply.find(disk.error_text()), std::string::npos) << reply;

  // Reads still work, and every acknowledged write is readable.
  auto reader = Connect(server);
  ASSERT_NE(reader, nullptr);
  std::vector<std::string> sids = {sid};
  {
    std::string problems;
    for (const auto& [key, value] : model) {
      RedisReply r =
          HiredisCommand(reader.get(), {"SSM.PREFIX.FETCH", sid, std::to_string(key.second)});
      if (!r || r->type != REDIS_REPLY_STRING ||
          std::string_view(r->str, r->len) != Materialize(value)) {
        problems += KeyName(key) + ": " + DescribeReply(r.get()) + "\n";
      }
    }
    EXPECT_EQ(problems, "") << "acknowledged writes unreadable while the disk is full";
  }
  EXPECT_EQ(InfoField(reader.get(), "aof_last_write_status"), "err");
  EXPECT_NE(InfoField(reader.get(), "aof_last_write_error"), "");

  // Free the space: the held write is acknowledged and new writes succeed within seconds.
  ASSERT_NO_FATAL_FAILURE(disk.Free(server));
  if (held) {
    std::optional<std::string> late = writer->ReadReply(10s);
    ASSERT_TRUE(late.has_value()) << "the held write was never answered after space was freed";
    EXPECT_EQ(*late, "+OK\r\n");
    if (*late == "+OK\r\n") model[{sid, held->first}] = held->second;
  }
  auto deadline = Clock::now() + 10s;
  bool accepted = false;
  for (uint32_t n = 0; Clock::now() < deadline && !accepted; ++n) {
    Value v{true, 1000 + n, 9000 + n};
    reply = other->Call(StoreRequest("after", n, v), 5s);
    if (reply == "+OK\r\n") {
      model[{"after", n}] = v;
      accepted = true;
    } else {
      ASSERT_EQ(reply.rfind("-MISCONF", 0), 0u) << reply;
      std::this_thread::sleep_for(100ms);
    }
  }
  ASSERT_TRUE(accepted) << "writes still refused 10 s after space was freed";
  EXPECT_EQ(InfoField(reader.get(), "aof_last_write_status"), "ok");
  for (uint32_t n = 100; n < 110; ++n) {
    Value v{true, 4096, 7000 + n};
    ASSERT_EQ(writer->Call(StoreRequest(sid, 1000 + n, v), 5s), "+OK\r\n");
    model[{sid, 1000 + n}] = v;
  }
  writer.reset();
  other.reset();
  reader.reset();

  for (bool crash : {false, true}) {
    SCOPED_TRACE(crash ? "after SIGKILL" : "after SIGTERM");
    if (crash) {
      ASSERT_TRUE(server.Kill());
    } else {
      std::string text;
      ASSERT_TRUE(server.Stop(&text)) << text;
    }
    ASSERT_TRUE(server.Restart(options)) << "restart after the disk-full episode failed";
    auto ctx = Connect(server);
    ASSERT_NE(ctx, nullptr);
    std::string problems;
    for (const auto& [key, value] : model) {
      RedisReply r =
          HiredisCommand(ctx.get(), {"SSM.PREFIX.FETCH", key.first, std::to_string(key.second)});
      if (!r || r->type != REDIS_REPLY_STRING ||
          std::string_view(r->str, r->len) != Materialize(value)) {
        problems += KeyName(key) + ": " + DescribeReply(r.get()) + "\n";
      }
    }
    EXPECT_EQ(problems, "") << "acknowledged writes lost across the restart";
    RedisReply r = HiredisCommand(ctx.get(), {"SSM.PREFIX.FETCH", "other", "0"});
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->type, REDIS_REPLY_NIL) << "a refused write was stored";
  }
  std::string log = server.ReadLog();
  EXPECT_NE(log.find("Log write failed"), std::string::npos);
  EXPECT_NE(log.find("succeed again"), std::string::npos);
}

TEST_P(DurabilityDiskFullTest, SnapshotAndShutdownWhileTheLogIsFullDoNotHang) {
  DiskFiller disk(GetParam());
  // ~4 MiB free: room for a small snapshot, not for the 6 MiB record below.
  if (std::string why = disk.Prepare(4u << 20); !why.empty()) GTEST_SKIP() << why;
  ServerProcess::Options options;
  options.data_dir = disk.data_dir();
  options.flags = {"--auto-aof-rewrite-percentage", "0"};
  ServerProcess server;
  ASSERT_TRUE(server.Start(options));
  ASSERT_NO_FATAL_FAILURE(disk.Apply(server));
  Model model;
  auto writer = RawConnection::Tcp(server.port());
  ASSERT_NE(writer, nullptr);
  for (uint32_t i = 0; i < 10; ++i) {
    Value v{true, 1024, 40 + i};
    ASSERT_EQ(writer->Call(StoreRequest("small", i, v), 5s), "+OK\r\n");
    model[{"small", i}] = v;
  }
  Value big{true, 6u << 20, 99};
  ASSERT_TRUE(writer->Send(StoreRequest("big", 0, big)));
  std::optional<std::string> reply = writer->ReadReply(3s);
  ASSERT_FALSE(reply.has_value()) << "a 6 MiB write fitted in ~4 MiB: " << *reply;
  auto admin = Connect(server);
  ASSERT_NE(admin, nullptr);
  ASSERT_EQ(InfoField(admin.get(), "aof_last_write_status"), "err");

  RedisReply r = HiredisCommand(admin.get(), {"BGSAVE"});
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
  // The snapshot may succeed or fail, but it must end while the log still cannot be written.
  EXPECT_TRUE(WaitBgsaveDone(admin.get(), 10s))
      << "BGSAVE still in progress 10 s after it started (the log is full and stays full)";
  admin.reset();
  writer.reset();
  auto stop_start = Clock::now();
  std::string how;
  EXPECT_TRUE(server.Stop(&how)) << "SIGTERM while the log is full: " << how;
  EXPECT_LT(Clock::now() - stop_start, 10s);

  ASSERT_NO_FATAL_FAILURE(disk.Free(server));  // the restart runs without the limit
  ASSERT_TRUE(server.Restart(options));
  auto ctx = Connect(server);
  ASSERT_NE(ctx, nullptr);
  // The unacknowledged big write may be there or not, but whole.
  Op big_op;
  big_op.sid = "big";
  big_op.layers.emplace_back(0, big);
  EXPECT_EQ(Verify(ctx.get(), {"small", "big"}, model, {big_op}), "");
}

INSTANTIATE_TEST_SUITE_P(Kinds, DurabilityDiskFullTest,
                         ::testing::Values(FullDisk::kTmpfs, FullDisk::kFileSizeLimit),
                         [](const auto& info) {
                           return info.param == FullDisk::kTmpfs ? "tmpfs" : "file_size_limit";
                         });

// ---------------------------------------------------------------------------------------------
// e. Damaged logs

class DurabilityDamageTest : public ::testing::Test {
 protected:
  // Starts the server and writes `count` layers of session "d", 10 KB each (one record each).
  void WriteRecords(int count) {
    ASSERT_TRUE(server_.Start());
    auto ctx = Connect(server_);
    ASSERT_NE(ctx, nullptr);
    for (int i = 0; i < count; ++i) {
      Op op;
      op.sid = "d";
      op.layers.emplace_back(i, Value{true, 10000, 300u + i});
      bool broken = false;
      std::string unexpected;
      ASSERT_TRUE(Send(ctx.get(), op, &broken, &unexpected)) << unexpected;
      op.ApplyTo(model_);
    }
  }
  // Finds the segment holding those records (the largest) and its record offsets.
  void FindSegment(int count) {
    auto segments = LogSegments(server_.data_dir());
    ASSERT_FALSE(segments.empty());
    segment_ = std::max_element(segments.begin(), segments.end(), [](const auto& a, const auto& b) {
                 return a.bytes < b.bytes;
               })->path;
    starts_ = RecordStarts(segment_);
    ASSERT_EQ(starts_.size(), static_cast<size_t>(count)) << segment_;
  }
  // Compares layers 0 .. count-1 of session "d" with `model_`; returns the mismatches.
  std::string Check(int count) {
    auto ctx = Connect(server_);
    if (!ctx) return "can't connect";
    std::string problems;
    for (int i = 0; i < count; ++i) {
      RedisReply r = HiredisCommand(ctx.get(), {"SSM.PREFIX.FETCH", "d", std::to_string(i)});
      if (!Matches(r && r->type == REDIS_REPLY_STRING
                       ? std::optional<std::string>(std::string(r->str, r->len))
                       : std::nullopt,
                   Lookup(model_, {"d", static_cast<uint32_t>(i)}))) {
        problems += "layer " + std::to_string(i) + ": " + DescribeReply(r.get()) + "\n";
      }
    }
    return problems;
  }

  ServerProcess server_;
  Model model_;
  std::string segment_;
  std::vector<uint64_t> starts_;
};

TEST_F(DurabilityDamageTest, CorruptRecordStopsStartupUnlessSkipCorrupt) {
  constexpr int kCount = 10;
  ASSERT_NO_FATAL_FAILURE(WriteRecords(kCount));
  std::string text;
  ASSERT_TRUE(server_.Stop(&text)) << text;
  ASSERT_NO_FATAL_FAILURE(FindSegment(kCount));
  {
    // Flip one bit in the middle of record 4's blob.
    std::fstream f(segment_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(starts_[4] + 5000));
    char c = 0;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(starts_[4] + 5000));
    f.put(static_cast<char>(c ^ 0x08));
    ASSERT_TRUE(f.good());
  }
  uint64_t size = fs::file_size(segment_);

  size_t log_mark = server_.ReadLog().size();
  ServerProcess::Options options;
  options.startup_timeout = 20s;
  EXPECT_FALSE(server_.Restart(options)) << "the server started on a corrupt log";
  ASSERT_TRUE(server_.exit_status().has_value());
  int status = *server_.exit_status();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0)
      << "expected a non-zero exit, got wait status " << status;
  std::string log = server_.ReadLog().substr(log_mark);
  EXPECT_NE(log.find(segment_), std::string::npos) << "the log does not name the file:\n" << log;
  EXPECT_NE(log.find("offset " + std::to_string(starts_[4])), std::string::npos)
      << "the log does not name offset " << starts_[4] << ":\n"
      << log;
  EXPECT_EQ(fs::file_size(segment_), size) << "a refused start changed the damaged segment";

  log_mark = server_.ReadLog().size();
  options.flags = {"--log-skip-corrupt", "yes"};
  ASSERT_TRUE(server_.Restart(options));
  log = server_.ReadLog().substr(log_mark);
  std::string expected = "Skipping " + std::to_string(starts_[5] - starts_[4]) +
                         " corrupt bytes [" + std::to_string(starts_[4]) + ", " +
                         std::to_string(starts_[5]) + ") of " + segment_;
  EXPECT_NE(log.find(expected), std::string::npos) << "expected '" << expected << "' in\n" << log;
  model_.erase({"d", 4});
  EXPECT_EQ(Check(kCount), "");

  // A snapshot retires the damaged segment: later plain starts work and hold the same data.
  {
    auto ctx = Connect(server_);
    ASSERT_NE(ctx, nullptr);
    RedisReply r = HiredisCommand(ctx.get(), {"BGSAVE"});
    ASSERT_NE(r, nullptr);
    ASSERT_TRUE(WaitBgsaveDone(ctx.get()));
    EXPECT_EQ(InfoField(ctx.get(), "rdb_last_bgsave_status"), "ok");
  }
  ASSERT_TRUE(server_.Stop(&text)) << text;
  EXPECT_FALSE(fs::exists(segment_)) << "compaction kept the damaged segment";
  ASSERT_TRUE(server_.Restart());
  EXPECT_EQ(Check(kCount), "");
}

TEST_F(DurabilityDamageTest, TornTailIsCutAtStartup) {
  constexpr int kCount = 8;
  ASSERT_NO_FATAL_FAILURE(WriteRecords(kCount));
  ASSERT_TRUE(server_.Kill());
  ASSERT_NO_FATAL_FAILURE(FindSegment(kCount));
  uint64_t cut = starts_.back() + 32 + 1234;
  ASSERT_EQ(::truncate(segment_.c_str(), static_cast<off_t>(cut)), 0);
  size_t log_mark = server_.ReadLog().size();
  ASSERT_TRUE(server_.Restart());
  std::string log = server_.ReadLog().substr(log_mark);
  EXPECT_NE(log.find("torn tail at offset " + std::to_string(starts_.back())), std::string::npos)
      << log;
  EXPECT_EQ(fs::file_size(segment_), starts_.back());
  model_.erase({"d", kCount - 1});
  EXPECT_EQ(Check(kCount), "");
  // And the next start finds a clean log.
  std::string text;
  ASSERT_TRUE(server_.Stop(&text)) << text;
  log_mark = server_.ReadLog().size();
  ASSERT_TRUE(server_.Restart());
  EXPECT_EQ(server_.ReadLog().substr(log_mark).find("torn"), std::string::npos);
  EXPECT_EQ(Check(kCount), "");
}

// Issue 8, finding 2: after raising vstore-max-tokens (to 2^40 then; 2^28 is its largest value
// now), one V.STOREBATCH at the highest start dropped the connection without a reply, and every
// later start aborted on std::bad_alloc. Now every change is checked before it is logged: a
// write past the limit is refused and never reaches the log; the write at the last row is
// accepted and costs one chunk (the chunk table is sparse), and the next start replays it.
TEST(DurabilityLimitsTest, AStoreBatchAtTheHighestStartIsCheckedBeforeItIsLoggedAndReplays) {
  ServerProcess server;
  ASSERT_TRUE(server.Start());
  std::string row(65536 * 4, '\0');
  for (size_t i = 0; i < 65536; ++i) {
    const float value = static_cast<float>(i % 1000) * 0.25f - 100.0f;
    std::memcpy(row.data() + i * 4, &value, 4);
  }
  {
    auto ctx = ConnectHiredis(server.port());
    ASSERT_NE(ctx, nullptr);
    RedisReply r = HiredisCommand(ctx.get(), {"CONFIG", "SET", "vstore-max-tokens", "268435457"});
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->type, REDIS_REPLY_ERROR) << DescribeReply(r.get());
    r = HiredisCommand(ctx.get(), {"CONFIG", "SET", "vstore-max-tokens", "268435456"});
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
    r = HiredisCommand(ctx.get(), {"V.CREATE", "t", "65536", "VQUANT", "fp32"});
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->type, REDIS_REPLY_INTEGER) << DescribeReply(r.get());
    // One past the limit: refused with a reply, before anything is logged.
    r = HiredisCommand(ctx.get(), {"V.STOREBATCH", "t", "0", "268435456", "1", row});
    ASSERT_NE(r, nullptr) << "the connection dropped: " << ctx->errstr;
    ASSERT_EQ(r->type, REDIS_REPLY_ERROR) << DescribeReply(r.get());
    // At the limit: accepted, cheap.
    r = HiredisCommand(ctx.get(), {"V.STOREBATCH", "t", "0", "268435455", "1", row});
    ASSERT_NE(r, nullptr) << "the connection dropped: " << ctx->errstr;
    ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
    r = HiredisCommand(ctx.get(), {"V.STOREBATCH", "t", "0", "3", "1", row});
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
  }
  ASSERT_TRUE(server.Kill());
  ASSERT_TRUE(server.Restart()) << "the start after the high write failed";
  auto ctx = ConnectHiredis(server.port());
  ASSERT_NE(ctx, nullptr);
  RedisReply r = HiredisCommand(ctx.get(), {"V.INFO", "t"});
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->type, REDIS_REPLY_STRING) << DescribeReply(r.get());
  const std::string info(r->str, r->len);
  EXPECT_NE(info.find("total_tokens:268435456\r\n"), std::string::npos) << info;
  r = HiredisCommand(ctx.get(), {"V.FETCH", "t", "0", "268435455"});
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->type, REDIS_REPLY_STRING) << DescribeReply(r.get());
  EXPECT_TRUE(std::string_view(r->str, r->len) == row) << "the replayed row differs";
}

// Issue 9, item 3: a value holding copies of the data directory's files (a backup tool storing
// them, or anyone who wants to) holds bytes that look like records. Cut inside that value's
// record, as a crash mid-write leaves it, the log must still read as a torn tail: the start
// succeeds, the earlier values are intact and the torn one is absent. The same value inside a
// snapshot, cut there, is corruption reported with the snapshot's name and the record's offset.
TEST(DurabilityFramingTest, ATornValueHoldingCopiesOfTheFilesIsCutNotMistakenForCorruption) {
  ServerProcess server;
  ServerProcess::Options options;
  options.flags = {"--appendfsync", "always"};
  ASSERT_TRUE(server.Start(options));
  const std::string first = MakeBlob(5000, 1), second = MakeBlob(3000, 2);
  auto slurp = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  std::string copies;
  {
    auto ctx = ConnectHiredis(server.port());
    ASSERT_NE(ctx, nullptr);
    for (auto args : {std::vector<std::string_view>{"SSM.PREFIX.STORE", "a", "0", first},
                      std::vector<std::string_view>{"SAVE"},
                      std::vector<std::string_view>{"SSM.PREFIX.STORE", "a", "1", second}}) {
      RedisReply r = HiredisCommand(ctx.get(), args);
      ASSERT_NE(r, nullptr);
      ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
    }
    for (int round = 0; round < 2; ++round) {
      for (const auto& segment : LogSegments(server.data_dir())) copies += slurp(segment.path);
      copies += slurp(server.data_dir() + "/snapshot.pds");
    }
    RedisReply r = HiredisCommand(ctx.get(), {"SSM.PREFIX.STORE", "b", "0", copies});
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
  }
  ASSERT_TRUE(server.Kill());
  const std::string newest = LogSegments(server.data_dir()).back().path;
  const std::vector<uint64_t> starts = RecordStarts(newest);
  ASSERT_EQ(starts.size(), 2u) << newest;
  const std::string whole = slurp(newest);
  auto expect_value = [&](redisContext* ctx, const char* sid, const char* layer,
                          const std::string* want) {
    RedisReply r = HiredisCommand(ctx, {"SSM.PREFIX.FETCH", sid, layer});
    ASSERT_NE(r, nullptr);
    if (want == nullptr) {
      EXPECT_EQ(r->type, REDIS_REPLY_NIL) << sid << "/" << layer << ": " << DescribeReply(r.get());
    } else {
      ASSERT_EQ(r->type, REDIS_REPLY_STRING) << sid << "/" << layer;
      EXPECT_TRUE(std::string(r->str, r->len) == *want) << sid << "/" << layer << " differs";
    }
  };
  // Cut just after the first copy of this very segment, in the middle, and one byte short.
  const uint64_t value_at = starts[1] + 32 + 4 + 1 + 4 + 4 + 8;
  for (uint64_t cut : {value_at + whole.size() / 2 + 40, starts[1] + (whole.size() - starts[1]) / 2,
                       uint64_t{whole.size()} - 1}) {
    SCOPED_TRACE("log cut at " + std::to_string(cut) + " of " + std::to_string(whole.size()));
    {
      std::ofstream out(newest, std::ios::binary | std::ios::trunc);
      out.write(whole.data(), static_cast<std::streamsize>(cut));
    }
    // The crash state again: the segment the last start opened goes.
    for (const auto& segment : LogSegments(server.data_dir())) {
      if (segment.path > newest) fs::remove(segment.path);
    }
    size_t log_mark = server.ReadLog().size();
    ASSERT_TRUE(server.Restart(options)) << "refused to start:\n"
                                         << server.ReadLog().substr(log_mark);
    EXPECT_NE(
        server.ReadLog().substr(log_mark).find("torn tail at offset " + std::to_string(starts[1])),
        std::string::npos)
        << server.ReadLog().substr(log_mark);
    auto ctx = ConnectHiredis(server.port());
    ASSERT_NE(ctx, nullptr);
    ASSERT_NO_FATAL_FAILURE(expect_value(ctx.get(), "a", "0", &first));
    ASSERT_NO_FATAL_FAILURE(expect_value(ctx.get(), "a", "1", &second));
    ASSERT_NO_FATAL_FAILURE(expect_value(ctx.get(), "b", "0", nullptr));
    ASSERT_TRUE(server.Kill());
  }

  // The same value in a snapshot: a cut there is corruption, named, never a misread record.
  ASSERT_TRUE(server.Restart(options));
  {
    auto ctx = ConnectHiredis(server.port());
    ASSERT_NE(ctx, nullptr);
    for (auto args : {std::vector<std::string_view>{"SSM.PREFIX.STORE", "b", "0", copies},
                      std::vector<std::string_view>{"SAVE"}}) {
      RedisReply r = HiredisCommand(ctx.get(), args);
      ASSERT_NE(r, nullptr);
      ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
    }
  }
  std::string text;
  ASSERT_TRUE(server.Stop(&text)) << text;
  const std::string snapshot = server.data_dir() + "/snapshot.pds";
  const std::vector<uint64_t> records = RecordStarts(snapshot);
  uint64_t value_record = 0;
  for (uint64_t at : records) {
    if (at + 32 < fs::file_size(snapshot) && slurp(snapshot).substr(at + 36, 1) == "b")
      value_record = at;
  }
  ASSERT_NE(value_record, 0u);
  ASSERT_EQ(::truncate(snapshot.c_str(), static_cast<off_t>(value_record + 32 + copies.size() / 2)),
            0);
  size_t log_mark = server.ReadLog().size();
  EXPECT_FALSE(server.Restart(options)) << "started on a cut snapshot";
  const std::string log = server.ReadLog().substr(log_mark);
  EXPECT_NE(log.find(snapshot + " is corrupt at offset " + std::to_string(value_record)),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace prefixd::it
