// VectorStore's disk tier: rows written one over another in any order, each placed where its
// record sits in a file, read back from the file after the session goes cold exactly as they
// were read from memory (ranges, ids, batches, gaps, rows past the length); a session goes cold
// only when every write is placed and durable; a snapshot's Repoint is taken only by a layer not
// written since; promotion and a write to a cold layer bring the rows back.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "store/vector_store.h"

namespace prefixd::store {
namespace {

constexpr uint32_t kDim = 4;  // fp32 rows of 16 bytes
constexpr size_t kRowBytes = kDim * 4;

// A file in memory: records append to it; reads count what they read.
class MemoryFile : public ColdFile {
 public:
  bool Read(uint64_t offset, uint64_t length, Bytes& out, std::string& error) const override {
    if (offset + length > bytes.size()) {
      error = "past the end";
      return false;
    }
    out = Bytes::CopyOf(std::string_view(bytes).substr(offset, length));
    reads += 1;
    return true;
  }
  uint64_t Append(const Bytes& rows) {
    const uint64_t at = bytes.size();
    bytes.append(rows.view());
    return at;
  }
  std::string bytes;
  mutable int reads = 0;
};

Bytes RandomRows(std::mt19937& rng, uint64_t count) {
  Bytes b = Bytes::Allocate(count * kRowBytes);
  for (size_t i = 0; i < count * kRowBytes; ++i) b.mutable_data()[i] = static_cast<uint8_t>(rng());
  return b;
}

std::string Joined(const RowSpan& span) {
  std::string out;
  for (const Bytes& p : span.pieces) out.append(p.view());
  return out;
}

class VectorDiskTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(store_.Create("s", kDim, Tier::kFp32, 7, 0, nullptr),
              VectorStore::CreateResult::kCreated);
  }
  // Writes and places rows as the log would (in write order).
  void Write(uint32_t layer, uint64_t start, const Bytes& rows, bool place = true) {
    const uint64_t count = rows.size() / kRowBytes;
    ASSERT_EQ(store_.Store("s", layer, start, count, rows, kDim, Tier::kFp32),
              VectorStore::StoreResult::kOk);
    if (place) store_.Place("s", 7, layer, start, count, file_, file_->Append(rows));
  }
  std::string Range(uint32_t layer, uint64_t start, uint64_t end) {
    auto read = store_.ReadRange("s", layer, start, end);
    return read ? Joined(read->second.rows) : "none";
  }
  VectorStore store_;
  std::shared_ptr<MemoryFile> file_ = std::make_shared<MemoryFile>();
};

TEST_F(VectorDiskTierTest, OverlappingWritesReadBackFromDiskAsFromMemory) {
  std::mt19937 rng(42);
  // Random overwrites, gaps and appends over three layers.
  for (int i = 0; i < 300; ++i) {
    const uint32_t layer = rng() % 3;
    const uint64_t start = rng() % 200;
    ASSERT_NO_FATAL_FAILURE(Write(layer, start, RandomRows(rng, 1 + rng() % 40)));
  }
  std::vector<std::pair<uint64_t, uint64_t>> ranges = {{0, 300}, {0, 1}, {239, 260}};
  for (int i = 0; i < 200; ++i) {
    const uint64_t a = rng() % 260, b = a + 1 + rng() % 60;
    ranges.emplace_back(a, b);
  }
  std::vector<std::string> hot;
  for (uint32_t layer = 0; layer < 3; ++layer) {
    for (const auto& [a, b] : ranges) hot.push_back(Range(layer, a, b));
  }
  const std::vector<uint64_t> ids = {0, 5, 199, 238, 1000, 5};
  const std::string hot_ids = Joined(store_.ReadIds("s", 1, ids)->second.rows);
  const auto batch = [&] {
    std::string all;
    const auto read = store_.ReadBatch("s", 3, 250, std::nullopt);
    for (const LayerRead& l : read->second) all += std::to_string(l.length) + ":" + Joined(l.rows);
    return all;
  };
  const std::string hot_batch = batch();

  file_->MarkDurable(file_->bytes.size());
  const VectorColdOutcome out = store_.MakeCold("s");
  ASSERT_TRUE(out.ok);
  EXPECT_GT(out.freed, 0u);
  EXPECT_EQ(store_.Stats().allocated_bytes, 0u);
  EXPECT_EQ(store_.Stats().cold_layers, 3u);
  EXPECT_GT(store_.ColdBytes("s"), 0u);
  size_t k = 0;
  for (uint32_t layer = 0; layer < 3; ++layer) {
    for (const auto& [a, b] : ranges) {
      ASSERT_EQ(Range(layer, a, b), hot[k++]) << "layer " << layer << " [" << a << ", " << b << ")";
    }
  }
  EXPECT_EQ(Joined(store_.ReadIds("s", 1, ids)->second.rows), hot_ids);
  EXPECT_EQ(batch(), hot_batch);
  // A range reads only its rows.
  const uint64_t before = store_.Stats().cold_bytes_read;
  Range(0, 10, 13);
  EXPECT_LE(store_.Stats().cold_bytes_read - before, 3 * kRowBytes + 4096);

  // Promotion brings it all back; reads match again, from memory.
  ASSERT_TRUE(store_.Promote("s"));
  EXPECT_EQ(store_.Stats().cold_layers, 0u);
  EXPECT_EQ(store_.ColdBytes("s"), 0u);
  const int reads = file_->reads;
  k = 0;
  for (uint32_t layer = 0; layer < 3; ++layer) {
    for (const auto& [a, b] : ranges) ASSERT_EQ(Range(layer, a, b), hot[k++]);
  }
  EXPECT_EQ(file_->reads, reads);
  const auto detail = store_.Detail("s");
  uint64_t tokens = 0;
  for (const auto& [l, length] : detail->layer_lengths) tokens += length;
  EXPECT_EQ(store_.Stats().tokens, tokens) << "the token count is the layers' lengths again";
}

TEST_F(VectorDiskTierTest, OnlyPlacedDurableWritesLetASessionGoCold) {
  std::mt19937 rng(1);
  ASSERT_NO_FATAL_FAILURE(Write(0, 0, RandomRows(rng, 10)));
  EXPECT_FALSE(store_.MakeCold("s").ok) << "not durable";
  file_->MarkDurable(file_->bytes.size());
  const Bytes late = RandomRows(rng, 4);
  ASSERT_NO_FATAL_FAILURE(Write(0, 8, late, /*place=*/false));
  EXPECT_FALSE(store_.MakeCold("s").ok) << "a write not placed yet";
  // A place for another session of the same name (index 8) is not this one's.
  store_.Place("s", 8, 0, 8, 4, file_, file_->Append(late));
  file_->MarkDurable(file_->bytes.size());
  EXPECT_FALSE(store_.MakeCold("s").ok);
  store_.Place("s", 7, 0, 8, 4, file_, file_->bytes.size() - late.size());
  ASSERT_TRUE(store_.MakeCold("s").ok);
  EXPECT_EQ(Range(0, 8, 12), std::string(late.view()));
  // A write to the cold layer reads it back first, then applies.
  const Bytes next = RandomRows(rng, 2);
  ASSERT_NO_FATAL_FAILURE(Write(0, 0, next));
  EXPECT_EQ(store_.Stats().cold_layers, 0u);
  EXPECT_EQ(Range(0, 0, 2), std::string(next.view()));
  EXPECT_EQ(Range(0, 8, 12), std::string(late.view()));
  // A place reported with no file (the log could not open its segment) keeps it in memory.
  ASSERT_NO_FATAL_FAILURE(Write(1, 0, RandomRows(rng, 3), /*place=*/false));
  store_.Place("s", 7, 1, 0, 3, nullptr, 0);
  file_->MarkDurable(file_->bytes.size());
  EXPECT_FALSE(store_.MakeCold("s").ok);
}

TEST_F(VectorDiskTierTest, RepointTakesTheSnapshotsRunsOnlyForAnUnchangedLayer) {
  std::mt19937 rng(3);
  const Bytes rows = RandomRows(rng, 6);
  ASSERT_NO_FATAL_FAILURE(Write(0, 0, rows));
  ASSERT_NO_FATAL_FAILURE(Write(1, 0, rows));
  // The "snapshot": a second file holding the layers as copied.
  auto snapshot = std::make_shared<MemoryFile>();
  snapshot->bytes = "header--" + std::string(rows.view());
  snapshot->MarkDurable(ColdFile::kAllDurable);
  uint64_t version0 = 0, version1 = 0;
  store_.ForEachSession(
      [&](const std::string&, const VectorSessionInfo&, const std::vector<LayerRead>& layers) {
        version0 = layers[0].version;
        version1 = layers[1].version;
      });
  const Bytes newer = RandomRows(rng, 1);
  ASSERT_NO_FATAL_FAILURE(Write(1, 2, newer));  // layer 1 changes after the copy
  store_.Repoint("s", 7, 0, version0, {PlacedRun{0, 6, 8}}, snapshot);
  store_.Repoint("s", 7, 1, version1, {PlacedRun{0, 6, 8}}, snapshot);
  file_->MarkDurable(file_->bytes.size());
  ASSERT_TRUE(store_.MakeCold("s").ok);
  const int log_reads = file_->reads;
  EXPECT_EQ(Range(0, 0, 6), std::string(rows.view()));
  EXPECT_EQ(file_->reads, log_reads) << "layer 0 reads from the snapshot";
  std::string expected(rows.view());
  expected.replace(2 * kRowBytes, kRowBytes, newer.view());
  EXPECT_EQ(Range(1, 0, 6), expected) << "layer 1 kept its own places";
  // A snapshot of a cold session reads its rows for the copy and reports it cold.
  store_.ForEachSession(
      [&](const std::string&, const VectorSessionInfo&, const std::vector<LayerRead>& layers) {
        ASSERT_EQ(layers.size(), 2u);
        EXPECT_TRUE(layers[1].cold);
        std::string copied;
        for (const RowRun& run : layers[1].runs) copied += Joined(run.rows);
        EXPECT_EQ(copied, expected);
      });
  // Dropping a cold session forgets its figures.
  EXPECT_TRUE(store_.Drop("s"));
  EXPECT_EQ(store_.Stats().cold_layers, 0u);
  EXPECT_EQ(store_.Stats().cold_bytes, 0u);
}

// A layer appended one row per write costs 32 bytes per extent, and a file no extent names any
// more is let go (a log segment compaction removed is closed).
TEST(RowPlacesTest, AppendsCostOneExtentAndUnusedFilesAreReleased) {
  RowPlaces places;
  std::vector<std::weak_ptr<MemoryFile>> old;
  for (int f = 0; f < 12; ++f) {
    auto file = std::make_shared<MemoryFile>();
    old.push_back(file);
    // 100 rows each, 2 rows apart in the file (other records in between): no merging.
    for (uint64_t r = 0; r < 100; ++r)
      places.Insert(f * 100 + r, 1, file, 2 * r * kRowBytes, kRowBytes);
  }
  EXPECT_EQ(places.size(), 1200u);
  EXPECT_LE(places.MemoryBytes(), 2 * 1200 * 32 + 1024);
  // Rewritten whole from one file (a snapshot): the twelve old files are released.
  auto snapshot = std::make_shared<MemoryFile>();
  places.Insert(0, 1200, snapshot, 0, kRowBytes);
  EXPECT_EQ(places.size(), 1u);
  auto another = std::make_shared<MemoryFile>();
  places.Insert(5, 1, another, 64, kRowBytes);  // splits the extent in three
  EXPECT_EQ(places.size(), 3u);
  for (int f = 0; f < 8; ++f)
    places.Insert(2000 + f, 1, std::make_shared<MemoryFile>(), 0, kRowBytes);
  int alive = 0;
  for (const auto& w : old) alive += w.expired() ? 0 : 1;
  EXPECT_EQ(alive, 0);
  const auto pieces = places.Pieces(0, 10, 1200, kRowBytes);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].rows, 5u);
  EXPECT_EQ(pieces[1].file, another);
  EXPECT_EQ(pieces[2].offset, 6 * kRowBytes);
}

}  // namespace
}  // namespace prefixd::store
