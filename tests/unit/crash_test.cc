// Crash and disk-fault tests of the durability layer through the fault-injecting Env, runnable as
// a normal user. A scripted workload (SSM stores, MSTOREs and drops, small sessions kept in their
// keys' entries and one growing out of its entry, V-store creates, rows and
// drops, a KV.PREFIX registration, strings and MSETs, expiries set and cleared, FLUSHALL,
// snapshots; small segments so the log rotates) runs through the live path's steps (Check,
// EncodeRecord, Apply with the append as its hook) under appendfsync always.
// - Crash at every step: for each index N of the file-operation sequence the machine dies at
//   operation N (every later operation fails), the power cut drops unsynced data (or tears it at
//   a sector boundary) and undoes directory changes not fsynced; the restart must succeed, with
//   exactly the acknowledged state, or that plus the one change in flight (whole: an MSTORE or an
//   MSET is all or nothing). ctest runs a bounded sample; PREFIXD_CRASH_EVERY_STEP=1
//   (scripts/crash.sh) runs every N with both tears.
// - Disk full and I/O errors at every operation: a single failure anywhere (snapshot, rotation,
//   appends) loses nothing acknowledged, the log heals on retry, a failed snapshot can be
//   retried, and a restart holds the final state.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "persist/durability.h"
#include "persist/mutation.h"
#include "store/keyspace.h"
#include "store/state_store.h"
#include "store/vector_store.h"
#include "unit/fault_env.h"

namespace prefixd::persist {
namespace {

using testing::FaultEnv;

std::string Pattern(size_t size, char seed) {
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<char>(seed + i * 31 + (i >> 7));
  return out;
}

SsmPut Put(std::string sid, std::vector<std::pair<uint32_t, std::string>> layers) {
  SsmPut m{std::move(sid), {}};
  for (auto& [layer, blob] : layers) m.layers.emplace_back(layer, Bytes::CopyOf(blob));
  return m;
}

VStore Rows(std::string sid, uint32_t layer, uint64_t start, uint64_t rows, char seed) {
  const uint32_t dim = 8;
  return VStore{std::move(sid),
                layer,
                start,
                rows,
                dim,
                static_cast<uint32_t>(store::Tier::kFp32),
                Blob{{Bytes::CopyOf(std::string(rows * dim * 4, seed))}}};
}

// One step of the script: a change, an EXEC's changes (logged as one group: all or none), or a
// snapshot.
struct Step {
  std::optional<Mutation> change;
  std::vector<Mutation> group;
  bool snapshot() const { return !change && group.empty(); }
};

std::vector<Step> Script() {
  KvRegister reg;
  reg.ns = "ns", reg.key_index = 100, reg.value_index = 101, reg.kv_dim = 8;
  reg.tier = static_cast<uint32_t>(store::Tier::kFp32);
  const uint32_t fp32 = static_cast<uint32_t>(store::Tier::kFp32);
  const uint64_t later = uint64_t{4102444800000};  // 2100-01-01: set, never reached
  return {
      {Put("a", {{0, Pattern(3000, 1)}})},
      {Put("b", {{0, Pattern(700, 2)}, {1, Pattern(5000, 3)}, {2, Pattern(10, 4)}})},  // MSTORE
      {VCreate{"v", 7, 8, fp32}},
      {Rows("v", 0, 0, 40, 5)},
      {SsmDropLayer{"b", 1}},
      {KeyExpire{"b", later}},
      {KeyExpire{"v", later + 1}},
      {StringSet{"s", 0, later + 4, Blob{{Bytes::CopyOf("value")}}}},
      // A session small enough for its key's entry, then one layer dropped from it.
      {Put("e", {{0, Pattern(20, 20)}, {4, Pattern(100, 21)}})},
      {SsmDropLayer{"e", 0}},
      {StringSet{"t", 1, 0, Blob{{Bytes::CopyOf(Pattern(40000, 14))}}}},
      // MSET: one record for every key (a large value in the middle), all or nothing.
      {StringMultiSet{{StringSet{"m1", 0, 0, Blob{{Bytes::CopyOf("one")}}},
                       StringSet{"m2", 0, 0, Blob{{Bytes::CopyOf(Pattern(3000, 15))}}},
                       StringSet{"s", 2 << 1, 0, Blob{{Bytes::CopyOf("replaced")}}}}}},
      {std::nullopt},  // snapshot
      // It grows out of its entry: its layer 4 was written by a record before the snapshot.
      {Put("e", {{2, Pattern(700, 22)}})},
      {Put("a", {{0, Pattern(2500, 6)}, {3, Pattern(900, 7)}})},
      {Rows("v", 1, 30, 10, 8)},
      {KeyExpire{"v", 0}},                  // PERSIST
      {Put("ns", {{0, Pattern(30, 23)}})},  // small state the registration then takes
      {reg},
      {Rows("ns_pk", 0, 0, 4, 9)},
      {FlushAll{}},
      {Put("c", {{0, Pattern(4100, 10)}})},
      {VCreate{"w", 8, 8, fp32}},
      {Rows("w", 0, 0, 60, 11)},
      {KeyExpire{"c", later + 2}},
      {std::nullopt},  // snapshot
      {SsmDropSession{"c"}},
      {Put("f", {{1, Pattern(50, 24)}})},  // small, and kept to the end
      {Put("d", {{5, Pattern(6000, 12)}, {6, Pattern(1, 13)}})},
      {VDrop{"w"}},
      {KvDrop{"ns"}},
      {KeyExpire{"d", later + 3}},
      // EXEC: strings, an SSM store over two layers and a drop, past a segment's size (the group
      // goes whole into one segment) and across sectors, so a tear can cut inside it.
      {std::nullopt,
       {StringSet{"x1", 0, 0, Blob{{Bytes::CopyOf(Pattern(5000, 17))}}},
        Put("d", {{7, Pattern(4000, 18)}, {8, Pattern(300, 19)}}),
        StringSet{"x2", 0, later + 6, Blob{{Bytes::CopyOf("two")}}}, SsmDropLayer{"d", 6},
        StringDel{"x1"}}},
      {StringSet{"s", 1 | (2 << 1), 0, Blob{{Bytes::CopyOf("kept its expiry")}}}},
      {StringSet{"t", 0, later + 5, Blob{{Bytes::CopyOf("12")}}}},
      {StringDel{"t"}},
      {StringSet{"u", 2 << 1, 0, Blob{{Bytes::CopyOf("")}}}},
      {StringMultiSet{{StringSet{"m3", 1 << 1, 0, Blob{{Bytes::CopyOf("3")}}},
                       StringSet{"m4", 0, 0, Blob{{Bytes::CopyOf(Pattern(600, 16))}}},
                       StringSet{"m3", 0, 0, Blob{{Bytes::CopyOf("last wins")}}},
                       StringSet{"u", 0, 0, Blob{{Bytes::CopyOf("u again")}}}}}},
  };
}

// Everything a client can observe of the stores and the key directory, as one comparable text.
std::string Observe(const store::StateStore& ssm, const store::VectorStore& vectors,
                    const store::Keyspace& keys) {
  std::map<std::string, std::string> out;
  ssm.ForEachSession([&](const std::string& sid, const LayerBlobs& layers) {
    std::string& entry = out["ssm " + sid];
    for (const auto& [layer, blob] : layers) {
      entry += std::to_string(layer) + ":" + std::string(blob.view()) + "|";
    }
  });
  vectors.ForEachSession([&](const std::string& sid, const store::VectorSessionInfo& info,
                             const std::vector<store::LayerRead>& layers) {
    std::string& entry = out["v " + sid];
    entry = std::to_string(info.index) + "/" + std::to_string(info.dim) + "|";
    for (const store::LayerRead& layer : layers) {
      entry += std::to_string(layer.layer) + ":" + std::to_string(layer.length) + ":";
      auto read = vectors.ReadRange(sid, layer.layer, 0, layer.length);
      for (const Bytes& piece : read->second.rows.pieces) entry.append(piece.view());
    }
  });
  vectors.ForEachPrefix([&](const std::string& ns, const store::PrefixSpec& spec) {
    out["kv " + ns] = std::to_string(spec.kv_dim);
  });
  keys.ForEach([&](const std::string& key, const store::KeyInfo& info) {
    // An SSM session's encoding says where it is kept, which no client sees (OBJECT ENCODING
    // answers raw): a recovered session may be kept in the other home.
    const std::string encoding = store::HoldsValue(info.type)
                                     ? std::to_string(static_cast<int>(info.encoding))
                                     : std::string("-");
    out["key " + key] = std::string(store::KeyTypeName(info.type)) + " expires " +
                        std::to_string(info.expire_at_ms) + " encoding " + encoding + " value " +
                        std::string(info.value.view());
  });
  std::string text;
  for (const auto& [key, value] : out)
    text += key + "=" + std::to_string(value.size()) + "#" +
            std::to_string(std::hash<std::string>()(value)) + "\n";
  return text;
}

class World {
 public:
  World(const std::string& dir, Env* env, FsyncPolicy policy = FsyncPolicy::kAlways) {
    DurabilityOptions options;
    options.dir = dir;
    options.policy = policy;
    options.segment_bytes = 8192;  // the log rotates during the script
    options.auto_rewrite_percentage = 0;
    options.env = env;
    options.log_retry_interval = std::chrono::milliseconds(5);
    ssm_.KeepSmallSessionsIn(&keys_);  // as a database's store does
    durability_ =
        std::make_unique<Durability>(options, StoreSet(Stores{ssm_, &vectors_, 0, &keys_}));
  }
  std::string Open() { return durability_->Open().message(); }
  Durability& durability() { return *durability_; }
  std::string State() const { return Observe(ssm_, vectors_, keys_); }
  const store::Keyspace& keys() const { return keys_; }

  // A step's change, or its EXEC's changes as one group; returns the last record's lsn.
  uint64_t Change(const Step& step) {
    if (step.change) return Change(*step.change);
    Durability::Group group(durability_.get());
    for (const Mutation& m : step.group) EXPECT_EQ(Change(m), 0u) << "appended outside its group";
    return group.End();
  }
  // The live path's steps (engine/write_path.cc); returns the record's lsn.
  uint64_t Change(const Mutation& m) {
    EXPECT_TRUE(Check(m, Limits::Hard()).ok) << Describe(m);
    EncodedRecord record = EncodeRecord(m);
    uint64_t lsn = 0;
    Apply(m, Stores{ssm_, &vectors_, 0, &keys_},
          [&] { lsn = durability_->Append(std::move(record)); });
    return lsn;
  }
  // Whether record `lsn` is acknowledged: synced, as `always` promises before a reply.
  bool Acknowledged(uint64_t lsn) {
    durability_->Sync();
    return durability_->Stats().log.synced_lsn >= lsn;
  }
  void Close() { durability_.reset(); }

 private:
  store::StateStore ssm_{8};
  store::VectorStore vectors_{8};
  store::Keyspace keys_;
  std::unique_ptr<Durability> durability_;
};

class CrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/prefixd-crash-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  struct Run {
    std::string acknowledged;              // the state after the last acknowledged step
    std::optional<std::string> in_flight;  // with the change that was not acknowledged
    uint64_t operations = 0;
  };

  // Runs the script in a fresh directory until the env dies at operation `die_at` (0: never).
  Run RunScript(const std::string& dir, FaultEnv& env, uint64_t die_at) {
    env.DieAt(die_at);
    Run run;
    World world(dir, &env);
    run.acknowledged = world.State();
    if (!world.Open().empty()) {
      EXPECT_TRUE(env.dead()) << "Open failed on a healthy disk";
      run.operations = env.operations();
      return run;
    }
    for (const Step& step : Script()) {
      if (step.snapshot()) {
        std::string err = world.durability().Save().message();
        if (!err.empty()) {
          EXPECT_TRUE(env.dead()) << err;
          break;
        }
        continue;
      }
      const uint64_t lsn = world.Change(step);
      if (!world.Acknowledged(lsn)) {
        EXPECT_TRUE(env.dead()) << "a write was not acknowledged on a healthy disk";
        run.in_flight = world.State();
        break;
      }
      run.acknowledged = world.State();
    }
    world.Close();
    run.operations = env.operations();
    return run;
  }

  // Crashes at operation `n` with `tear`, restarts on the real file system and checks the state.
  void CrashAndRecover(uint64_t n, FaultEnv::Tear tear) {
    const std::string dir =
        root_ + "/" + std::to_string(n) + (tear == FaultEnv::Tear::kNone ? "n" : "t");
    FaultEnv env;
    Run run = RunScript(dir, env, n);
    env.Crash(tear);
    World after(dir, Env::Posix());
    const std::string err = after.Open();
    ASSERT_EQ(err, "") << "the start after a crash at operation " << n << " failed";
    const std::string state = after.State();
    const bool ok = state == run.acknowledged || (run.in_flight && state == *run.in_flight);
    EXPECT_TRUE(ok) << "crash at operation " << n << ": recovered\n"
                    << state << "acknowledged\n"
                    << run.acknowledged << "in flight\n"
                    << run.in_flight.value_or("(none)\n");
    after.Close();
    std::filesystem::remove_all(dir);
  }

  std::string root_;
};

TEST_F(CrashTest, EveryCrashPointRecoversTheAcknowledgedState) {
  FaultEnv clean;
  const Run full = RunScript(root_ + "/count", clean, 0);
  ASSERT_FALSE(full.in_flight.has_value());
  const uint64_t total = full.operations;
  ASSERT_GT(total, 60u) << "the script is shorter than expected";
  const bool every = std::getenv("PREFIXD_CRASH_EVERY_STEP") != nullptr;
  // The sample: the first operations (open, the first segment), then spread over the rest.
  const uint64_t stride = every ? 1 : std::max<uint64_t>(1, total / 40);
  uint64_t runs = 0;
  for (uint64_t n = 1; n <= total + 1; n += (n < 12 ? 1 : stride)) {
    ASSERT_NO_FATAL_FAILURE(CrashAndRecover(n, FaultEnv::Tear::kNone));
    if (every || n % 2 == 1) ASSERT_NO_FATAL_FAILURE(CrashAndRecover(n, FaultEnv::Tear::kSector));
    ++runs;
  }
  std::printf("crash points: %llu of %llu operations\n", static_cast<unsigned long long>(runs),
              static_cast<unsigned long long>(total));
}

// The script's final key directory, read back after a restart: the expiry logged last is kept,
// keys dropped after a snapshot recorded their expiry stay gone.
TEST_F(CrashTest, TheScriptsKeysAndExpiriesSurviveARestart) {
  FaultEnv clean;
  const std::string dir = root_ + "/keys";
  ASSERT_FALSE(RunScript(dir, clean, 0).in_flight.has_value());
  World after(dir, Env::Posix());
  ASSERT_EQ(after.Open(), "");
  std::map<std::string, int64_t> expiries;
  after.keys().ForEach([&](const std::string& key, const store::KeyInfo& info) {
    expiries[key] = info.expire_at_ms;
  });
  // "s" was written after FLUSHALL with KEEPTTL (no expiry to keep), "t" deleted; the keys of
  // the MSET before FLUSHALL are gone, those of the one after it are there.
  const std::map<std::string, int64_t> expected = {
      {"d", int64_t{4102444800003}}, {"f", 0}, {"m3", 0}, {"m4", 0}, {"s", 0}, {"u", 0},
      {"x2", int64_t{4102444800006}}};
  EXPECT_EQ(expiries, expected);
  EXPECT_EQ(after.keys().Find("m3")->value.view(), "last wins");
  EXPECT_EQ(after.keys().Find("u")->value.view(), "u again");
  EXPECT_EQ(after.keys().Find("m4")->value.view(), Pattern(600, 16));
}

// A single failing operation (disk full or an I/O error) anywhere after the start: nothing
// acknowledged is lost, the log heals when the operation works again, a failed snapshot works
// when retried, and a restart holds the final state.
void RunWithOneFault(const std::string& dir, uint64_t n, FaultEnv::Fault fault,
                     std::string& final_state) {
  FaultEnv env;
  World world(dir, &env);
  ASSERT_EQ(world.Open(), "");
  env.FailAt(n, fault);
  for (const Step& step : Script()) {
    if (step.snapshot()) {
      std::string err = world.durability().Save().message();
      if (!err.empty()) {
        EXPECT_NE(err.find("injected"), std::string::npos) << err;
        err = world.durability().Save().message();
      }
      ASSERT_EQ(err, "") << "a retried snapshot failed after a fault at operation " << n;
      continue;
    }
    const uint64_t lsn = world.Change(step);
    bool acknowledged = false;
    for (int i = 0; i < 400 && !acknowledged; ++i) {
      acknowledged = world.Acknowledged(lsn);
      if (!acknowledged) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(acknowledged) << "the log did not heal after a fault at operation " << n;
  }
  for (int i = 0; i < 400 && !world.durability().healthy(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(world.durability().healthy()) << "still failing after a fault at operation " << n;
  final_state = world.State();
  world.Close();
  World after(dir, Env::Posix());
  ASSERT_EQ(after.Open(), "") << "restart after a fault at operation " << n;
  EXPECT_EQ(after.State(), final_state) << "fault at operation " << n;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_FALSE(entry.path().filename().string().starts_with("temp-"))
        << "a failed snapshot left " << entry.path();
  }
}

TEST_F(CrashTest, DiskFullAndIoErrorsAtEveryOperationLoseNothing) {
  FaultEnv clean;
  const uint64_t total = RunScript(root_ + "/count", clean, 0).operations;
  const bool every = std::getenv("PREFIXD_CRASH_EVERY_STEP") != nullptr;
  const uint64_t stride = every ? 1 : std::max<uint64_t>(1, total / 30);
  for (uint64_t n = 1; n <= total; n += stride) {
    for (auto fault : {FaultEnv::Fault::kNoSpace, FaultEnv::Fault::kIoError}) {
      const std::string dir =
          root_ + "/f" + std::to_string(n) + (fault == FaultEnv::Fault::kNoSpace ? "s" : "e");
      std::string state;
      ASSERT_NO_FATAL_FAILURE(RunWithOneFault(dir, n, fault, state));
      std::filesystem::remove_all(dir);
    }
  }
}

// Under everysec the caller about to wait for its records writes them itself
// (LogWriter::WhenDurable); a fault in that write leaves them to the log thread, which retries
// them before anything newer. A single failing operation anywhere: every change is acknowledged
// in the end (written), the log heals, and a restart holds the final state.
TEST_F(CrashTest, FaultsInACallersWriteAreRetriedByTheLogThread) {
  FaultEnv clean;
  const uint64_t total = RunScript(root_ + "/count", clean, 0).operations;
  const uint64_t stride = std::max<uint64_t>(1, total / 30);
  uint64_t retried_for_caller = 0;
  auto fault_at = [&](uint64_t n) {
    for (auto fault : {FaultEnv::Fault::kNoSpace, FaultEnv::Fault::kIoError}) {
      SCOPED_TRACE("fault at operation " + std::to_string(n));
      const std::string dir = root_ + "/c" + std::to_string(n);
      FaultEnv env;
      std::string final_state;
      {
        World world(dir, &env, FsyncPolicy::kEverySec);
        ASSERT_EQ(world.Open(), "");
        env.FailAt(n, fault);
        for (const Step& step : Script()) {
          if (step.snapshot()) {
            std::string err = world.durability().Save().message();
            if (!err.empty()) err = world.durability().Save().message();
            ASSERT_EQ(err, "") << "a retried snapshot failed";
            continue;
          }
          const uint64_t lsn = world.Change(step);
          const LogStats before = world.durability().Stats().log;
          std::mutex mu;
          std::condition_variable cv;
          bool fired = false;
          const bool at_once = world.durability().WhenDurable(lsn, [&] {
            std::lock_guard lock(mu);
            fired = true;
            cv.notify_all();
          });
          const LogStats after = world.durability().Stats().log;
          if (!at_once) {
            std::unique_lock lock(mu);
            ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(5), [&] { return fired; }))
                << "the log thread did not write lsn " << lsn;
            // This caller wrote, failed, and the log thread wrote its records afterwards.
            if (after.caller_writes > before.caller_writes && before.last_error.empty() &&
                !after.last_error.empty()) {
              ++retried_for_caller;
            }
          }
          EXPECT_GE(world.durability().Stats().log.written_lsn, lsn);
        }
        EXPECT_GT(world.durability().Stats().log.caller_writes, 0u);
        for (int i = 0; i < 400 && !world.durability().healthy(); ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        EXPECT_TRUE(world.durability().healthy());
        final_state = world.State();
      }
      World after(dir, Env::Posix());
      ASSERT_EQ(after.Open(), "");
      EXPECT_EQ(after.State(), final_state);
      after.Close();
      std::filesystem::remove_all(dir);
    }
  };
  for (uint64_t n = 1; n <= total; n += stride) {
    ASSERT_NO_FATAL_FAILURE(fault_at(n));
  }
  // Whether the caller or the log thread takes a record is a race (the log thread takes what no
  // caller has claimed after its grace period), so on a slow run (sanitizers) the sampled points
  // may all have fallen in the log thread's writes: then the points between them are tried until
  // one lands in a caller's write.
  for (uint64_t n = 1; n <= total && retried_for_caller == 0; ++n) {
    if ((n - 1) % stride != 0) ASSERT_NO_FATAL_FAILURE(fault_at(n));
  }
  EXPECT_GT(retried_for_caller, 0u) << "no fault landed in a caller's write";
}

TEST_F(CrashTest, ShortWritesAreCutBackAndRetried) {
  FaultEnv env;
  const std::string dir = root_ + "/short";
  std::string state;
  {
    World world(dir, &env);
    ASSERT_EQ(world.Open(), "");
    env.ShortWrites(1000);  // every write stops after 1000 bytes, as on a full disk
    const uint64_t lsn = world.Change(Put("big", {{0, Pattern(5000, 3)}}));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_FALSE(world.Acknowledged(lsn)) << "a record was acknowledged though cut short";
    EXPECT_FALSE(world.durability().healthy());
    env.ShortWrites(0);  // space again
    bool acknowledged = false;
    for (int i = 0; i < 400 && !acknowledged; ++i) {
      acknowledged = world.Acknowledged(lsn);
      if (!acknowledged) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(acknowledged);
    state = world.State();
  }
  World after(dir, Env::Posix());
  ASSERT_EQ(after.Open(), "");
  EXPECT_EQ(after.State(), state);
}

}  // namespace
}  // namespace prefixd::persist
