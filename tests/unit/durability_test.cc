// Tests for persist::Durability over a real StateStore in a temporary data directory: changes
// logged the way src/engine/write_path.cc logs them come back identical after a reopen, with and
// without snapshots (SAVE, BGSAVE, under concurrent writers); compaction removes old segments;
// a torn tail is cut and logged while a corrupt record before it stops Open() (or is skipped and
// reported with skip_corrupt); a write that fails part-way (RLIMIT_FSIZE standing in for a full
// disk) and is retried leaves a readable log; damaged snapshots, leftovers of interrupted saves
// and segment creation, and the directory lock.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/bytes.h"
#include "persist/durability.h"
#include "persist/log_format.h"
#include "persist/log_writer.h"
#include "persist/mutation.h"
#include "store/state_store.h"

namespace prefixd::persist {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------------
// Helpers

// (sid -> layer -> blob): a whole store's contents, comparable with EXPECT_EQ.
using Dump = std::map<std::string, std::map<uint32_t, std::string>>;

Dump DumpStore(const store::StateStore& s) {
  Dump out;
  s.ForEachSession(
      [&](const std::string& sid, const std::vector<std::pair<uint32_t, Bytes>>& layers) {
        for (const auto& [layer, blob] : layers) out[sid][layer] = std::string(blob.view());
      });
  return out;
}

// Summarises a difference between two dumps without printing megabytes of blobs.
std::string Diff(const Dump& expected, const Dump& actual) {
  std::ostringstream out;
  int shown = 0;
  for (const auto& [sid, layers] : expected) {
    for (const auto& [layer, blob] : layers) {
      auto s = actual.find(sid);
      if (s == actual.end() || !s->second.contains(layer)) {
        if (shown++ < 10) out << "missing " << sid << "/" << layer << "; ";
      } else if (s->second.at(layer) != blob) {
        if (shown++ < 10) {
          out << "different " << sid << "/" << layer << " (" << s->second.at(layer).size() << " vs "
              << blob.size() << " bytes); ";
        }
      }
    }
  }
  for (const auto& [sid, layers] : actual) {
    for (const auto& [layer, blob] : layers) {
      auto s = expected.find(sid);
      if ((s == expected.end() || !s->second.contains(layer)) && shown++ < 10) {
        out << "unexpected " << sid << "/" << layer << "; ";
      }
    }
  }
  return shown == 0 ? "same" : out.str();
}

#define EXPECT_SAME_DUMP(expected, actual) \
  EXPECT_TRUE((expected) == (actual)) << Diff((expected), (actual))
#define ASSERT_SAME_DUMP(expected, actual) \
  ASSERT_TRUE((expected) == (actual)) << Diff((expected), (actual))

std::string RandomBlob(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(size, '\0');
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  for (; i < size; ++i) out[i] = static_cast<char>(rng());
  return out;
}

// Routes spdlog to a string for the test's lifetime, so messages can be checked.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  // Call only while no other thread logs (after Open returns, before threads start).
  std::string Text() {
    spdlog::default_logger()->flush();
    return stream_.str();
  }
  void Clear() { stream_.str(""); }

 private:
  std::ostringstream stream_;
  std::shared_ptr<spdlog::logger> previous_;
};

// One open data directory: a store and its durability, changed the way command handlers change
// them (record encoded outside the lock, appended in the store's under_lock hook), with a model
// of what the store must hold.
class Node {
 public:
  explicit Node(const DurabilityOptions& options)
      : durability_(std::make_unique<Durability>(options, StoreSet(Stores{store_}))) {}

  std::string Open() { return durability_->Open().message(); }
  Durability& durability() { return *durability_; }
  store::StateStore& store() { return store_; }
  Dump Contents() const { return DumpStore(store_); }
  // Flushes the log (the destructor writes and syncs what is queued) and closes the directory.
  void Close() { durability_.reset(); }

  uint64_t Put(const std::string& sid, const std::vector<std::pair<uint32_t, std::string>>& in,
               Dump* model = nullptr) {
    SsmPut m{sid, {}};
    for (const auto& [layer, blob] : in) m.layers.emplace_back(layer, Bytes::CopyOf(blob));
    uint64_t lsn = Apply(m);
    if (model != nullptr) {
      for (const auto& [layer, blob] : in) (*model)[sid][layer] = blob;
    }
    return lsn;
  }
  uint64_t DropLayer(const std::string& sid, uint32_t layer, Dump* model = nullptr) {
    uint64_t lsn = Apply(SsmDropLayer{sid, layer});
    if (model != nullptr && model->contains(sid)) {
      (*model)[sid].erase(layer);
      if ((*model)[sid].empty()) model->erase(sid);
    }
    return lsn;
  }
  uint64_t DropSession(const std::string& sid, Dump* model = nullptr) {
    uint64_t lsn = Apply(SsmDropSession{sid});
    if (model != nullptr) model->erase(sid);
    return lsn;
  }
  uint64_t FlushAll(Dump* model = nullptr) {
    // Nothing else writes meanwhile in this test, so no gate is needed.
    uint64_t lsn = Apply(persist::FlushAll{});
    if (model != nullptr) model->clear();
    return lsn;
  }

 private:
  // The live path's steps (engine/write_path.cc) without the gate: encode, then apply through
  // persist::Apply with the append as its hook.
  uint64_t Apply(const Mutation& m) {
    std::vector<Bytes> payload = EncodePayload(m);
    uint64_t lsn = 0;
    persist::Apply(m, Stores{store_, nullptr, 0},
                   [&] { lsn = durability_->Append(TypeOf(m), std::move(payload)); });
    return lsn;
  }

  store::StateStore store_{8};
  std::unique_ptr<Durability> durability_;
};

struct SegmentFile {
  uint64_t sequence;
  std::string path;
  uint64_t bytes;
};

std::vector<SegmentFile> Segments(const std::string& dir) {
  std::vector<SegmentFile> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (!name.starts_with("log-") || !name.ends_with(".seg")) continue;
    out.push_back({std::stoull(name.substr(4, 20)), entry.path().string(),
                   static_cast<uint64_t>(entry.file_size())});
  }
  std::sort(out.begin(), out.end(),
            [](const SegmentFile& a, const SegmentFile& b) { return a.sequence < b.sequence; });
  return out;
}

uint64_t TotalBytes(const std::vector<SegmentFile>& segments) {
  uint64_t total = 0;
  for (const auto& s : segments) total += s.bytes;
  return total;
}

// Start offsets of the records in a segment or snapshot, walked through the length fields.
std::vector<uint64_t> RecordStarts(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<uint64_t> out;
  uint64_t pos = kFileHeaderSize;
  while (pos + kRecordHeaderSize <= bytes.size()) {
    out.push_back(pos);
    pos += kRecordHeaderSize + GetU64(reinterpret_cast<const uint8_t*>(bytes.data()) + pos + 24);
  }
  return out;
}

void FlipByte(const std::string& path, uint64_t offset, uint8_t mask = 0x01) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  char c = 0;
  ASSERT_EQ(::pread(fd, &c, 1, static_cast<off_t>(offset)), 1);
  c = static_cast<char>(c ^ mask);
  ASSERT_EQ(::pwrite(fd, &c, 1, static_cast<off_t>(offset)), 1);
  ::close(fd);
}

// Polls `condition` every 5 ms; false if it is still false after `timeout`.
bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

class DurabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string base = (fs::temp_directory_path() / "prefixd-dur-XXXXXX").string();
    std::vector<char> tmpl(base.begin(), base.end());
    tmpl.push_back('\0');
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl.data();
    options_.dir = root_ + "/data";
    options_.policy = FsyncPolicy::kNo;  // the destructor still writes and syncs everything
    options_.auto_rewrite_percentage = 0;
  }
  void TearDown() override {
    if (::testing::Test::HasFailure()) std::cerr << "---- log ----\n" << log_.Text() << "\n";
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  std::unique_ptr<Node> OpenNode() {
    auto node = std::make_unique<Node>(options_);
    std::string err = node->Open();
    EXPECT_EQ(err, "");
    if (!err.empty()) return nullptr;
    return node;
  }

  // Mixed operations over a small key space, tracked in `model`: puts and multi-layer puts of
  // 0 B .. 64 KiB, layer and session drops.
  void RandomOps(Node& node, Dump& model, int count, uint64_t seed, bool with_flush = false) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i < count; ++i) {
      std::string sid = "sess-" + std::to_string(rng() % 12);
      int kind = static_cast<int>(rng() % 20);
      if (kind < 12) {
        size_t size = (rng() % 3 == 0) ? rng() % 65536 : rng() % 200;
        node.Put(sid, {{static_cast<uint32_t>(rng() % 6), RandomBlob(size, rng())}}, &model);
      } else if (kind < 16) {
        std::vector<std::pair<uint32_t, std::string>> layers;
        for (uint32_t l = 0; l < 1 + rng() % 5; ++l) {
          layers.emplace_back(l, RandomBlob(rng() % 4096, rng()));
        }
        node.Put(sid, layers, &model);
      } else if (kind < 18) {
        node.DropLayer(sid, static_cast<uint32_t>(rng() % 6), &model);
      } else if (kind < 19 || !with_flush) {
        node.DropSession(sid, &model);
      } else {
        node.FlushAll(&model);
      }
    }
  }

  std::string root_;
  DurabilityOptions options_;
  LogCapture log_;
};

// ---------------------------------------------------------------------------------------------
// Round trips

TEST_F(DurabilityTest, ReopenRestoresEveryChange) {
  Dump model;
  uint64_t last_lsn = 0;
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto node = OpenNode();
    ASSERT_NE(node, nullptr);
    EXPECT_SAME_DUMP(model, node->Contents());
    // Lsns keep rising across reopens.
    uint64_t lsn = node->Put("lsn-probe", {{0, "x"}}, &model);
    EXPECT_GT(lsn, last_lsn);
    RandomOps(*node, model, 200, 100 + round, /*with_flush=*/round == 1);
    last_lsn = node->Put("lsn-probe", {{1, "y"}}, &model);
    EXPECT_SAME_DUMP(model, node->Contents());
    node->Close();
  }
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  EXPECT_SAME_DUMP(model, node->Contents());
  PersistStats stats = node->durability().Stats();
  EXPECT_EQ(stats.recovered_records, 4u * 202u);
  EXPECT_EQ(stats.log.segments, Segments(options_.dir).size());
}

TEST_F(DurabilityTest, EveryPolicyKeepsWhatWasAppendedBeforeClose) {
  for (FsyncPolicy policy : {FsyncPolicy::kAlways, FsyncPolicy::kEverySec, FsyncPolicy::kNo}) {
    SCOPED_TRACE(PolicyName(policy));
    std::error_code ec;
    fs::remove_all(options_.dir, ec);
    options_.policy = policy;
    Dump model;
    {
      auto node = OpenNode();
      ASSERT_NE(node, nullptr);
      RandomOps(*node, model, 100, 7);
      node->Close();
    }
    auto node = OpenNode();
    ASSERT_NE(node, nullptr);
    EXPECT_SAME_DUMP(model, node->Contents());
  }
}

TEST_F(DurabilityTest, WhenDurableFiresOnceTheRecordIsSynced) {
  options_.policy = FsyncPolicy::kAlways;
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  for (int i = 0; i < 20; ++i) {
    uint64_t lsn = node->Put("s", {{0, RandomBlob(1000, i)}});
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    bool already = node->durability().WhenDurable(lsn, [&] {
      std::lock_guard lock(mu);
      done = true;
      cv.notify_all();
    });
    if (!already) {
      std::unique_lock lock(mu);
      ASSERT_TRUE(cv.wait_for(lock, 10s, [&] { return done; })) << "lsn " << lsn;
    }
    EXPECT_GE(node->durability().Stats().log.synced_lsn, lsn);
  }
}

// Sync() waits on a condition the log thread changes: the writer must not wake it in the
// moment between the wait's test and its sleep (found hanging a crash test under TSan). Many
// short Append+Sync rounds hit that moment often enough to hang without the fix; a watchdog
// turns a hang into a failure.
TEST_F(DurabilityTest, SyncNeverMissesTheWritersWakeUp) {
  LogWriter writer(root_, FsyncPolicy::kNo, uint64_t{1} << 24, 1, 1, {});
  ASSERT_EQ(writer.Start().ToString(), "OK");
  constexpr int kRounds = 10000;
  std::atomic<int> rounds{0};
  std::thread appender([&] {
    for (int i = 0; i < kRounds; ++i) {
      writer.Append(RecordType::kSsmDropSession, EncodePayload(SsmDropSession{"s"}));
      writer.Sync();
      rounds.fetch_add(1);
    }
  });
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (rounds.load() < kRounds && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  if (rounds.load() < kRounds) {
    // The appender is stuck in Sync(); the process cannot join it, so it ends here.
    std::fprintf(stderr, "Sync() hung after %d of %d rounds\n", rounds.load(), kRounds);
    std::abort();
  }
  appender.join();
  EXPECT_EQ(writer.Stats().written_lsn, uint64_t{kRounds});
}

// ---------------------------------------------------------------------------------------------
// Snapshots and compaction

TEST_F(DurabilityTest, SaveThenMoreWritesThenReopen) {
  Dump model;
  {
    auto node = OpenNode();
    ASSERT_NE(node, nullptr);
    RandomOps(*node, model, 300, 1);
    ASSERT_EQ(node->durability().Save().message(), "");
    EXPECT_TRUE(fs::exists(options_.dir + "/snapshot.pds"));
    PersistStats stats = node->durability().Stats();
    EXPECT_EQ(stats.rewrites, 1u);
    EXPECT_GT(stats.snapshot_bytes, 0u);
    EXPECT_EQ(stats.changes_since_last_save, 0u);
    // Changes after the snapshot, including ones that undo what it holds.
    RandomOps(*node, model, 300, 2, /*with_flush=*/true);
    node->Put("after-save", {{0, "tail"}}, &model);
    EXPECT_SAME_DUMP(model, node->Contents());
    node->Close();
  }
  {
    auto node = OpenNode();
    ASSERT_NE(node, nullptr);
    EXPECT_SAME_DUMP(model, node->Contents());
    // A second snapshot replaces the first; nothing logged after it yet.
    ASSERT_EQ(node->durability().Save().message(), "");
    node->Close();
  }
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  EXPECT_SAME_DUMP(model, node->Contents());
}

TEST_F(DurabilityTest, SaveOfAnEmptyStore) {
  {
    auto node = OpenNode();
    ASSERT_NE(node, nullptr);
    ASSERT_EQ(node->durability().Save().message(), "");
    node->Put("s", {{1, "v"}});
    node->Close();
  }
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  EXPECT_SAME_DUMP((Dump{{"s", {{1, "v"}}}}), node->Contents());
}

TEST_F(DurabilityTest, CompactionRemovesOldSegments) {
  options_.segment_bytes = 64 * 1024;
  Dump model;
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  for (bool background : {true, false}) {
    SCOPED_TRACE(background ? "BGSAVE" : "SAVE");
    // ~4 MB of overwrites of 8 keys: many segments for ~256 KB of live data.
    uint64_t last = 0;
    for (int i = 0; i < 128; ++i) {
      last = node->Put("k" + std::to_string(i % 4),
                       {{static_cast<uint32_t>(i % 2), RandomBlob(32768, i + background)}}, &model);
    }
    ASSERT_TRUE(WaitFor([&] { return node->durability().Stats().log.written_lsn >= last; }, 10s));
    size_t before = Segments(options_.dir).size();
    EXPECT_GT(before, 30u);
    if (background) {
      ASSERT_EQ(node->durability().BackgroundSave().message(), "");
      ASSERT_TRUE(WaitFor([&] { return !node->durability().Stats().bgsave_in_progress; }, 30s))
          << "BGSAVE never finished";
    } else {
      ASSERT_EQ(node->durability().Save().message(), "");
    }
    PersistStats stats = node->durability().Stats();
    EXPECT_TRUE(stats.last_bgsave_ok) << stats.last_save_error;
    EXPECT_EQ(stats.rewrites, background ? 1u : 2u);
    std::vector<SegmentFile> after = Segments(options_.dir);
    // The segment that was current when the snapshot began may outlive it (when the rotation
    // had not happened yet; the next snapshot removes it); every older one must be gone.
    EXPECT_LE(after.size(), 2u) << "old segments were not removed (" << before << " before)";
    EXPECT_LT(TotalBytes(after), 2 * options_.segment_bytes) << "log bytes after compaction";
    EXPECT_EQ(stats.log.segments, after.size());
    EXPECT_EQ(stats.log.bytes, TotalBytes(after));
    EXPECT_SAME_DUMP(model, node->Contents());
  }
  // Writes continue into the current segment; everything survives a reopen.
  node->Put("k9", {{0, "after"}}, &model);
  node->Close();
  node = OpenNode();
  ASSERT_NE(node, nullptr);
  EXPECT_SAME_DUMP(model, node->Contents());
}

TEST_F(DurabilityTest, CompactionKeepsSegmentsWrittenBeforeTheSnapshotIsDurable) {
  // Many segments, then a snapshot whose rename never happened (a crash mid-save): the log is
  // still whole and replays to the same state.
  options_.segment_bytes = 16 * 1024;
  Dump model;
  {
    auto node = OpenNode();
    ASSERT_NE(node, nullptr);
    RandomOps(*node, model, 300, 3);
    node->Close();
  }
  size_t segments = Segments(options_.dir).size();
  ASSERT_GT(segments, 3u);
  std::ofstream(options_.dir + "/temp-12345.pds") << "half a snapshot";
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  EXPECT_SAME_DUMP(model, node->Contents());
  EXPECT_FALSE(fs::exists(options_.dir + "/temp-12345.pds")) << "leftover temp snapshot kept";
}

TEST_F(DurabilityTest, OldSegmentsLeftBehindBySaveAreSkippedOnReplay) {
  // A crash after the snapshot's rename but before the old segments were removed: their
  // records are below the snapshot's base lsn; replay must accept them and skip them.
  Dump model;
  std::string stash = root_ + "/stash";
  fs::create_directories(stash);
  {
    auto node = OpenNode();
    ASSERT_NE(node, nullptr);
    node->Put("a", {{0, "one"}}, &model);
    node->DropSession("a", &model);
    node->Put("b", {{0, "two"}}, &model);
    node->Close();
  }
  for (const auto& s : Segments(options_.dir)) {
    fs::copy_file(s.path, stash + "/" + fs::path(s.path).filename().string());
  }
  {
    auto node = OpenNode();
    ASSERT_NE(node, nullptr);
    EXPECT_SAME_DUMP(model, node->Contents());
    ASSERT_EQ(node->durability().Save().message(), "");
    node->DropSession("b", &model);
    node->Put("a", {{1, "three"}}, &model);
    node->Close();
  }
  int restored = 0;
  for (const auto& entry : fs::directory_iterator(stash)) {
    fs::path target = fs::path(options_.dir) / entry.path().filename();
    if (!fs::exists(target)) fs::copy_file(entry.path(), target), ++restored;
  }
  ASSERT_GT(restored, 0) << "Save() removed no segment";
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  EXPECT_SAME_DUMP(model, node->Contents());
  // Lsns continue above everything seen, old segments included.
  node->Put("c", {{0, "four"}}, &model);
  node->Close();
  node = OpenNode();
  ASSERT_NE(node, nullptr);
  EXPECT_SAME_DUMP(model, node->Contents());
}

TEST_F(DurabilityTest, SaveDuringConcurrentWritesLosesNothing) {
  options_.segment_bytes = 256 * 1024;
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  constexpr int kThreads = 4;
  std::vector<Dump> models(kThreads);
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; !stop.load() && i < 4000; ++i) {
        std::string sid = "t" + std::to_string(t) + "-" + std::to_string(rng() % 16);
        if (rng() % 10 == 0) {
          node->DropSession(sid, &models[t]);
        } else {
          node->Put(sid, {{static_cast<uint32_t>(rng() % 3), RandomBlob(rng() % 8192, rng())}},
                    &models[t]);
        }
      }
    });
  }
  for (int i = 0; i < 8; ++i) {
    std::this_thread::sleep_for(20ms);
    if (i % 2 == 0) {
      EXPECT_EQ(node->durability().Save().message(), "");
    } else {
      (void)node->durability().BackgroundSave();
    }
  }
  stop = true;
  for (auto& w : writers) w.join();
  while (node->durability().Stats().bgsave_in_progress) std::this_thread::sleep_for(5ms);
  Dump model;
  for (const Dump& m : models) model.insert(m.begin(), m.end());
  EXPECT_SAME_DUMP(model, node->Contents());
  node->Close();
  node = OpenNode();
  ASSERT_NE(node, nullptr);
  EXPECT_SAME_DUMP(model, node->Contents());
}

// Under everysec and no, callers write their own records before they wait (one writer at a
// time; the others fall back to the log thread), while snapshots add rotation markers and small
// segments rotate by size: every wait ends with its record written, and a reopen holds it all.
TEST_F(DurabilityTest, CallersWriteTheirOwnRecordsUnderConcurrentWritersAndSnapshots) {
  for (FsyncPolicy policy : {FsyncPolicy::kEverySec, FsyncPolicy::kNo}) {
    SCOPED_TRACE(PolicyName(policy));
    fs::remove_all(options_.dir);
    options_.policy = policy;
    options_.segment_bytes = 64 * 1024;
    auto node = OpenNode();
    ASSERT_NE(node, nullptr);
    constexpr int kThreads = 4, kRounds = 1500;
    std::vector<Dump> models(kThreads);
    std::atomic<int> waited{0}, late{0};
    std::vector<std::thread> writers;
    for (int t = 0; t < kThreads; ++t) {
      writers.emplace_back([&, t] {
        std::mt19937_64 rng(t);
        for (int i = 0; i < kRounds; ++i) {
          std::string sid = "t" + std::to_string(t) + "-" + std::to_string(rng() % 16);
          const uint64_t lsn =
              node->Put(sid, {{static_cast<uint32_t>(rng() % 3), RandomBlob(rng() % 512, rng())}},
                        &models[t]);
          std::mutex mu;
          std::condition_variable cv;
          bool done = false;
          if (!node->durability().WhenDurable(lsn, [&] {
                std::lock_guard lock(mu);
                done = true;
                cv.notify_all();
              })) {
            std::unique_lock lock(mu);
            if (!cv.wait_for(lock, 5s, [&] { return done; })) late.fetch_add(1);
          }
          if (node->durability().Stats().log.written_lsn < lsn) late.fetch_add(1);
          waited.fetch_add(1);
        }
      });
    }
    while (waited.load() < kThreads * kRounds / 2) std::this_thread::sleep_for(1ms);
    EXPECT_EQ(node->durability().Save().message(), "");
    for (auto& w : writers) w.join();
    EXPECT_EQ(late.load(), 0) << "waits that ended before their record was written, or never";
    const LogStats stats = node->durability().Stats().log;
    EXPECT_GT(stats.caller_writes, 0u);
    EXPECT_TRUE(stats.write_ok);
    EXPECT_GT(stats.segments, 1u) << "the log did not rotate";
    Dump model;
    for (const Dump& m : models) model.insert(m.begin(), m.end());
    node->Close();
    node = OpenNode();
    ASSERT_NE(node, nullptr);
    EXPECT_SAME_DUMP(model, node->Contents());
    node->Close();
  }
}

// A batch over 256 KiB (a big value) is written by the log thread, never by the waiting caller,
// which then waits for it like under always; small ones are the callers' again (nearly always:
// the log thread may take one first, so the check is over 50).
TEST_F(DurabilityTest, BigBatchesAreLeftToTheLogThread) {
  options_.policy = FsyncPolicy::kEverySec;
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  // Puts one value of `size` bytes, waits until it is written; returns the writes callers made.
  auto put_and_wait = [&](const std::string& sid, size_t size) -> uint64_t {
    const uint64_t callers_before = node->durability().Stats().log.caller_writes;
    const uint64_t lsn = node->Put(sid, {{0, RandomBlob(size, 1)}});
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    const bool at_once = node->durability().WhenDurable(lsn, [&] {
      std::lock_guard lock(mu);
      done = true;
      cv.notify_all();
    });
    if (!at_once) {
      std::unique_lock lock(mu);
      EXPECT_TRUE(cv.wait_for(lock, 5s, [&] { return done; })) << sid;
    }
    EXPECT_GE(node->durability().Stats().log.written_lsn, lsn) << sid;
    return node->durability().Stats().log.caller_writes - callers_before;
  };
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(put_and_wait("big" + std::to_string(i), size_t{1} << 20), 0u);
  }
  uint64_t small_by_callers = 0;
  for (int i = 0; i < 50; ++i) small_by_callers += put_and_wait("small" + std::to_string(i), 100);
  EXPECT_GT(small_by_callers, 25u);
}

// ---------------------------------------------------------------------------------------------
// Damage

// Writes `count` independent puts (one key each) in a fresh directory and closes it; returns
// the puts' keys and values in order.
std::vector<std::pair<std::string, std::string>> WriteIndependentPuts(
    const DurabilityOptions& options, int count) {
  std::vector<std::pair<std::string, std::string>> puts;
  Node node(options);
  EXPECT_EQ(node.Open(), "");
  for (int i = 0; i < count; ++i) {
    puts.emplace_back("key-" + std::to_string(i), RandomBlob(100 + 997 * i, i));
    node.Put(puts.back().first, {{0, puts.back().second}});
  }
  node.Close();
  return puts;
}

Dump ExpectedFrom(const std::vector<std::pair<std::string, std::string>>& puts,
                  std::vector<int> skipped = {}) {
  Dump out;
  for (int i = 0; i < static_cast<int>(puts.size()); ++i) {
    if (std::find(skipped.begin(), skipped.end(), i) == skipped.end()) {
      out[puts[i].first][0] = puts[i].second;
    }
  }
  return out;
}

TEST_F(DurabilityTest, TornTailIsCutAndLoggedEarlierRecordsKept) {
  // Cut points inside the last record: in its header, in its payload, one byte short.
  for (int where : {5, 31, 32, 400, -1}) {
    SCOPED_TRACE("cut at " + std::to_string(where));
    std::error_code ec;
    fs::remove_all(options_.dir, ec);
    auto puts = WriteIndependentPuts(options_, 8);
    auto segments = Segments(options_.dir);
    ASSERT_EQ(segments.size(), 1u);
    auto starts = RecordStarts(segments[0].path);
    ASSERT_EQ(starts.size(), 8u);
    uint64_t last = starts.back();
    uint64_t cut = where >= 0 ? last + static_cast<uint64_t>(where) : segments[0].bytes - 1;
    ASSERT_EQ(::truncate(segments[0].path.c_str(), static_cast<off_t>(cut)), 0);
    log_.Clear();
    {
      auto node = OpenNode();
      ASSERT_NE(node, nullptr);
      EXPECT_SAME_DUMP(ExpectedFrom(puts, {7}), node->Contents());
      std::string log = log_.Text();
      EXPECT_NE(log.find("torn tail at offset " + std::to_string(last)), std::string::npos) << log;
      EXPECT_NE(log.find(segments[0].path), std::string::npos) << log;
      EXPECT_EQ(fs::file_size(segments[0].path), last) << "the torn tail was not cut";
      // New writes after the cut survive the next reopen.
      node->Put("key-7", {{0, "rewritten"}});
      node->Close();
    }
    log_.Clear();
    auto node = OpenNode();
    ASSERT_NE(node, nullptr);
    Dump expected = ExpectedFrom(puts, {7});
    expected["key-7"][0] = "rewritten";
    EXPECT_SAME_DUMP(expected, node->Contents());
    EXPECT_EQ(log_.Text().find("torn"), std::string::npos) << "second reopen found a torn tail";
  }
}

TEST_F(DurabilityTest, ZeroFilledTailIsCut) {
  auto puts = WriteIndependentPuts(options_, 5);
  auto segments = Segments(options_.dir);
  ASSERT_EQ(segments.size(), 1u);
  {
    std::ofstream out(segments[0].path, std::ios::binary | std::ios::app);
    out << std::string(4096, '\0');
  }
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  EXPECT_SAME_DUMP(ExpectedFrom(puts), node->Contents());
  EXPECT_EQ(fs::file_size(segments[0].path), segments[0].bytes);
}

TEST_F(DurabilityTest, CorruptRecordBeforeTheTailFailsOpenNamingFileAndOffset) {
  auto puts = WriteIndependentPuts(options_, 10);
  auto segments = Segments(options_.dir);
  ASSERT_EQ(segments.size(), 1u);
  auto starts = RecordStarts(segments[0].path);
  ASSERT_EQ(starts.size(), 10u);
  ASSERT_NO_FATAL_FAILURE(FlipByte(segments[0].path, starts[4] + kRecordHeaderSize + 50));
  uint64_t size_before = fs::file_size(segments[0].path);
  Node node(options_);
  std::string err = node.Open();
  ASSERT_NE(err, "") << "opened a log with a corrupt record before its tail";
  EXPECT_NE(err.find(segments[0].path), std::string::npos) << err;
  EXPECT_NE(err.find("offset " + std::to_string(starts[4])), std::string::npos) << err;
  EXPECT_NE(err.find("skip"), std::string::npos) << "no hint about --log-skip-corrupt: " << err;
  // Nothing was cut from the damaged file.
  EXPECT_EQ(fs::file_size(segments[0].path), size_before);
}

TEST_F(DurabilityTest, SkipCorruptOpensAndReportsTheSkippedBytes) {
  auto puts = WriteIndependentPuts(options_, 10);
  auto segments = Segments(options_.dir);
  auto starts = RecordStarts(segments[0].path);
  ASSERT_NO_FATAL_FAILURE(FlipByte(segments[0].path, starts[4] + 3));  // in the checksum
  options_.skip_corrupt = true;
  log_.Clear();
  {
    auto node = OpenNode();
    ASSERT_NE(node, nullptr);
    EXPECT_SAME_DUMP(ExpectedFrom(puts, {4}), node->Contents());
    std::string log = log_.Text();
    std::string expected = "Skipping " + std::to_string(starts[5] - starts[4]) +
                           " corrupt bytes [" + std::to_string(starts[4]) + ", " +
                           std::to_string(starts[5]) + ") of " + segments[0].path;
    EXPECT_NE(log.find(expected), std::string::npos) << "expected '" << expected << "' in\n" << log;
    // A snapshot makes the damaged segment unnecessary: later starts need no skipping.
    node->Put("after", {{0, "x"}});
    ASSERT_EQ(node->durability().Save().message(), "");
    node->Close();
  }
  options_.skip_corrupt = false;
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  Dump expected = ExpectedFrom(puts, {4});
  expected["after"][0] = "x";
  EXPECT_SAME_DUMP(expected, node->Contents());
}

TEST_F(DurabilityTest, DamageAtTheEndOfAnOlderSegmentIsNotATornTail) {
  // The older segment was synced and closed before the next began: its end cannot be torn.
  auto puts = WriteIndependentPuts(options_, 6);
  {
    auto node = OpenNode();  // a second segment, with a record in it
    ASSERT_NE(node, nullptr);
    node->Put("second", {{0, "segment"}});
    node->Close();
  }
  auto segments = Segments(options_.dir);
  ASSERT_EQ(segments.size(), 2u);
  auto starts = RecordStarts(segments[0].path);
  ASSERT_EQ(::truncate(segments[0].path.c_str(), static_cast<off_t>(starts.back() + 40)), 0);
  {
    Node node(options_);
    std::string err = node.Open();
    EXPECT_NE(err, "") << "cut end of an older segment was taken for a torn tail";
    EXPECT_NE(err.find(segments[0].path), std::string::npos) << err;
    EXPECT_NE(err.find("offset " + std::to_string(starts.back())), std::string::npos) << err;
  }
  options_.skip_corrupt = true;
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  Dump expected = ExpectedFrom(puts, {5});
  expected["second"][0] = "segment";
  EXPECT_SAME_DUMP(expected, node->Contents());
}

TEST_F(DurabilityTest, SegmentCutShortAtCreationIsRemoved) {
  auto puts = WriteIndependentPuts(options_, 3);
  auto segments = Segments(options_.dir);
  ASSERT_EQ(segments.size(), 1u);
  char name[64];
  std::snprintf(name, sizeof name, "/log-%020llu.seg",
                static_cast<unsigned long long>(segments[0].sequence + 1));
  std::string stub = options_.dir + name;
  std::ofstream(stub, std::ios::binary) << "PFXDLO";
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  EXPECT_SAME_DUMP(ExpectedFrom(puts), node->Contents());
  node->Put("new", {{0, "n"}});
  node->Close();
  node = OpenNode();
  ASSERT_NE(node, nullptr);
  Dump expected = ExpectedFrom(puts);
  expected["new"][0] = "n";
  EXPECT_SAME_DUMP(expected, node->Contents());
}

TEST_F(DurabilityTest, DamagedSnapshotFailsOpen) {
  {
    auto node = OpenNode();
    ASSERT_NE(node, nullptr);
    for (int i = 0; i < 6; ++i) node->Put("s" + std::to_string(i), {{0, RandomBlob(500, i)}});
    ASSERT_EQ(node->durability().Save().message(), "");
    node->Close();
  }
  std::string snapshot = options_.dir + "/snapshot.pds";
  auto starts = RecordStarts(snapshot);
  ASSERT_EQ(starts.size(), 7u);  // six sessions and the end record
  std::string saved = snapshot + ".good";
  fs::copy_file(snapshot, saved);
  {
    ASSERT_NO_FATAL_FAILURE(FlipByte(snapshot, starts[2] + 40));
    Node node(options_);
    std::string err = node.Open();
    EXPECT_NE(err.find(snapshot), std::string::npos) << err;
    EXPECT_NE(err.find("offset " + std::to_string(starts[2])), std::string::npos) << err;
  }
  {
    // Cut before its end record: incomplete, even though every record in it is whole.
    fs::copy_file(saved, snapshot, fs::copy_options::overwrite_existing);
    ASSERT_EQ(::truncate(snapshot.c_str(), static_cast<off_t>(starts.back())), 0);
    Node node(options_);
    std::string err = node.Open();
    EXPECT_NE(err, "") << "a snapshot without its end record was accepted";
    EXPECT_NE(err.find(snapshot), std::string::npos) << err;
  }
  fs::copy_file(saved, snapshot, fs::copy_options::overwrite_existing);
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->Contents().size(), 6u);
}

// Lowers this process's file-size limit (RLIMIT_FSIZE) so writes past `bytes` fail with EFBIG
// after a short write, as they would on a full disk; restores the limit when destroyed.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(uint64_t bytes) {
    ::signal(SIGXFSZ, SIG_IGN);  // fail the write instead of killing the process
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    rlimit lower = saved_;
    lower.rlim_cur = bytes;
    ok_ = ::setrlimit(RLIMIT_FSIZE, &lower) == 0;
  }
  ~FileSizeLimit() { Lift(); }
  void Lift() {
    if (ok_) ::setrlimit(RLIMIT_FSIZE, &saved_);
    ok_ = false;
  }
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

TEST_F(DurabilityTest, WriteFailureMidRecordThenRetryLeavesAReadableLog) {
  // A write that fails part-way through a record (a full disk) is cut back and retried once
  // writes work again; the retried record must follow the last whole one, with no gap.
  options_.policy = FsyncPolicy::kEverySec;
  Dump model;
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  for (int i = 0; i < 3; ++i) node->Put("before", {{static_cast<uint32_t>(i), "small"}}, &model);
  ASSERT_TRUE(WaitFor([&] { return node->durability().Stats().log.written_lsn == 3; }, 5s));
  auto segments = Segments(options_.dir);
  ASSERT_EQ(segments.size(), 1u);
  uint64_t whole_end = fs::file_size(segments[0].path);
  {
    FileSizeLimit limit(whole_end + 100000);
    ASSERT_TRUE(limit.ok());
    uint64_t lsn = node->Put("big", {{0, RandomBlob(300000, 1)}}, &model);
    ASSERT_TRUE(WaitFor([&] { return !node->durability().healthy(); }, 5s))
        << "a write past RLIMIT_FSIZE did not fail";
    EXPECT_NE(node->durability().last_error(), "");
    EXPECT_LT(node->durability().Stats().log.written_lsn, lsn);
    EXPECT_EQ(fs::file_size(segments[0].path), whole_end) << "the partial record was not cut";
    limit.Lift();
    ASSERT_TRUE(WaitFor([&] { return node->durability().healthy(); }, 5s))
        << "writes did not resume: " << node->durability().last_error();
    ASSERT_TRUE(WaitFor([&] { return node->durability().Stats().log.written_lsn >= lsn; }, 5s));
  }
  node->Put("after", {{0, "x"}}, &model);
  node->Close();
  {
    std::ifstream in(segments[0].path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GT(bytes.size(), whole_end + kRecordHeaderSize);
    size_t data = bytes.find_first_not_of('\0', whole_end);
    EXPECT_EQ(bytes.substr(whole_end + 8, 4), "PFXR")
        << "the retried record does not start where the log was cut (offset " << whole_end
        << "): " << (data == std::string::npos ? bytes.size() : data) - whole_end
        << " zero bytes come first";
  }
  node = OpenNode();
  ASSERT_NE(node, nullptr) << "the log is unreadable after a failed and retried write";
  EXPECT_SAME_DUMP(model, node->Contents());
}

TEST_F(DurabilityTest, ASecondOpenOfTheSameDirectoryFails) {
  auto first = OpenNode();
  ASSERT_NE(first, nullptr);
  first->Put("s", {{0, "v"}});
  {
    Node second(options_);
    std::string err = second.Open();
    EXPECT_NE(err, "") << "two Durability objects opened the same directory";
    EXPECT_NE(err.find("in use"), std::string::npos) << err;
    EXPECT_TRUE(second.Contents().empty()) << "the refused open loaded data";
  }
  // The first keeps working, and once it is closed the directory opens again.
  first->Put("s", {{1, "w"}});
  first->Close();
  auto third = OpenNode();
  ASSERT_NE(third, nullptr);
  EXPECT_SAME_DUMP((Dump{{"s", {{0, "v"}, {1, "w"}}}}), third->Contents());
}

// ---------------------------------------------------------------------------------------------
// EXEC groups (record type 11): all of a transaction's records, or none, across a crash.

// The records of a segment: type and where each starts.
std::vector<std::pair<RecordType, uint64_t>> RecordTypes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::pair<RecordType, uint64_t>> out;
  for (uint64_t start : RecordStarts(path)) {
    out.emplace_back(static_cast<RecordType>(bytes[start + 12]), start);
  }
  return out;
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteFileBytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST_F(DurabilityTest, AnExecGroupCutAtEveryByteRecoversAllOfItOrNone) {
  Dump before, after;
  {
    auto node = OpenNode();
    ASSERT_NE(node, nullptr);
    node->Put("pre-0", {{0, "first"}}, &before);
    node->Put("pre-1", {{0, RandomBlob(9, 1)}, {3, "x"}}, &before);
    after = before;
    Durability::Group group(&node->durability());
    EXPECT_EQ(node->Put("tx-a", {{0, RandomBlob(7, 2)}}, &after), 0u) << "collected, not queued";
    node->Put("tx-b", {{0, "b0"}, {1, RandomBlob(4, 3)}}, &after);
    node->DropLayer("pre-1", 3, &after);
    node->Put("pre-0", {{0, "overwritten"}}, &after);
    EXPECT_GT(group.End(), 0u);
    node->Close();
  }
  auto segments = Segments(options_.dir);
  ASSERT_EQ(segments.size(), 1u);
  const std::string path = segments[0].path;
  const auto records = RecordTypes(path);
  ASSERT_EQ(records.size(), 7u);
  ASSERT_EQ(records[2].first, RecordType::kExecGroup);
  const uint64_t group_at = records[2].second;
  const std::string whole = FileBytes(path);
  // Every cut from the group's first byte to one short of its end: none of it; whole: all of it.
  for (uint64_t cut = group_at; cut <= whole.size(); ++cut) {
    SCOPED_TRACE("cut at " + std::to_string(cut) + " of " + std::to_string(whole.size()));
    std::error_code ec;
    fs::remove_all(options_.dir, ec);
    fs::create_directories(options_.dir);
    WriteFileBytes(path, std::string_view(whole).substr(0, cut));
    log_.Clear();
    auto node = OpenNode();
    ASSERT_NE(node, nullptr);
    const bool all = cut == whole.size();
    ASSERT_SAME_DUMP(all ? after : before, node->Contents());
    if (!all) {
      EXPECT_EQ(fs::file_size(path), group_at) << "the cut-off group was not removed";
      if (cut >= group_at + kRecordHeaderSize + kExecGroupPayloadSize) {
        EXPECT_NE(log_.Text().find("a transaction cut off"), std::string::npos) << log_.Text();
      }
    }
  }
}

TEST_F(DurabilityTest, DamageInsideAnExecGroupBeforeTheTailFailsOpen) {
  {
    auto node = OpenNode();
    ASSERT_NE(node, nullptr);
    {
      Durability::Group group(&node->durability());
      node->Put("tx-a", {{0, "a"}});
      node->Put("tx-b", {{0, "b"}});
    }
    node->Put("after", {{0, "c"}});
    node->Close();
  }
  auto segments = Segments(options_.dir);
  ASSERT_EQ(segments.size(), 1u);
  const auto records = RecordTypes(segments[0].path);
  ASSERT_EQ(records.size(), 4u);
  ASSERT_EQ(records[0].first, RecordType::kExecGroup);
  FlipByte(segments[0].path, records[2].second + kRecordHeaderSize);  // tx-b's payload
  Node node(options_);
  const std::string err = node.Open();
  EXPECT_NE(err.find("damaged transaction group at offset " + std::to_string(records[0].second)),
            std::string::npos)
      << err;
  EXPECT_NE(err.find(segments[0].path), std::string::npos) << err;
}

TEST_F(DurabilityTest, AnExecGroupNeverSpansSegmentsAndEachRecordIsPlaced) {
  // Segments of 4 KiB: groups of ~1.5 KiB rotate often; each must sit whole in one segment, and
  // each record's `placed` must name where its payload landed.
  options_.segment_bytes = 4096;
  std::map<std::string, std::string> expected_payloads;  // "sid" -> the record's payload bytes
  std::vector<std::pair<std::shared_ptr<const store::ColdFile>, uint64_t>> places;
  std::vector<std::string> placed_payloads;
  std::mutex mu;
  {
    LogWriter log(options_.dir, FsyncPolicy::kAlways, options_.segment_bytes, 1, 1, {});
    fs::create_directories(options_.dir);
    ASSERT_EQ(log.Start().ToString(), "OK");
    for (int g = 0; g < 12; ++g) {
      std::vector<LogWriter::GroupMember> members;
      for (int r = 0; r < 3; ++r) {
        std::string payload = RandomBlob(400 + 37 * r + g, 100 * g + r);
        members.push_back(LogWriter::GroupMember{
            StagePieces(RecordType::kStringDel, {Bytes::CopyOf(payload)}), 0,
            [&, payload](const std::shared_ptr<const store::ColdFile>& file, uint64_t at) {
              std::lock_guard lock(mu);
              places.emplace_back(file, at);
              placed_payloads.push_back(payload);
            }});
      }
      log.AppendGroup(std::move(members));
      log.Append(RecordType::kStringDel, {Bytes::CopyOf(std::string("single"))});
    }
    log.Sync();
    std::lock_guard lock(mu);
    ASSERT_EQ(places.size(), 36u);
    for (size_t i = 0; i < places.size(); ++i) {
      Bytes read;
      std::string error;
      ASSERT_TRUE(places[i].first->Read(places[i].second, placed_payloads[i].size(), read, error))
          << error;
      EXPECT_EQ(read.view(), placed_payloads[i]) << "record " << i << " placed wrong";
    }
  }
  auto segments = Segments(options_.dir);
  EXPECT_GT(segments.size(), 3u);
  int groups = 0;
  for (const SegmentFile& segment : segments) {
    const auto records = RecordTypes(segment.path);
    for (size_t i = 0; i < records.size(); ++i) {
      if (records[i].first != RecordType::kExecGroup) continue;
      ++groups;
      ASSERT_LT(i + 3, records.size()) << "a group split at a rotation in " << segment.path;
      for (size_t m = 1; m <= 3; ++m) EXPECT_EQ(records[i + m].first, RecordType::kStringDel);
    }
  }
  EXPECT_EQ(groups, 12);
}

TEST_F(DurabilityTest, ASnapshotTakenDuringAnExecWaitsForItsGroup) {
  // A snapshot reads the stores while an EXEC has made one of its two changes: it must not take
  // effect before the whole group is in the log, or a crash would keep half the transaction.
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  node->Put("before", {{0, "b"}});
  Dump expected;
  std::optional<Durability::Group> group;
  group.emplace(&node->durability());
  node->Put("tx-a", {{0, "a"}}, &expected);
  std::atomic<bool> saved{false};
  std::string save_error;
  std::thread saver([&] {
    save_error = node->durability().Save().message();
    saved = true;
  });
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(saved.load()) << "the snapshot took effect while a group was open";
  node->Put("tx-b", {{0, "b2"}}, &expected);
  group.reset();  // queues the group
  saver.join();
  EXPECT_EQ(save_error, "");
  // A crash now: whatever the log and snapshot hold is all of the group.
  auto segments = Segments(options_.dir);
  bool found = false;
  for (const SegmentFile& segment : segments) {
    for (const auto& [type, at] : RecordTypes(segment.path)) {
      found = found || type == RecordType::kExecGroup;
    }
  }
  EXPECT_TRUE(found) << "the group was not written before the snapshot took effect";
  node->Close();
  expected["before"][0] = "b";
  auto again = OpenNode();
  ASSERT_NE(again, nullptr);
  EXPECT_SAME_DUMP(expected, again->Contents());
}

TEST_F(DurabilityTest, ASyncInsideAGroupSyncsTheGroupWhenItIsQueued) {
  // KV.PREFIX.COMMIT queued inside EXEC after a write: that write is fsynced before EXEC replies,
  // whatever appendfsync says (here: no).
  auto node = OpenNode();
  ASSERT_NE(node, nullptr);
  Durability::Group group(&node->durability());
  node->Put("tx-a", {{0, "a"}});
  node->durability().Sync();
  node->Put("tx-b", {{0, "b"}});
  const uint64_t lsn = group.End();
  EXPECT_GE(node->durability().Stats().log.synced_lsn, lsn);
}

}  // namespace
}  // namespace prefixd::persist
