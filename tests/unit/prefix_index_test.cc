// PrefixIndex against a brute-force model: the match answers exactly the longest listed or
// block-boundary position whose checkpoint and whole anchor chain are stored, on multiturn,
// fanout and branch shapes and under random stores, drops and budget evictions; every answer's
// leased rows and states are the prompt's own. Also the packed storage: HashSlots against a map,
// pages across chunks, leased and snapshot pages under slot reuse, and the bytes per block.
#include "store/prefix_index.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>

namespace prefixd::store {
namespace {

constexpr uint32_t kBs = 4;
constexpr uint32_t kDim = 2;

using Tokens = std::vector<uint32_t>;

Hash128 HashOf(const Hash128& prev, const uint32_t* tokens, size_t n) {
  std::string buf(16 + 4 * n, '\0');
  prev.Write(reinterpret_cast<uint8_t*>(buf.data()));
  std::memcpy(buf.data() + 16, tokens, 4 * n);
  XXH128_hash_t h = XXH3_128bits(buf.data(), buf.size());
  return Hash128{h.low64, h.high64};
}

std::vector<Hash128> Chain(const Tokens& t, size_t length) {
  std::vector<Hash128> out;
  Hash128 prev;
  for (size_t i = 0; i + kBs <= length; i += kBs) out.push_back(prev = HashOf(prev, &t[i], kBs));
  return out;
}

Hash128 Position(const Tokens& t, size_t length) {
  auto chain = Chain(t, length);
  Hash128 anchor = chain.empty() ? Hash128{} : chain.back();
  const size_t r = length % kBs;
  return r == 0 ? anchor : HashOf(anchor, &t[length - r], r);
}

// K value of (position, token) and V its negation: so rows name their token and place.
float KValue(const Tokens& t, size_t p) { return static_cast<float>(t[p]) * 1000.0f + p; }

Bytes Rows(const Tokens& t, size_t start, size_t end) {  // K rows then V rows, fp32
  const size_t n = end - start;
  Bytes out = Bytes::Allocate(2 * n * kDim * 4);
  auto* f = reinterpret_cast<float*>(out.mutable_data());
  for (size_t p = start; p < end; ++p) {
    for (uint32_t d = 0; d < kDim; ++d) {
      f[(p - start) * kDim + d] = KValue(t, p);
      f[(n + p - start) * kDim + d] = -KValue(t, p);
    }
  }
  return out;
}

Bytes State(const Tokens& t, size_t length, uint32_t layer) {
  const uint64_t h = XXH3_64bits(t.data(), 4 * length) + layer;
  return Bytes::CopyOf(std::string_view(reinterpret_cast<const char*>(&h), 8));
}

class Fixture {
 public:
  Fixture() : index_(PrefixShape{kBs, 1, kDim, 2, Tier::kFp32, 0}) {}

  PrefixIndex& index() { return index_; }

  // Stores blocks [from, to) (block numbers, 0-based) of `t`.
  std::string StoreBlocks(const Tokens& t, size_t from, size_t to) {
    auto chain = Chain(t, to * kBs);
    BlockBatch b;
    b.parent = from == 0 ? Hash128{} : chain[from - 1];
    b.hashes.assign(chain.begin() + from, chain.begin() + to);
    b.layers.push_back(Rows(t, from * kBs, to * kBs));
    uint64_t stored = 0;
    return index_.StoreBlocks(b, &stored);
  }

  std::string StoreCheckpoint(const Tokens& t, size_t length) {
    auto chain = Chain(t, length);
    CheckpointBatch c;
    c.anchor = chain.empty() ? Hash128{} : chain.back();
    c.first_length = length;
    c.positions.push_back(Position(t, length));
    c.states = {State(t, length, 0), State(t, length, 1)};
    const size_t base = length / kBs * kBs;
    if (length > base) c.tails.push_back(Rows(t, base, length));
    uint64_t stored = 0;
    return index_.StoreCheckpoints(c, &stored);
  }

  // Stores `t`'s blocks up to `length` and a checkpoint at `length`, and leases that answer
  // without releasing it: the lease id.
  uint64_t StoreAndLease(const Tokens& t, size_t length) {
    EXPECT_EQ(StoreBlocks(t, 0, length / kBs), "");
    EXPECT_EQ(StoreCheckpoint(t, length), "");
    std::vector<std::pair<uint64_t, Hash128>> at = {{length, Position(t, length)}};
    auto result = index_.Match(Chain(t, length), at, 1000, 0);
    EXPECT_TRUE(result && result->length == length);
    return result ? result->lease : 0;
  }

  // The match with candidates `at`; checks the leased answer's bytes and releases it.
  uint64_t Match(const Tokens& t, const std::vector<size_t>& at) {
    auto chain = Chain(t, t.size());
    std::vector<std::pair<uint64_t, Hash128>> candidates;
    for (size_t l : at) candidates.emplace_back(l, Position(t, l));
    auto result = index_.Match(chain, candidates, 1000, 0);
    EXPECT_TRUE(result.has_value());
    if (!result || result->length == 0) return 0;
    const uint64_t length = result->length;
    const LeaseView* view = index_.Lease(result->lease, 1);
    EXPECT_NE(view, nullptr);
    if (view == nullptr) return length;
    Bytes got = index_.GatherRows(*view, 0, 0, length);
    Bytes want = Rows(t, 0, length);
    EXPECT_EQ(got.view(), want.view()) << "rows of L=" << length;
    EXPECT_EQ(view->states.size(), 2u);
    for (uint32_t l = 0; l < 2 && l < view->states.size(); ++l) {
      EXPECT_EQ(view->states[l].view(), State(t, length, l).view()) << "state at " << length;
    }
    EXPECT_TRUE(index_.Release(result->lease));
    return length;
  }

 private:
  PrefixIndex index_;
};

TEST(PrefixIndexTest, HybridNamespaceNeverAnswersKvWithoutState) {
  Fixture f;
  Tokens t = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  ASSERT_EQ(f.StoreBlocks(t, 0, 2), "");
  EXPECT_EQ(f.Match(t, {10}), 0u);
  ASSERT_EQ(f.StoreCheckpoint(t, 4), "");
  EXPECT_EQ(f.Match(t, {10}), 4u);
  ASSERT_EQ(f.StoreCheckpoint(t, 10), "");
  EXPECT_EQ(f.Match(t, {10}), 10u);
  EXPECT_EQ(f.Match(t, {}), 4u);  // 10 is inside a block: it must be listed
}

// Two checkpoints at one block's end (stored under different positions): dropping the one the
// block record leads with leaves the other answering the block-boundary match.
TEST(PrefixIndexTest, ASecondCheckpointAtABlockEndAnswersAfterTheFirstGoes) {
  Fixture f;
  Tokens t = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  ASSERT_EQ(f.StoreBlocks(t, 0, 2), "");
  ASSERT_EQ(f.StoreCheckpoint(t, 8), "");
  CheckpointBatch other;
  other.anchor = Chain(t, 8).back();
  other.first_length = 8;
  other.positions.push_back(Hash128{0x1234, 0x5678});
  other.states = {State(t, 8, 0), State(t, 8, 1)};
  uint64_t stored = 0;
  ASSERT_EQ(f.index().StoreCheckpoints(other, &stored), "");
  ASSERT_EQ(stored, 1u);
  EXPECT_EQ(f.Match(t, {}), 8u);
  const Hash128 newer[] = {Hash128{0x1234, 0x5678}};
  EXPECT_EQ(f.index().DropCheckpoints(newer), 1u);
  EXPECT_EQ(f.Match(t, {}), 8u);
  const Hash128 older[] = {Position(t, 8)};
  EXPECT_EQ(f.index().DropCheckpoints(older), 1u);
  EXPECT_EQ(f.Match(t, {}), 0u);
}

TEST(PrefixIndexTest, AttentionOnlyNamespaceAnswersBlockBoundaries) {
  PrefixIndex index(PrefixShape{kBs, 1, kDim, 0, Tier::kFp32, 0});
  Tokens t = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto chain = Chain(t, 8);
  BlockBatch b{Hash128{}, chain, {Rows(t, 0, 8)}};
  uint64_t stored = 0;
  ASSERT_EQ(index.StoreBlocks(b, &stored), "");
  auto r = index.Match(Chain(t, 9), {}, 0, 0);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->length, 8u);
}

TEST(PrefixIndexTest, MultiturnFanoutBranch) {
  Fixture f;
  Tokens convo;
  for (uint32_t i = 0; i < 37; ++i) convo.push_back(100 + i);
  ASSERT_EQ(f.StoreBlocks(convo, 0, 9), "");
  ASSERT_EQ(f.StoreCheckpoint(convo, 37), "");
  std::vector<size_t> ends = {37};
  for (uint32_t turn = 0; turn < 4; ++turn) {
    for (uint32_t i = 0; i < 11; ++i) convo.push_back(1000 * (turn + 1) + i);
    EXPECT_EQ(f.Match(convo, ends), ends.back()) << "turn " << turn;
    ASSERT_EQ(f.StoreBlocks(convo, ends.back() / kBs, convo.size() / kBs), "");
    ASSERT_EQ(f.StoreCheckpoint(convo, convo.size()), "");
    ends.push_back(convo.size());
  }
  for (uint32_t q = 0; q < 5; ++q) {  // fanout
    Tokens prompt(convo.begin(), convo.begin() + 37);
    for (uint32_t i = 0; i < 6; ++i) prompt.push_back(7000 + 10 * q + i);
    EXPECT_EQ(f.Match(prompt, {37, prompt.size()}), 37u);
  }
  for (size_t edit = 38; edit < convo.size(); edit += 3) {  // branch: never past the edit
    Tokens edited = convo;
    edited[edit] = 424242;
    size_t want = 0;
    for (size_t e : ends) {
      if (e <= edit) want = e;
    }
    EXPECT_EQ(f.Match(edited, ends), want) << "edit at " << edit;
  }
}

TEST(PrefixIndexTest, DroppingABlockTakesItsSubtreeAndCheckpoints) {
  Fixture f;
  Tokens t;
  for (uint32_t i = 0; i < 30; ++i) t.push_back(i + 1);
  ASSERT_EQ(f.StoreBlocks(t, 0, 7), "");
  for (size_t l : {6u, 13u, 20u, 27u}) ASSERT_EQ(f.StoreCheckpoint(t, l), "");
  auto chain = Chain(t, 28);
  EXPECT_EQ(f.index().DropBlocks(std::span(&chain[3], 1)), 1u);  // block 4 = [12, 16)
  const PrefixStats s = f.index().Stats();
  EXPECT_EQ(s.blocks, 3u);
  EXPECT_EQ(s.checkpoints, 2u);  // 6 and 13 (anchored on block 3) keep their chains
  EXPECT_EQ(f.Match(t, {6, 13, 20, 27}), 13u);
  EXPECT_EQ(f.StoreCheckpoint(t, 17), "anchor block is not stored");
}

TEST(PrefixIndexTest, LeasedEntriesSurviveDropUntilRelease) {
  Fixture f;
  Tokens t = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const uint64_t lease = f.StoreAndLease(t, 10);
  ASSERT_NE(lease, 0u);
  auto chain = Chain(t, 10);
  std::vector<std::pair<uint64_t, Hash128>> at = {{10, Position(t, 10)}};
  // A budget eviction cannot take the leased checkpoint or its anchor.
  std::vector<Hash128> blocks, ckpts;
  f.index().PlanEviction(0, Hash128{}, &blocks, &ckpts);
  EXPECT_TRUE(blocks.empty());
  EXPECT_TRUE(ckpts.empty());
  // A drop hides them from matches at once; the lease still reads every byte.
  EXPECT_EQ(f.index().DropBlocks(std::span(&chain[0], 1)), 1u);
  EXPECT_EQ(f.index().Stats().blocks, 0u);
  const LeaseView* view = f.index().Lease(lease, 1);
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(f.index().GatherRows(*view, 0, 0, 10).view(), Rows(t, 0, 10).view());
  EXPECT_TRUE(f.index().Release(lease));
  EXPECT_EQ(f.Match(t, {10}), 0u);
  // The freed slots are reused correctly.
  ASSERT_EQ(f.StoreBlocks(t, 0, 2), "");
  ASSERT_EQ(f.StoreCheckpoint(t, 10), "");
  EXPECT_EQ(f.Match(t, {10}), 10u);
  // Expiry.
  auto r2 = f.index().Match(chain, at, 5, 100);
  ASSERT_TRUE(r2 && r2->lease != 0);
  EXPECT_EQ(f.index().Lease(r2->lease, 105), nullptr);
  EXPECT_EQ(f.index().Stats().leases, 0u);
}

TEST(PrefixIndexTest, LeaseLimitAnswersBusy) {
  Fixture f;
  Tokens t = {1, 2, 3, 4};
  ASSERT_EQ(f.StoreBlocks(t, 0, 1), "");
  ASSERT_EQ(f.StoreCheckpoint(t, 4), "");
  auto chain = Chain(t, 4);
  for (size_t i = 0; i < PrefixIndex::kDefaultMaxLeases; ++i) {
    ASSERT_TRUE(f.index().Match(chain, {}, 1000, 0).has_value());
  }
  EXPECT_FALSE(f.index().Match(chain, {}, 1000, 0).has_value());
  EXPECT_TRUE(f.index().Match(chain, {}, 0, 0).has_value());        // NOLEASE still answers
  EXPECT_TRUE(f.index().Match(chain, {}, 1000, 2000).has_value());  // the others expired
}

TEST(PrefixIndexTest, LeasedPagesKeepTheirBytesWhileOtherBlocksReuseTheSlots) {
  Fixture f;
  Tokens t, other;
  for (uint32_t i = 0; i < 42; ++i) t.push_back(i + 1), other.push_back(9000 + i);
  const uint64_t lease = f.StoreAndLease(t, 42);
  ASSERT_NE(lease, 0u);
  auto chain = Chain(t, 42);
  // Drop the whole chain, then store as many other blocks: the leased slots must not be reused.
  EXPECT_EQ(f.index().DropBlocks(std::span(&chain[0], 1)), 1u);
  ASSERT_EQ(f.StoreBlocks(other, 0, 10), "");
  const LeaseView* view = f.index().Lease(lease, 1);
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(f.index().GatherRows(*view, 0, 0, 42).view(), Rows(t, 0, 42).view());
  EXPECT_TRUE(f.index().Release(lease));
  // Released: the slots come back, and both chains read right.
  ASSERT_EQ(f.StoreBlocks(t, 0, 10), "");
  ASSERT_EQ(f.StoreCheckpoint(t, 42), "");
  ASSERT_EQ(f.StoreCheckpoint(other, 40), "");
  EXPECT_EQ(f.Match(t, {42}), 42u);
  EXPECT_EQ(f.Match(other, {}), 40u);
}

TEST(PrefixIndexTest, SnapshotPagesStayIntactWhenTheirSlotsAreRewritten) {
  Fixture f;
  Tokens t, other;
  for (uint32_t i = 0; i < 40; ++i) t.push_back(i + 1), other.push_back(7000 + i);
  ASSERT_EQ(f.StoreBlocks(t, 0, 10), "");
  std::vector<BlockBatch> snapshot;
  f.index().ForEachBlock([&](const BlockBatch& b) { snapshot.push_back(b); });
  ASSERT_EQ(snapshot.size(), 10u);
  // What a DUMP holds after the lock is released: the slots are freed and written again.
  auto chain = Chain(t, 40);
  EXPECT_EQ(f.index().DropBlocks(std::span(&chain[0], 1)), 1u);
  ASSERT_EQ(f.StoreBlocks(other, 0, 10), "");
  for (const BlockBatch& b : snapshot) {
    const size_t block = std::find(chain.begin(), chain.end(), b.hashes[0]) - chain.begin();
    ASSERT_LT(block, chain.size());
    EXPECT_EQ(b.layers[0].view(), Rows(t, block * kBs, (block + 1) * kBs).view());
  }
}

TEST(PrefixIndexTest, TheLruClockWrapKeepsTheOrder) {
  // An attention-only namespace: a match touches the block it answers.
  PrefixIndex index(PrefixShape{kBs, 1, kDim, 0, Tier::kFp32, 0});
  Tokens a = {1, 2, 3, 4, 5, 6, 7, 8}, b = {11, 12, 13, 14, 15, 16, 17, 18};
  index.set_clock(PrefixIndex::kClockLimit - 2);
  uint64_t stored = 0;
  ASSERT_EQ(index.StoreBlocks(BlockBatch{Hash128{}, Chain(a, 8), {Rows(a, 0, 8)}}, &stored), "");
  ASSERT_EQ(index.StoreBlocks(BlockBatch{Hash128{}, Chain(b, 8), {Rows(b, 0, 8)}}, &stored), "");
  // The clock wrapped while b was stored: a's blocks must still count as older until touched.
  std::vector<Hash128> blocks, ckpts;
  const uint64_t one_block = index.payload_bytes() / 4;
  index.PlanEviction(index.payload_bytes() - one_block, Hash128{}, &blocks, &ckpts);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0], Chain(a, 8)[1]);
  ASSERT_TRUE(index.Match(Chain(a, 8), {}, 0, 0));  // a is now the most recent
  blocks.clear();
  index.PlanEviction(index.payload_bytes() - one_block, Hash128{}, &blocks, &ckpts);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0], Chain(b, 8)[1]);
}

// Pages of 512 KiB: four to a 2 MiB chunk, so a dozen blocks span several chunks, and freed
// slots in a chunk a snapshot holds are rewritten (the chunk is copied first).
TEST(PrefixIndexTest, PagesAcrossChunksReadBackAfterDropsAndReuse) {
  constexpr uint32_t kWideDim = 16384;  // fp32: 64 KiB a row, 512 KiB a page at 4 tokens
  PrefixIndex index(PrefixShape{kBs, 1, kWideDim, 1, Tier::kFp32, 0});
  const size_t half = size_t{kBs} * kWideDim * 4;
  // Block b's K rows are all b + 1, its V rows -(b + 1) (as floats), `base` apart per chain.
  auto store = [&](const Hash128& parent, const std::vector<Hash128>& hashes, float base) {
    BlockBatch batch{parent, hashes, {Bytes::Allocate(2 * half * hashes.size())}};
    auto* f = reinterpret_cast<float*>(batch.layers[0].mutable_data());
    const size_t per = half / 4;
    for (size_t b = 0; b < hashes.size(); ++b) {
      std::fill(f + b * per, f + (b + 1) * per, base + b + 1);
      std::fill(f + (hashes.size() + b) * per, f + (hashes.size() + b + 1) * per, -(base + b + 1));
    }
    uint64_t stored = 0;
    EXPECT_EQ(index.StoreBlocks(batch, &stored), "");
  };
  auto check = [&](const Hash128& h, float value) {
    auto rows = index.BlockRows(std::span(&h, 1), 0);
    ASSERT_TRUE(rows.has_value());
    const auto* f = reinterpret_cast<const float*>(rows->data());
    EXPECT_EQ(f[0], value);
    EXPECT_EQ(f[half / 4 - 1], value);
    EXPECT_EQ(f[half / 4], -value);
    EXPECT_EQ(f[2 * half / 4 - 1], -value);
  };
  std::vector<Hash128> a, b;
  for (uint64_t i = 1; i <= 12; ++i) a.push_back(Hash128{i, 1}), b.push_back(Hash128{i, 2});
  store(Hash128{}, a, 0);
  for (size_t i = 0; i < a.size(); ++i) check(a[i], i + 1);
  std::vector<BlockBatch> snapshot;
  index.ForEachBlock([&](const BlockBatch& batch) { snapshot.push_back(batch); });
  EXPECT_EQ(index.DropBlocks(std::span(&a[5], 1)), 1u);  // blocks 6..12 go
  store(Hash128{}, b, 100);                              // 7 reused slots, 5 new ones
  for (size_t i = 0; i < 5; ++i) check(a[i], i + 1);
  for (size_t i = 0; i < b.size(); ++i) check(b[i], 100 + i + 1);
  ASSERT_EQ(snapshot.size(), a.size());
  for (const BlockBatch& batch : snapshot) {
    const size_t i = std::find(a.begin(), a.end(), batch.hashes[0]) - a.begin();
    const auto* f = reinterpret_cast<const float*>(batch.layers[0].data());
    EXPECT_EQ(f[0], i + 1.0f) << "snapshot of block " << i;
    EXPECT_EQ(f[2 * half / 4 - 1], -(i + 1.0f)) << "snapshot of block " << i;
  }
  EXPECT_EQ(index.Stats().blocks, 17u);
  EXPECT_EQ(index.Stats().kv_bytes, 17 * 2 * half);
}

// docs/prefix-index.md §3: at most 100 bytes of index per block beyond its K/V, by the index's
// own accounting (which docs/benchmarks.md checks against the server's RSS), for a large
// namespace and a small one, and no growth when dropped blocks are stored again.
TEST(PrefixIndexTest, IndexCostsAtMost100BytesPerBlock) {
  constexpr uint32_t kBlock = 16;
  auto load = [&](PrefixIndex& index, uint32_t blocks, uint32_t seed) {
    std::vector<Hash128> all;
    for (uint32_t at = 0; at < blocks; at += 4096) {
      const uint32_t n = std::min<uint32_t>(4096, blocks - at);
      BlockBatch batch;
      batch.parent = at == 0 ? Hash128{} : all.back();
      for (uint32_t i = 0; i < n; ++i) {
        batch.hashes.push_back(Hash128{seed * 0x9E3779B97F4A7C15ull + at + i + 1, seed});
      }
      batch.layers.push_back(Bytes::Allocate(size_t{2} * n * kBlock * 4));
      uint64_t stored = 0;
      EXPECT_EQ(index.StoreBlocks(batch, &stored), "");
      EXPECT_EQ(stored, n);
      all.insert(all.end(), batch.hashes.begin(), batch.hashes.end());
    }
    return all;
  };
  for (uint32_t blocks : {100u, 100000u}) {
    PrefixIndex index(PrefixShape{kBlock, 1, 1, 1, Tier::kFp32, 0});
    const auto chain = load(index, blocks, 1);
    const PrefixStats s = index.Stats();
    ASSERT_EQ(s.blocks, blocks);
    EXPECT_EQ(s.kv_bytes, uint64_t{blocks} * 2 * kBlock * 4);
    EXPECT_LE(s.index_bytes, uint64_t{blocks} * 100) << blocks << " blocks";
    EXPECT_GE(s.index_bytes, uint64_t{blocks} * 48) << "the record alone is 48 bytes";
    // Drop the second half and store another half: the freed slots are reused.
    EXPECT_EQ(index.DropBlocks(std::span(&chain[blocks / 2], 1)), 1u);
    load(index, blocks / 2, 2);
    EXPECT_LE(index.Stats().index_bytes, s.index_bytes * 21 / 20) << blocks << " blocks";
  }
}

// The open-addressing table against std::map under random inserts and erases that grow it, shrink
// it and wrap runs around its end; ids name hashes in a side vector, as records do.
TEST(HashSlotsTest, AgreesWithAMapThroughGrowthShrinkAndWrap) {
  std::mt19937_64 rng(42);
  std::vector<Hash128> hash_of_id;
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> model;
  HashSlots slots;
  auto hash_of = [&](uint32_t id) -> const Hash128& { return hash_of_id[id]; };
  for (int step = 0; step < 60000; ++step) {
    // Fill to ~6000 entries, then drain to a few, twice: every resize path runs.
    const bool filling = (step / 15000) % 2 == 0;
    if (model.empty() || rng() % 100 < (filling ? 70u : 30u)) {
      const Hash128 h{rng() % 4096, rng() % 3};  // small values: repeats and near-collisions
      if (model.count({h.lo, h.hi})) continue;
      const auto id = static_cast<uint32_t>(hash_of_id.size());
      hash_of_id.push_back(h);
      slots.Insert(h, id, hash_of);
      model[{h.lo, h.hi}] = id;
    } else {
      auto it = model.begin();
      std::advance(it, rng() % model.size());
      const Hash128 h{it->first.first, it->first.second};
      ASSERT_TRUE(slots.Erase(h, hash_of));
      model.erase(it);
      ASSERT_FALSE(slots.Erase(h, hash_of));
    }
    ASSERT_EQ(slots.size(), model.size());
    if (step % 2000 == 0) {
      for (const auto& [key, id] : model) {
        ASSERT_EQ(slots.Find(Hash128{key.first, key.second}, hash_of), id) << "step " << step;
      }
      EXPECT_EQ(slots.Find(Hash128{99999, 7}, hash_of), HashSlots::kEmpty);
      EXPECT_LE(slots.memory_bytes(), std::max<size_t>(64, model.size() * 4 * 8));
    }
  }
}

// Random stores, drops and budget evictions on a few conversations that share beginnings; after
// each step the match must equal the brute-force answer over what the model says is stored.
class PrefixIndexRandomTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(PrefixIndexRandomTest, RandomOperationsKeepEveryAnswerComplete) {
  std::mt19937_64 rng(GetParam());
  Fixture f;
  std::vector<Tokens> convos;
  for (int c = 0; c < 6; ++c) {
    Tokens t;
    const size_t shared = (c % 3) * 9;  // pairs share 0, 9 or 18 tokens with convo 0
    for (size_t i = 0; i < 48; ++i) {
      t.push_back(i < shared && !convos.empty() ? convos[0][i] : 10000 * (c + 1) + i);
    }
    convos.push_back(t);
  }
  // The model: stored block hashes by depth, and checkpoint positions with their length.
  std::set<std::pair<uint64_t, uint64_t>> blocks;
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> ckpts;
  auto key = [](const Hash128& h) { return std::make_pair(h.lo, h.hi); };
  auto resync = [&] {  // read back what survived a drop or eviction
    blocks.clear();
    std::map<std::pair<uint64_t, uint64_t>, uint64_t> kept;
    for (const Tokens& t : convos) {
      for (const Hash128& h : Chain(t, t.size())) {
        if (f.index().HasBlock(h)) blocks.insert(key(h));
      }
      for (size_t l = 1; l <= t.size(); ++l) {
        if (ckpts.count(key(Position(t, l))) && f.index().CheckpointStates(Position(t, l))) {
          kept[key(Position(t, l))] = l;
        }
      }
    }
    ckpts = kept;
  };
  for (int step = 0; step < 400; ++step) {
    const Tokens& t = convos[rng() % convos.size()];
    const int op = static_cast<int>(rng() % 10);
    if (op < 4) {
      const size_t to = 1 + rng() % (t.size() / kBs);
      auto chain = Chain(t, to * kBs);
      size_t from = 0;
      while (from < to && blocks.count(key(chain[from]))) ++from;
      if (from < to) {
        ASSERT_EQ(f.StoreBlocks(t, from, to), "");
        for (size_t i = from; i < to; ++i) blocks.insert(key(chain[i]));
      }
    } else if (op < 7) {
      const size_t l = 1 + rng() % t.size();
      auto chain = Chain(t, l);
      const bool anchored = chain.empty() || blocks.count(key(chain.back()));
      std::string why = f.StoreCheckpoint(t, l);
      ASSERT_EQ(why.empty(), anchored) << why;
      if (anchored) ckpts.emplace(key(Position(t, l)), l);
    } else if (op == 7) {
      auto chain = Chain(t, t.size());
      const Hash128 victim = chain[rng() % chain.size()];
      f.index().DropBlocks(std::span(&victim, 1));
      resync();
    } else if (op == 8) {
      std::vector<Hash128> vb, vc;
      f.index().PlanEviction(f.index().payload_bytes() * 3 / 4, Hash128{}, &vb, &vc);
      f.index().DropCheckpoints(vc, true);
      f.index().DropBlocks(vb, true);
      resync();
    }
    // Every conversation, with every earlier position listed: the brute-force answer.
    for (const Tokens& p : convos) {
      auto chain = Chain(p, p.size());
      std::vector<size_t> at;
      for (size_t l = 1; l <= p.size(); ++l) at.push_back(l);
      uint64_t want = 0;
      for (size_t l = p.size(); l >= 1 && want == 0; --l) {
        auto it = ckpts.find(key(Position(p, l)));
        if (it == ckpts.end() || it->second != l) continue;
        bool complete = true;
        for (size_t d = 0; d < l / kBs; ++d) complete = complete && blocks.count(key(chain[d]));
        if (complete) want = l;
      }
      // Every checkpoint the index holds has its whole anchor chain (the eviction invariant).
      for (size_t l = 1; l <= p.size(); ++l) {
        if (!f.index().CheckpointStates(Position(p, l))) continue;
        for (size_t d = 0; d < l / kBs; ++d) {
          ASSERT_TRUE(f.index().HasBlock(chain[d])) << "checkpoint " << l << " lost block " << d;
        }
      }
      ASSERT_EQ(f.Match(p, at), want) << "step " << step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, PrefixIndexRandomTest, ::testing::Values(12345, 7, 99, 2024));

}  // namespace
}  // namespace prefixd::store
