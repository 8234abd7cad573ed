// The prefix index through the C++ client library against the real server: the hash chain,
// blocks, checkpoints with tails, a speculative window, the match and its lease, drops with their
// cascade, and a restart that keeps the index.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "integration/server_fixture.h"
#include "prefixd/client.h"

namespace prefixd::it {
namespace {

constexpr uint32_t kBs = 16;
constexpr uint32_t kDim = 8;
constexpr uint32_t kAttn = 2;
constexpr uint32_t kRec = 3;

// K value of (layer, position, token); V is its negation.
float KValue(uint32_t layer, size_t p, uint32_t token) {
  return static_cast<float>(token) + 0.001f * static_cast<float>(p) + 1000.0f * layer;
}

// One layer's K rows then V rows for positions [start, end).
std::vector<float> Rows(const std::vector<uint32_t>& t, uint32_t layer, size_t start, size_t end) {
  const size_t n = end - start;
  std::vector<float> out(2 * n * kDim);
  for (size_t p = start; p < end; ++p) {
    for (uint32_t d = 0; d < kDim; ++d) {
      out[(p - start) * kDim + d] = KValue(layer, p, t[p]) + d;
      out[(n + p - start) * kDim + d] = -(KValue(layer, p, t[p]) + d);
    }
  }
  return out;
}

std::vector<uint8_t> State(const std::vector<uint32_t>& t, size_t length, uint32_t layer) {
  std::vector<uint8_t> out(64 + layer);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(length * 31 + i + t[0]);
  return out;
}

std::span<const uint8_t> AsBytes(const std::vector<float>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)};
}

class PrefixIndexClientTest : public ServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartServer());
    Connect();
    ASSERT_TRUE(client_->PrefixNamespaceCreate(ns_, {kBs, kAttn, kDim, kRec, "fp32", 0}).ok());
  }
  void Connect() {
    auto c = Client::Connect("127.0.0.1", server_.port());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_.emplace(std::move(c).value());
  }

  // Stores blocks [from, to) of `t`.
  void StoreBlocks(const std::vector<uint32_t>& t, size_t from, size_t to) {
    auto chain = PrefixBlockHashes(t, kBs);
    std::vector<std::vector<float>> rows;
    std::vector<LayerBlob> layers;
    for (uint32_t l = 0; l < kAttn; ++l) rows.push_back(Rows(t, l, from * kBs, to * kBs));
    for (uint32_t l = 0; l < kAttn; ++l) layers.push_back({l, AsBytes(rows[l])});
    auto stored = client_->PrefixStoreBlocks(ns_, from == 0 ? kPrefixRoot : chain[from - 1],
                                             std::span(chain).subspan(from, to - from), layers);
    ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  }

  void StoreCheckpoint(const std::vector<uint32_t>& t, size_t length) {
    auto chain = PrefixBlockHashes(t, kBs);
    const size_t depth = length / kBs, base = depth * kBs;
    std::vector<std::vector<uint8_t>> blobs;
    std::vector<LayerBlob> states;
    for (uint32_t l = 0; l < kRec; ++l) blobs.push_back(State(t, length, l));
    for (uint32_t l = 0; l < kRec; ++l) states.push_back({l, blobs[l]});
    std::vector<std::vector<float>> tails;
    std::vector<LayerBlob> tail;
    if (length > base) {
      for (uint32_t l = 0; l < kAttn; ++l) tails.push_back(Rows(t, l, base, length));
      for (uint32_t l = 0; l < kAttn; ++l) tail.push_back({l, AsBytes(tails[l])});
    }
    Status st = client_->PrefixStoreCheckpoint(ns_, depth == 0 ? kPrefixRoot : chain[depth - 1],
                                               length, PrefixPositionHash(t, length, kBs, chain),
                                               {states, tail, RowFormat::kF32});
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  // Matches `t` with the candidate lengths; checks the leased bytes; returns L.
  uint64_t MatchAndCheck(const std::vector<uint32_t>& t, const std::vector<size_t>& at) {
    auto chain = PrefixBlockHashes(t, kBs);
    std::vector<PrefixCandidate> candidates;
    for (size_t l : at) candidates.push_back({l, PrefixPositionHash(t, l, kBs, chain)});
    auto m = client_->PrefixMatch(ns_, chain, candidates);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok() || m->length == 0) return 0;
    EXPECT_EQ(m->position, PrefixPositionHash(t, m->length, kBs, chain));
    EXPECT_EQ(m->kv_bytes, m->length * kDim * 4 * 2 * kAttn);
    for (uint32_t l = 0; l < kAttn; ++l) {
      std::vector<float> got(2 * m->length * kDim);
      auto n = client_->PrefixLeaseFetchAttention(ns_, m->lease, l, 0, m->length, got);
      EXPECT_TRUE(n.ok()) << n.status().ToString();
      EXPECT_EQ(got, Rows(t, l, 0, m->length)) << "layer " << l;
    }
    auto states = client_->PrefixLeaseFetchState(ns_, m->lease, {}, /*release=*/true);
    EXPECT_TRUE(states.ok()) << states.status().ToString();
    if (states.ok()) {
      EXPECT_EQ(states->size(), kRec);
      for (uint32_t l = 0; l < kRec && l < states->size(); ++l) {
        EXPECT_EQ((*states)[l], State(t, m->length, l));
      }
    }
    EXPECT_FALSE(client_->PrefixRelease(ns_, m->lease).value());  // already released
    return m->length;
  }

  std::string ns_ = "{qwen-test}";
  std::optional<Client> client_;
};

std::vector<uint32_t> Tokens(size_t n, uint32_t seed) {
  std::vector<uint32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = seed * 100000 + static_cast<uint32_t>(i) * 7 + 1;
  return t;
}

TEST_F(PrefixIndexClientTest, MultiturnMatchesTheLastTurnAndSurvivesRestart) {
  std::vector<uint32_t> convo = Tokens(50, 1);
  StoreBlocks(convo, 0, 3);
  StoreCheckpoint(convo, 50);
  std::vector<size_t> ends = {50};
  for (uint32_t turn = 0; turn < 3; ++turn) {
    auto more = Tokens(23, 10 + turn);
    convo.insert(convo.end(), more.begin(), more.end());
    EXPECT_EQ(MatchAndCheck(convo, ends), ends.back());
    StoreBlocks(convo, ends.back() / kBs, convo.size() / kBs);
    StoreCheckpoint(convo, convo.size());
    ends.push_back(convo.size());
  }
  // Unlisted, only block-boundary checkpoints are found: 96 is one (turn 2 ended on a block).
  EXPECT_EQ(MatchAndCheck(convo, {}), 96u);
  // K/V without state is never an answer: a prompt that shares only blocks gets nothing.
  std::vector<uint32_t> edited = convo;
  edited[40] += 1;
  EXPECT_EQ(MatchAndCheck(edited, ends), 0u);
  ASSERT_TRUE(server_.Stop());
  ASSERT_TRUE(server_.Restart());
  Connect();
  EXPECT_EQ(MatchAndCheck(convo, ends), ends.back());
  auto info = client_->PrefixNamespaceInfo(ns_);
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_NE((*info)->find("checkpoints:4"), std::string::npos) << **info;
}

TEST_F(PrefixIndexClientTest, SpeculativeWindowDropRollbackAndBlockCascade) {
  std::vector<uint32_t> t = Tokens(40, 2);
  StoreBlocks(t, 0, 2);  // [0, 32)
  auto chain = PrefixBlockHashes(t, kBs);
  // A window of 5 positions 33..37, anchored on block 2.
  std::vector<PrefixHash> positions;
  std::vector<std::vector<uint8_t>> blobs(kRec);
  for (size_t l = 33; l <= 37; ++l) {
    positions.push_back(PrefixPositionHash(t, l, kBs, chain));
    for (uint32_t r = 0; r < kRec; ++r) {
      auto s = State(t, l, r);
      blobs[r].insert(blobs[r].end(), s.begin(), s.end());
    }
  }
  std::vector<LayerBlob> states;
  for (uint32_t r = 0; r < kRec; ++r) states.push_back({r, blobs[r]});
  std::vector<std::vector<float>> tails;
  std::vector<LayerBlob> tail;
  for (uint32_t l = 0; l < kAttn; ++l) tails.push_back(Rows(t, l, 32, 37));
  for (uint32_t l = 0; l < kAttn; ++l) tail.push_back({l, AsBytes(tails[l])});
  auto k = client_->PrefixStoreCheckpoints(ns_, chain[1], 33, positions, {states, tail});
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ(*k, 5);
  for (size_t l = 33; l <= 37; ++l) EXPECT_EQ(MatchAndCheck(t, {l}), l);
  // Accept 34: drop 35..37, roll back by fetching 34.
  auto dropped = client_->PrefixDropCheckpoints(ns_, std::span(positions).subspan(2));
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 3);
  auto fetched = client_->PrefixFetchCheckpoint(ns_, positions[1]);
  ASSERT_TRUE(fetched.ok() && fetched->has_value());
  EXPECT_EQ((**fetched)[2], State(t, 34, 2));
  EXPECT_FALSE(client_->PrefixFetchCheckpoint(ns_, positions[4])->has_value());
  EXPECT_EQ(MatchAndCheck(t, {33, 34, 35, 36, 37}), 34u);
  // The raw block fetch (the kv-only control's path) returns K/V with no promise of state.
  std::vector<float> rows(2 * 2 * kBs * kDim);
  auto n = client_->PrefixFetchBlocks(ns_, std::span(chain).first(2), 1, rows);
  ASSERT_TRUE(n.ok() && n->has_value());
  EXPECT_EQ(rows, Rows(t, 1, 0, 32));
  // Dropping block 2 takes the window's surviving checkpoints.
  EXPECT_EQ(*client_->PrefixDropBlocks(ns_, std::span(chain).subspan(1, 1)), 1);
  EXPECT_EQ(MatchAndCheck(t, {33, 34}), 0u);
  EXPECT_FALSE(client_->PrefixFetchCheckpoint(ns_, positions[0])->has_value());
  // Errors are server errors; the connection stays usable.
  std::vector<std::vector<float>> one_row;
  std::vector<LayerBlob> one_tail;
  for (uint32_t l = 0; l < kAttn; ++l) one_row.push_back(Rows(t, l, 32, 33));
  for (uint32_t l = 0; l < kAttn; ++l) one_tail.push_back({l, AsBytes(one_row[l])});
  std::vector<LayerBlob> one_state;
  for (uint32_t r = 0; r < kRec; ++r) {
    one_state.push_back({r, std::span<const uint8_t>(blobs[r]).first(64 + r)});
  }
  auto bad = client_->PrefixStoreCheckpoint(ns_, chain[1], 33, positions[0], {one_state, one_tail});
  EXPECT_EQ(bad.code(), StatusCode::kServerError);
  EXPECT_NE(bad.message().find("anchor block is not stored"), std::string::npos) << bad.message();
  EXPECT_TRUE(client_->Ping().ok());
}

}  // namespace
}  // namespace prefixd::it
