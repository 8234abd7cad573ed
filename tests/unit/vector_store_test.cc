// VectorStore: ranges with gaps and zero fill, ids, batches, copy-on-write snapshots under
// concurrent writers (no torn replies), drops, limits, KV.PREFIX registrations and accounting.
#include "store/vector_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace prefixd::store {
namespace {

constexpr uint32_t kDim = 8;  // fp32 rows of 32 bytes

// `count` fp32 rows whose every value is `value + row`.
Bytes Rows(uint64_t count, float value, uint32_t dim = kDim) {
  Bytes b = Bytes::Allocate(count * dim * 4);
  auto* f = reinterpret_cast<float*>(b.mutable_data());
  for (uint64_t r = 0; r < count; ++r) {
    for (uint32_t j = 0; j < dim; ++j) f[r * dim + j] = value + static_cast<float>(r);
  }
  return b;
}

std::vector<float> Floats(const RowSpan& span) {
  std::string joined;
  for (const Bytes& p : span.pieces) joined.append(p.view());
  std::vector<float> out(joined.size() / 4);
  std::memcpy(out.data(), joined.data(), joined.size());
  return out;
}

class VectorStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Create("s"); }
  void Create(std::string_view sid, uint32_t dim = kDim, Tier tier = Tier::kFp32) {
    ASSERT_EQ(store_.Create(sid, dim, tier, store_.ReserveIndex(), 0, nullptr),
              VectorStore::CreateResult::kCreated);
  }
  void Put(uint32_t layer, uint64_t start, uint64_t count, float value) {
    ASSERT_EQ(store_.Store("s", layer, start, count, Rows(count, value), kDim, Tier::kFp32),
              VectorStore::StoreResult::kOk);
  }
  // The first value of each row of [s, e).
  std::vector<float> Column(uint32_t layer, uint64_t s, uint64_t e) {
    auto read = store_.ReadRange("s", layer, s, e);
    EXPECT_TRUE(read.has_value());
    EXPECT_EQ(read->second.rows.rows, e - s);
    EXPECT_EQ(read->second.rows.bytes(), (e - s) * kDim * 4);
    std::vector<float> all = Floats(read->second.rows), col;
    for (size_t i = 0; i < all.size(); i += kDim) col.push_back(all[i]);
    return col;
  }
  VectorStore store_{8};
};

TEST_F(VectorStoreTest, RangesAreHalfOpenWithGapsAndTheTailZeroFilled) {
  Put(0, 2, 3, 10.0f);  // rows 2, 3, 4
  EXPECT_EQ(Column(0, 0, 7), (std::vector<float>{0, 0, 10, 11, 12, 0, 0}));
  auto read = store_.ReadRange("s", 0, 0, 1);
  EXPECT_EQ(read->second.length, 5u);
  // Another layer and an absent one.
  EXPECT_EQ(store_.ReadRange("s", 1, 0, 4)->second.length, 0u);
  EXPECT_EQ(store_.ReadRange("s", 1, 0, 4)->second.rows.pieces.size(), 0u);
  EXPECT_FALSE(store_.ReadRange("nope", 0, 0, 4).has_value());
}

TEST_F(VectorStoreTest, OverwritesAndAppendsAcrossManyChunks) {
  // fp32 rows of 32 bytes make 4096-row chunks; go well past several.
  Put(3, 0, 20000, 0.0f);
  Put(3, 4090, 10, 1e6f);   // straddles a chunk boundary, rows already visible
  Put(3, 20000, 1, -5.0f);  // appended one token at a time
  Put(3, 20001, 1, -6.0f);
  Put(3, 30000, 2, 7.0f);  // past a gap
  auto col = Column(3, 4085, 4105);
  for (int i = 0; i < 20; ++i) {
    float want =
        (i >= 5 && i < 15) ? 1e6f + static_cast<float>(i - 5) : static_cast<float>(4085 + i);
    EXPECT_EQ(col[i], want) << i;
  }
  EXPECT_EQ(Column(3, 19999, 20003), (std::vector<float>{19999, -5, -6, 0}));
  EXPECT_EQ(Column(3, 29999, 30003), (std::vector<float>{0, 7, 8, 0}));
  EXPECT_EQ(store_.Stats().tokens, 30002u);
}

TEST_F(VectorStoreTest, IdsAndBatchesReadOneState) {
  Put(0, 0, 4, 1.0f);
  Put(2, 0, 2, 100.0f);
  const uint64_t ids[] = {3, 0, 9, 1};
  auto read = store_.ReadIds("s", 0, ids);
  std::vector<float> all = Floats(read->second.rows);
  ASSERT_EQ(all.size(), 4 * kDim);
  EXPECT_EQ(all[0], 4.0f);
  EXPECT_EQ(all[kDim], 1.0f);
  EXPECT_EQ(all[2 * kDim], 0.0f);
  EXPECT_EQ(all[3 * kDim], 2.0f);

  auto batch = store_.ReadBatch("s", 1, 3, std::nullopt);
  ASSERT_EQ(batch->second.size(), 3u);  // through the highest stored layer
  EXPECT_EQ(Floats(batch->second[0].rows)[0], 2.0f);
  EXPECT_EQ(batch->second[1].length, 0u);
  EXPECT_EQ(Floats(batch->second[2].rows)[kDim], 0.0f);  // row 2 of layer 2 is past its end
  EXPECT_EQ(store_.ReadBatch("s", 0, 1, 5)->second.size(), 5u);
}

TEST_F(VectorStoreTest, CreateIsIdempotentAndLimited) {
  VectorSessionInfo info;
  EXPECT_EQ(store_.Create("s", 99, Tier::kInt8, store_.ReserveIndex(), 0, &info),
            VectorStore::CreateResult::kExists);
  EXPECT_EQ(info.dim, kDim);
  EXPECT_EQ(info.tier, Tier::kFp32);
  EXPECT_EQ(info.index, 0u);
  EXPECT_EQ(store_.Create("t", kDim, Tier::kFp16, store_.ReserveIndex(), 2, nullptr),
            VectorStore::CreateResult::kCreated);
  EXPECT_EQ(store_.Create("u", kDim, Tier::kFp16, store_.ReserveIndex(), 2, nullptr),
            VectorStore::CreateResult::kLimit);
  EXPECT_EQ(store_.Stats().sessions, 2u);
}

TEST_F(VectorStoreTest, StoreRefusesARecreatedSession) {
  EXPECT_EQ(store_.Store("s", 0, 0, 1, Rows(1, 0), kDim, Tier::kFp16),
            VectorStore::StoreResult::kChanged);
  EXPECT_EQ(store_.Store("x", 0, 0, 1, Rows(1, 0), kDim, Tier::kFp32),
            VectorStore::StoreResult::kNoSession);
  bool hooked = false;
  store_.Store("x", 0, 0, 1, Rows(1, 0), kDim, Tier::kFp32, [&] { hooked = true; });
  EXPECT_FALSE(hooked);
}

TEST_F(VectorStoreTest, DropReleasesEverything) {
  Put(0, 0, 100, 1.0f);
  auto held = store_.ReadRange("s", 0, 0, 100);  // a reply still being written keeps its bytes
  EXPECT_TRUE(store_.Drop("s"));
  EXPECT_FALSE(store_.Drop("s"));
  EXPECT_FALSE(store_.Describe("s").has_value());
  EXPECT_EQ(Floats(held->second.rows)[99 * kDim], 100.0f);
  auto stats = store_.Stats();
  EXPECT_EQ(stats.sessions, 0u);
  EXPECT_EQ(stats.tokens, 0u);
  EXPECT_EQ(stats.allocated_bytes, 0u);
  EXPECT_EQ(stats.overhead_bytes, 0u);
}

// Every STOREBATCH writes one version number into all rows of [0, n). A reader must see a
// single version in each reply: the copy-on-write chunks make every read one state.
TEST_F(VectorStoreTest, ConcurrentReadsNeverSeeATornBatch) {
  const uint64_t n = 60000;  // 15 chunks, 1.9 MB: copies take long enough to overlap
  std::vector<Bytes> versions;
  for (int v = 0; v < 8; ++v) {
    Bytes b = Bytes::Allocate(n * kDim * 4);
    auto* f = reinterpret_cast<float*>(b.mutable_data());
    for (uint64_t i = 0; i < n * kDim; ++i) f[i] = static_cast<float>(v);
    versions.push_back(b);
  }
  ASSERT_EQ(store_.Store("s", 0, 0, n, versions[0], kDim, Tier::kFp32),
            VectorStore::StoreResult::kOk);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> reads{0}, torn{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        auto read = store_.ReadRange("s", 0, 0, n + 10);
        std::vector<float> all = Floats(read->second.rows);
        const float v = all[0];
        for (size_t i = 0; i < n * kDim; ++i) {
          if (all[i] != v) {
            torn += 1;
            break;
          }
        }
        reads += 1;
      }
    });
  }
  std::thread appender([&] {  // grows the layer at the same time: in-place appends
    for (uint64_t i = 0; i < 2000 && !stop.load(); ++i) {
      store_.Store("s", 0, n + 10 + i, 1, Rows(1, -1.0f), kDim, Tier::kFp32);
    }
  });
  // Enough rounds that reads overlap writes many times, bounded in time.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (int round = 0;
       round < 200 || (reads.load() < 500 && std::chrono::steady_clock::now() < deadline);
       ++round) {
    ASSERT_EQ(store_.Store("s", 0, 0, n, versions[round % 8], kDim, Tier::kFp32),
              VectorStore::StoreResult::kOk);
  }
  stop = true;
  for (auto& t : readers) t.join();
  appender.join();
  EXPECT_GT(reads.load(), 0u);
  EXPECT_EQ(torn.load(), 0u);
}

TEST_F(VectorStoreTest, HooksRunOnlyWhenSomethingChanges) {
  int hooks = 0;
  auto hook = [&] { ++hooks; };
  store_.Create("s", kDim, Tier::kFp32, store_.ReserveIndex(), 0, nullptr, hook);  // exists
  store_.Drop("none", hook);
  store_.DropPrefix("none", hook);
  EXPECT_EQ(hooks, 0);
  store_.Store("s", 0, 0, 1, Rows(1, 0), kDim, Tier::kFp32, hook);
  store_.Drop("s", hook);
  EXPECT_EQ(hooks, 2);
}

TEST_F(VectorStoreTest, RegisterCreatesBothSessionsAndKeepsTheFirstShape) {
  PrefixSpec spec;
  spec.kv_dim = 64;
  spec.tier = Tier::kInt8;
  spec.block_size = 16;
  uint64_t hashes[] = {7, 3, 1000};
  spec.block_hashes = Bytes::CopyOf({reinterpret_cast<const char*>(hashes), sizeof hashes});
  spec.prefill_us = 1234;
  EXPECT_EQ(store_.Register("ns", spec, 10, 11, 0), VectorStore::RegisterResult::kCreated);
  EXPECT_EQ(store_.Describe("ns_pk")->index, 10u);
  EXPECT_EQ(store_.Describe("ns_pv")->tier, Tier::kInt8);
  PrefixSpec other = spec;
  other.kv_dim = 128;
  EXPECT_EQ(store_.Register("ns", other, 12, 13, 0), VectorStore::RegisterResult::kExists);
  EXPECT_EQ(store_.Prefix("ns")->kv_dim, 64u);
  // A dropped half comes back with the registered shape.
  EXPECT_TRUE(store_.Drop("ns_pv"));
  EXPECT_EQ(store_.Register("ns", other, 14, 15, 0), VectorStore::RegisterResult::kCreated);
  EXPECT_EQ(store_.Describe("ns_pv")->dim, 64u);
  EXPECT_EQ(store_.Describe("ns_pv")->index, 15u);
  // Indices reserved afterwards never collide with the ones records carried.
  EXPECT_GE(store_.ReserveIndex(), 16u);

  const uint64_t probes[] = {3, 4, 1000, 7, 0};
  auto bits = store_.Membership("ns", probes);
  ASSERT_TRUE(bits.has_value());
  EXPECT_EQ(*bits, (std::vector<bool>{true, false, true, true, false}));
  EXPECT_FALSE(store_.Membership("other", probes).has_value());

  PrefixView view = store_.ViewPrefix("ns");
  EXPECT_TRUE(view.registered && view.key_exists && view.value_exists);
  EXPECT_EQ(view.key_tokens, 0u);
  EXPECT_EQ(view.prefill_us, 1234u);
  EXPECT_EQ(store_.Register("big", spec, 20, 21, 3), VectorStore::RegisterResult::kLimit);
  EXPECT_EQ(store_.PrefixTotals().first, 1u);
  EXPECT_TRUE(store_.DropPrefix("ns"));
  EXPECT_FALSE(store_.ViewPrefix("ns").key_exists);
  EXPECT_FALSE(store_.DropPrefix("ns"));
  EXPECT_EQ(store_.Stats().sessions, 1u);  // "s" from SetUp
}

TEST_F(VectorStoreTest, ForEachSessionCopiesWholeLayers) {
  Put(0, 0, 5, 1.0f);
  Put(4, 3, 2, 9.0f);
  Create("t", 32, Tier::kFp16);
  int sessions = 0;
  store_.ForEachSession([&](const std::string& sid, const VectorSessionInfo& info,
                            const std::vector<LayerRead>& layers) {
    ++sessions;
    if (sid == "t") {
      EXPECT_EQ(info.dim, 32u);
      EXPECT_TRUE(layers.empty());
      return;
    }
    ASSERT_EQ(layers.size(), 2u);
    EXPECT_EQ(layers[1].layer, 4u);
    EXPECT_EQ(layers[1].length, 5u);
    // Rows as stored: the chunk from its first row, the gap before row 3 zero.
    ASSERT_EQ(layers[1].runs.size(), 1u);
    EXPECT_EQ(layers[1].runs[0].start, 0u);
    EXPECT_EQ(layers[1].runs[0].rows.rows, 5u);
    EXPECT_EQ(Floats(layers[1].runs[0].rows)[3 * kDim], 9.0f);
    EXPECT_EQ(Floats(layers[1].runs[0].rows)[0], 0.0f);
  });
  EXPECT_EQ(sessions, 2);
}

TEST_F(VectorStoreTest, ARowAtAHighStartCostsItsChunkNotATableUpToIt) {
  const uint64_t before = store_.Stats().overhead_bytes;
  Put(0, 4'000'000'000, 1, 7.0f);
  const VectorStoreStats stats = store_.Stats();
  EXPECT_EQ(stats.tokens, 4'000'000'001u);
  // One chunk of at most 256 KiB and one handle, however high the start.
  EXPECT_LE(stats.allocated_bytes, 256u * 1024);
  EXPECT_LE(stats.overhead_bytes - before, 512u);
  EXPECT_EQ(Column(0, 3'999'999'998, 4'000'000'002), (std::vector<float>{0.0f, 0.0f, 7.0f, 0.0f}));
  // A gap of any length reads as a few runs of shared zeros.
  auto read = store_.ReadRange("s", 0, 0, 100'000);
  ASSERT_TRUE(read.has_value());
  EXPECT_LE(read->second.rows.pieces.size(), 4u);
}

TEST_F(VectorStoreTest, ZeroRowsAllocateNothingWhereNothingIsStored) {
  Bytes zeros = Bytes::Allocate(10'000 * kDim * 4);
  std::memset(zeros.mutable_data(), 0, zeros.size());
  ASSERT_EQ(store_.Store("s", 0, 0, 10'000, zeros, kDim, Tier::kFp32),
            VectorStore::StoreResult::kOk);
  EXPECT_EQ(store_.Stats().allocated_bytes, 0u);  // a replayed gap costs nothing
  EXPECT_EQ(store_.Stats().tokens, 10'000u);
  // Where rows are stored, zeros overwrite them as any rows do.
  Put(1, 0, 4, 3.0f);
  ASSERT_EQ(
      store_.Store("s", 1, 1, 2, Bytes::CopyOf(std::string(2 * kDim * 4, '\0')), kDim, Tier::kFp32),
      VectorStore::StoreResult::kOk);
  EXPECT_EQ(Column(1, 0, 5), (std::vector<float>{3.0f, 0.0f, 0.0f, 6.0f, 0.0f}));
  EXPECT_EQ(Column(0, 9'998, 10'001), (std::vector<float>{0.0f, 0.0f, 0.0f}));
}

TEST_F(VectorStoreTest, SnapshotRunsHoldOnlyStoredRowsAndReplayTheSameLayer) {
  Put(0, 0, 3, 1.0f);
  Put(0, 1'000'000, 2, 5.0f);
  Bytes zero_row = Bytes::CopyOf(std::string(kDim * 4, '\0'));
  ASSERT_EQ(store_.Store("s", 0, 9'000'000, 1, zero_row, kDim, Tier::kFp32),
            VectorStore::StoreResult::kOk);  // the length grows; nothing is stored
  std::vector<LayerRead> layers;
  store_.ForEachSession([&](const std::string&, const VectorSessionInfo&,
                            const std::vector<LayerRead>& l) { layers = l; });
  ASSERT_EQ(layers.size(), 1u);
  const auto& runs = layers[0].runs;
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].start, 0u);
  // Runs are whole stored chunks: the second starts at its chunk's first row.
  EXPECT_GT(runs[1].start, 3u);
  EXPECT_LE(runs[1].start, 1'000'000u);
  EXPECT_GE(runs[1].start + runs[1].rows.rows, 1'000'002u);
  EXPECT_EQ(runs[2].start, 9'000'000u);
  EXPECT_EQ(runs[2].rows.rows, 1u);
  uint64_t bytes = 0;
  for (const auto& run : runs) bytes += run.rows.bytes();
  EXPECT_LE(bytes, 2u * 256 * 1024);  // what the chunks hold, not 9M rows
  // Replayed into a fresh store, the runs give back the same layer.
  VectorStore replayed{8};
  ASSERT_EQ(replayed.Create("s", kDim, Tier::kFp32, 0, 0, nullptr),
            VectorStore::CreateResult::kCreated);
  for (const auto& run : runs) {
    std::string joined;
    for (const Bytes& p : run.rows.pieces) joined.append(p.view());
    ASSERT_EQ(
        replayed.Store("s", 0, run.start, run.rows.rows, Bytes::CopyOf(joined), kDim, Tier::kFp32),
        VectorStore::StoreResult::kOk);
  }
  for (auto [s, e] :
       {std::pair<uint64_t, uint64_t>{0, 5}, {999'998, 1'000'003}, {8'999'999, 9'000'001}}) {
    auto a = store_.ReadRange("s", 0, s, e), b = replayed.ReadRange("s", 0, s, e);
    EXPECT_EQ(Floats(a->second.rows), Floats(b->second.rows)) << s;
    EXPECT_EQ(a->second.length, b->second.length);
  }
}

// The estimate a write is checked against before it is logged counts the chunks the write
// touches: a row at a high start costs what a row at 0 does (plus at most a chunk), never a
// table up to it; and it bounds what the write really allocates.
TEST_F(VectorStoreTest, WriteCostEstimateCountsOnlyTheChunksAWriteTouches) {
  const uint64_t wide_row = 65536 * 4;  // dim 65536 fp32: one row per chunk
  const uint64_t at_zero = VectorStore::WriteCostEstimate(65536, Tier::kFp32, 0, 1);
  EXPECT_GE(at_zero, wide_row);
  EXPECT_EQ(VectorStore::WriteCostEstimate(65536, Tier::kFp32, (uint64_t{1} << 28) - 1, 1),
            at_zero);
  EXPECT_EQ(VectorStore::WriteCostEstimate(65536, Tier::kFp32, (uint64_t{1} << 40) - 1, 1),
            at_zero);
  // Narrow rows (4096 per chunk): at most one chunk more than the rows, wherever they start, and
  // each of the (at most two) chunks rounded up to a page.
  const uint64_t row = kDim * 4;
  for (uint64_t start : {uint64_t{0}, uint64_t{4095}, uint64_t{1} << 40}) {
    const uint64_t cost = VectorStore::WriteCostEstimate(kDim, Tier::kFp32, start, 10);
    EXPECT_GE(cost, 10 * row) << start;
    EXPECT_LE(cost, (10 + 4096) * row + 1024 + 2 * Bytes::kMaxRoundingBelow1MiB) << start;
  }
  // A dense write costs its rows; a range past any row id saturates.
  EXPECT_GE(VectorStore::WriteCostEstimate(kDim, Tier::kFp32, 0, 1'000'000), 1'000'000 * row);
  EXPECT_EQ(VectorStore::WriteCostEstimate(kDim, Tier::kFp32, ~uint64_t{0}, 2), ~uint64_t{0});
  // Real writes stay within their estimates.
  Put(5, 0, 1, 1.0f);  // the layer's own bookkeeping is not a write's
  for (auto [start, count] :
       {std::pair<uint64_t, uint64_t>{4'000'000'000, 1}, {4093, 7}, {0, 9000}}) {
    const uint64_t before = store_.Stats().allocated_bytes + store_.Stats().overhead_bytes;
    Put(5, start, count, 1.0f);
    const uint64_t after = store_.Stats().allocated_bytes + store_.Stats().overhead_bytes;
    EXPECT_LE(after - before, VectorStore::WriteCostEstimate(kDim, Tier::kFp32, start, count))
        << start;
  }
}

}  // namespace
}  // namespace prefixd::store
