// The V-store through the durability layer: the record codec of types 32-37, recovery from the
// log and from a snapshot plus the log after it (byte-identical rows, the same indices), and the
// replay rules (rows of a session dropped later are skipped; a half of a prefix dropped with
// V.DROP stays dropped after a snapshot).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "persist/durability.h"
#include "persist/mutation.h"
#include "store/state_store.h"
#include "store/vector_store.h"

namespace prefixd::persist {
namespace {

using store::Tier;
using store::VectorStore;

Bytes Encoded(Tier tier, uint32_t dim, uint64_t rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(rows * dim);
  for (float& v : x) v = normal(rng);
  Bytes out = Bytes::Allocate(rows * store::RowBytes(tier, dim));
  EXPECT_EQ(store::EncodeRows(tier, dim, store::InputFormat::kF32,
                              reinterpret_cast<const uint8_t*>(x.data()), rows, out.mutable_data()),
            "");
  return out;
}

std::string Joined(const store::RowSpan& span) {
  std::string out;
  for (const Bytes& p : span.pieces) out.append(p.view());
  return out;
}

TEST(VectorRecordCodecTest, EveryTypeRoundTrips) {
  Mutation m;
  m.sid = std::string("s\0id", 4);
  m.vector.index = 77;
  m.vector.value_index = 78;
  m.vector.dim = 96;
  m.vector.tier = 5;
  m.vector.layer = 3;
  m.vector.start = 1ull << 33;
  m.vector.rows = 2;
  m.vector.block_size = 16;
  m.vector.prefill_us = 1234;
  m.vector.data = {Bytes::CopyOf("abc"), Bytes(), Bytes::CopyOf("defg")};
  for (RecordType type : {RecordType::kVCreate, RecordType::kVStore, RecordType::kVDrop,
                          RecordType::kKvRegister, RecordType::kKvDrop, RecordType::kKvPrefix}) {
    SCOPED_TRACE(static_cast<int>(type));
    m.type = type;
    std::string payload;
    for (const Bytes& piece : EncodePayload(m)) payload.append(piece.view());
    Mutation back;
    ASSERT_EQ(DecodePayload(type, Bytes::CopyOf(payload), back), "");
    EXPECT_EQ(back.sid, m.sid);
    if (type == RecordType::kVStore) {
      EXPECT_EQ(back.vector.layer, 3u);
      EXPECT_EQ(back.vector.start, 1ull << 33);
      EXPECT_EQ(back.vector.rows, 2u);
      EXPECT_EQ(back.vector.joined_data().view(), "abcdefg");
    }
    if (type == RecordType::kKvRegister || type == RecordType::kKvPrefix) {
      EXPECT_EQ(back.vector.index, 77u);
      EXPECT_EQ(back.vector.value_index, 78u);
      EXPECT_EQ(back.vector.block_size, 16u);
      EXPECT_EQ(back.vector.prefill_us, 1234u);
      EXPECT_EQ(back.vector.joined_data().view(), "abcdefg");
    }
    if (type == RecordType::kVCreate) {
      EXPECT_EQ(back.vector.index, 77u);
      EXPECT_EQ(back.vector.dim, 96u);
      EXPECT_EQ(back.vector.tier, 5u);
    }
    // Cut anywhere, or with a byte too many, the payload is refused.
    for (size_t cut = 0; cut < payload.size(); cut += 3) {
      EXPECT_NE(DecodePayload(type, Bytes::CopyOf(payload.substr(0, cut)), back), "") << cut;
    }
    EXPECT_NE(DecodePayload(type, Bytes::CopyOf(payload + "x"), back), "");
  }
}

// A data directory with both stores, changed the way the command handlers change them.
class Node {
 public:
  explicit Node(const std::string& dir) {
    DurabilityOptions options;
    options.dir = dir;
    options.policy = FsyncPolicy::kAlways;
    durability_ = std::make_unique<Durability>(options, ssm_, &vectors_);
  }
  std::string Open() { return durability_->Open(); }
  VectorStore& vectors() { return vectors_; }
  Durability& durability() { return *durability_; }

  template <typename Apply>
  void Log(const Mutation& m, Apply apply) {
    std::vector<Bytes> payload = EncodePayload(m);
    apply([&] { durability_->Append(m.type, std::move(payload)); });
  }

  void Create(const std::string& sid, uint32_t dim, Tier tier) {
    Mutation m;
    m.type = RecordType::kVCreate;
    m.sid = sid;
    m.vector.index = vectors_.ReserveIndex();
    m.vector.dim = dim;
    m.vector.tier = static_cast<uint32_t>(tier);
    Log(m, [&](const auto& hook) {
      vectors_.Create(sid, dim, tier, m.vector.index, 0, nullptr, hook);
    });
  }
  void Store(const std::string& sid, uint32_t layer, uint64_t start, uint64_t count,
             uint64_t seed) {
    auto info = vectors_.Describe(sid);
    ASSERT_TRUE(info.has_value());
    Mutation m;
    m.type = RecordType::kVStore;
    m.sid = sid;
    m.vector.layer = layer;
    m.vector.start = start;
    m.vector.rows = count;
    m.vector.dim = info->dim;
    m.vector.tier = static_cast<uint32_t>(info->tier);
    Bytes rows = Encoded(info->tier, info->dim, count, seed);
    m.vector.data.push_back(rows);
    Log(m, [&](const auto& hook) {
      EXPECT_EQ(vectors_.Store(sid, layer, start, count, rows, info->dim, info->tier, hook),
                VectorStore::StoreResult::kOk);
    });
  }
  void Drop(const std::string& sid) {
    Mutation m;
    m.type = RecordType::kVDrop;
    m.sid = sid;
    Log(m, [&](const auto& hook) { vectors_.Drop(sid, hook); });
  }
  void Register(const std::string& ns, uint32_t dim, Tier tier) {
    store::PrefixSpec spec;
    spec.kv_dim = dim;
    spec.tier = tier;
    spec.block_size = 4;
    uint64_t hashes[] = {11, 12};
    spec.block_hashes = Bytes::CopyOf({reinterpret_cast<const char*>(hashes), sizeof hashes});
    spec.prefill_us = 500;
    Mutation m;
    m.type = RecordType::kKvRegister;
    m.sid = ns;
    m.vector.index = vectors_.ReserveIndex();
    m.vector.value_index = vectors_.ReserveIndex();
    m.vector.dim = dim;
    m.vector.tier = static_cast<uint32_t>(tier);
    m.vector.block_size = 4;
    m.vector.prefill_us = 500;
    m.vector.data.push_back(spec.block_hashes);
    Log(m, [&](const auto& hook) {
      vectors_.Register(ns, spec, m.vector.index, m.vector.value_index, 0, hook);
    });
  }

  // Everything a client can observe: shape, index and every layer's bytes, per session.
  std::map<std::string, std::string> Observe() const {
    std::map<std::string, std::string> out;
    vectors_.ForEachSession([&](const std::string& sid, const store::VectorSessionInfo& info,
                                const std::vector<store::LayerRead>& layers) {
      std::string& o = out[sid];
      o = std::to_string(info.index) + "/" + std::to_string(info.dim) + "/" +
          std::string(store::TierName(info.tier));
      for (const auto& l : layers) o += "|" + std::to_string(l.layer) + ":" + Joined(l.rows);
    });
    vectors_.ForEachPrefix([&](const std::string& ns, const store::PrefixSpec& spec) {
      out["prefix " + ns] = std::to_string(spec.kv_dim) + "/" + std::to_string(spec.block_size) +
                            "/" + std::string(spec.block_hashes.view()) + "/" +
                            std::to_string(spec.prefill_us.value_or(0));
    });
    return out;
  }

 private:
  store::StateStore ssm_;
  VectorStore vectors_;
  std::unique_ptr<Durability> durability_;
};

class VectorDurabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/prefixd-vdur-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::unique_ptr<Node> Reopen() {
    auto node = std::make_unique<Node>(dir_);
    EXPECT_EQ(node->Open(), "");
    return node;
  }
  std::string dir_;
};

TEST_F(VectorDurabilityTest, LogAndSnapshotRecoverEveryTierByteForByte) {
  auto node = Reopen();
  const Tier tiers[] = {Tier::kFp32, Tier::kFp16, Tier::kBf16,
                        Tier::kInt8, Tier::kFp8,  Tier::kMlx4g32};
  uint64_t seed = 1;
  for (Tier t : tiers) {
    const std::string sid = "s_" + std::string(store::TierName(t));
    node->Create(sid, 64, t);
    node->Store(sid, 0, 0, 5000, seed++);  // more than one chunk
    node->Store(sid, 0, 100, 50, seed++);  // overwrite: copy-on-write
    node->Store(sid, 2, 9000, 3, seed++);  // a gap
  }
  node->Register("ns", 32, Tier::kFp16);
  node->Store("ns_pk", 0, 0, 10, seed++);
  const auto before = node->Observe();
  node.reset();
  node = Reopen();
  EXPECT_TRUE(node->Observe() == before) << "after replaying the log";

  ASSERT_EQ(node->durability().Save(), "");
  node->Store("s_int8", 0, 4990, 20, seed++);  // after the snapshot
  node->Drop("s_fp8");
  node->Create("s_fp8", 32, Tier::kInt8);  // the same sid, another shape
  node->Store("s_fp8", 1, 0, 1, seed++);
  node->Drop("ns_pv");  // a half of the prefix
  const auto after = node->Observe();
  EXPECT_EQ(after.count("ns_pv"), 0u);
  node.reset();
  node = Reopen();
  EXPECT_TRUE(node->Observe() == after) << "after a snapshot and the log after it";

  // A second snapshot with the half dropped: it must stay dropped, the registration kept.
  ASSERT_EQ(node->durability().Save(), "");
  node.reset();
  node = Reopen();
  EXPECT_TRUE(node->Observe() == after) << "from a snapshot alone";
  EXPECT_FALSE(node->vectors().Describe("ns_pv").has_value());
  EXPECT_TRUE(node->vectors().Prefix("ns").has_value());
  // New indices never collide with recovered ones.
  uint64_t highest = 0;
  node->vectors().ForEachSession(
      [&](const std::string&, const store::VectorSessionInfo& info,
          const std::vector<store::LayerRead>&) { highest = std::max(highest, info.index); });
  EXPECT_GT(node->vectors().ReserveIndex(), highest);
}

TEST_F(VectorDurabilityTest, RowsOfASessionDroppedLaterAreSkippedOnReplay) {
  // Replay over a state that already shows later changes (as a snapshot does): rows logged for
  // the session's old shape meet the new session and must be skipped, not fail the start or
  // corrupt it.
  auto node = Reopen();
  node->Create("s", 64, Tier::kFp16);
  node->Store("s", 0, 0, 4, 1);
  node->Drop("s");
  node->Create("s", 32, Tier::kInt8);
  node->Store("s", 0, 0, 2, 2);
  const auto want = node->Observe();
  node.reset();
  node = std::make_unique<Node>(dir_);
  ASSERT_EQ(node->vectors().Create("s", 32, Tier::kInt8, 1, 0, nullptr),
            VectorStore::CreateResult::kCreated);
  ASSERT_EQ(node->Open(), "");
  EXPECT_TRUE(node->Observe() == want);
}

}  // namespace
}  // namespace prefixd::persist
