// The GPU path's arithmetic and its checks, on the CPU (no GPU is needed):
// - attention_split.h, which the CUDA attention kernels call: the split plan covers every key
//   exactly once, and the per-split online softmax merged by MergeSoftmaxPartials equals a
//   direct double-precision softmax·V (the kernels' tiling emulated step for step);
// - compare.h, the verdict of `prefixd-hybrid compare`: NaN, Inf, an error confined to a
//   small-magnitude head and a token mismatch each fail it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "attention_split.h"
#include "compare.h"
#include "random_vectors.h"

namespace prefixd::hybrid {
namespace {

float HostExp(float x) { return std::exp(x); }

TEST(HybridSplitPlan, CoversEveryKeyOnceInTilesOf32) {
  for (int64_t kv_heads : {1, 2, 4}) {
    for (int64_t group : {1, 4, 6, 16}) {
      for (auto [n, first] : {std::pair<int64_t, int64_t>{1, 0},
                              {1, 32767},
                              {16, 5000},
                              {300, 0},
                              {512, 31744},
                              {7, 40}}) {
        const attn::SplitPlan p = attn::PlanSplits(n, first, kv_heads, group);
        SCOPED_TRACE(testing::Message() << "kv " << kv_heads << " group " << group << " n " << n
                                        << " first " << first);
        EXPECT_EQ(p.tokens_per_tile * group <= attn::kRowsPerBlock, true);
        EXPECT_EQ(p.tiles * p.tokens_per_tile >= n, true);
        EXPECT_EQ((p.tiles - 1) * p.tokens_per_tile < n, true);
        EXPECT_EQ(p.split_keys % attn::kKeyTile, 0);
        // Splits tile [0, first + n) without gaps or overlap, none of them empty.
        EXPECT_EQ(p.key_begin(0), 0);
        EXPECT_LT(p.key_begin(p.splits - 1), first + n);
        EXPECT_GE(p.key_begin(p.splits - 1) + p.split_keys, first + n);
        // The last tile's splits reach exactly its last token's position.
        EXPECT_EQ(p.key_end(p.tiles - 1, p.splits - 1, n, first), first + n);
        // Enough blocks to fill a GPU when the context allows, and a bounded partial buffer.
        const int64_t most_splits = (first + n + attn::kMinSplitKeys - 1) / attn::kMinSplitKeys;
        EXPECT_TRUE(p.blocks() >= attn::kTargetBlocks || p.splits >= most_splits - 1);
        EXPECT_LE(p.splits * kv_heads * p.tiles,
                  std::max(kv_heads * p.tiles, 2 * attn::kTargetBlocks));
      }
    }
  }
  // A decode step over 32K keys spreads over many blocks (the reason for splitting).
  EXPECT_GE(attn::PlanSplits(1, 32767, 4, 4).blocks(), 4 * 64);
}

TEST(HybridSplitPlan, MergeOfOneSplitIsAccOverSumAndSkipsEmptySplits) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> max = {-inf, 2.0f, -inf};
  const std::vector<float> sum = {0.0f, 4.0f, 0.0f};
  std::vector<float> acc = {9, 9, 2, 8, 9, 9};  // split 1 holds {2, 8}; the others are junk
  std::vector<float> out(2);
  attn::MergeSoftmaxPartials(max.data(), sum.data(), 1, acc.data(), 2, 3, 2, 0, 1, out.data(),
                             HostExp);
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[1], 2.0f);
  // Lanes writing strided dims write only theirs.
  std::vector<float> strided = {-1, -1};
  attn::MergeSoftmaxPartials(max.data(), sum.data(), 1, acc.data(), 2, 3, 2, 1, 2, strided.data(),
                             HostExp);
  EXPECT_EQ(strided[0], -1.0f);
  EXPECT_EQ(strided[1], 2.0f);
}

// The CUDA kernels' arithmetic and addressing, transcribed. The partial kernel: for every block
// (DecodeBlock), every row (RowOf), keys in tiles of 32 with a per-tile max, a correction of the
// running sums and P·V, written at PartialRow. The merge kernel: per (KV head, tile, row), the
// splits read from PartialRow(BlockIndex(g, tile, 0), r) kRowsPerBlock apart and merged by
// MergeSoftmaxPartials. Checked against softmax(q·kᵀ/√D)·v in double, and every output element
// must be written exactly once. q is [n, heads, d], k and v [keys, kv_heads, d].
void CheckSplitAttention(int64_t n, int64_t first, int64_t kv_heads, int64_t group, int64_t d) {
  const int64_t keys = first + n;
  const int64_t heads = kv_heads * group;
  const auto q = Random(static_cast<size_t>(n * heads * d), 11);
  const auto k = Random(static_cast<size_t>(keys * kv_heads * d), 12);
  const auto v = Random(static_cast<size_t>(keys * kv_heads * d), 13);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const attn::SplitPlan p = attn::PlanSplits(n, first, kv_heads, group);
  const int64_t rows_per_block = attn::kRowsPerBlock;
  const size_t slots = static_cast<size_t>(p.blocks() * rows_per_block);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  std::vector<float> pmax(slots, std::nanf("")), psum(slots, std::nanf(""));
  std::vector<float> pacc(slots * static_cast<size_t>(d), std::nanf(""));
  auto key_at = [&](const std::vector<float>& kv, int64_t key, int64_t g, int64_t i) {
    return kv[static_cast<size_t>((key * kv_heads + g) * d + i)];
  };
  for (int64_t item = 0; item < p.blocks(); ++item) {
    const attn::BlockCoords b = attn::DecodeBlock(item, p.tiles, p.splits);
    ASSERT_EQ(attn::BlockIndex(b.g, b.tile, b.split, p.tiles, p.splits), item);
    const int64_t t0 = b.tile * p.tokens_per_tile;
    const int64_t rows = (std::min(n, t0 + p.tokens_per_tile) - t0) * group;
    const int64_t begin = p.key_begin(b.split);
    const int64_t end = p.key_end(b.tile, b.split, n, first);
    for (int64_t r = 0; r < rows; ++r) {
      const attn::RowCoords row = attn::RowOf(b.g, b.tile, r, p.tokens_per_tile, group);
      const float* qr = q.data() + (row.token * heads + row.head) * d;
      const int64_t last = first + row.token;
      float run_max = neg_inf;
      float run_sum = 0;
      std::vector<float> acc(static_cast<size_t>(d), 0.0f);
      for (int64_t k0 = begin; k0 < end; k0 += attn::kKeyTile) {
        if (last < k0) continue;
        const int64_t kn = std::min<int64_t>(attn::kKeyTile, end - k0);
        std::vector<float> s(attn::kKeyTile, neg_inf);
        float tile_max = neg_inf;
        for (int64_t j = 0; j < kn && k0 + j <= last; ++j) {
          float dot = 0;
          for (int64_t i = 0; i < d; ++i) dot += (qr[i] * scale) * key_at(k, k0 + j, b.g, i);
          s[j] = dot;
          tile_max = std::max(tile_max, dot);
        }
        const float new_max = std::max(run_max, tile_max);
        const float correction = run_max == neg_inf ? 0.0f : std::exp(run_max - new_max);
        float tile_sum = 0;
        for (float& x : s) x = x == neg_inf ? 0.0f : std::exp(x - new_max), tile_sum += x;
        run_sum = run_sum * correction + tile_sum;
        run_max = new_max;
        for (int64_t i = 0; i < d; ++i) {
          acc[i] *= correction;
          for (int64_t j = 0; j < kn; ++j) acc[i] += s[j] * key_at(v, k0 + j, b.g, i);
        }
      }
      const size_t at = static_cast<size_t>(attn::PartialRow(item, r));
      pmax[at] = run_max;
      psum[at] = run_sum;
      std::copy(acc.begin(), acc.end(), pacc.begin() + static_cast<ptrdiff_t>(at * d));
    }
  }
  std::vector<float> out(static_cast<size_t>(n * heads * d), std::nanf(""));
  std::vector<int> writes(static_cast<size_t>(n * heads), 0);
  for (int64_t g = 0; g < kv_heads; ++g) {
    for (int64_t tile = 0; tile < p.tiles; ++tile) {
      const int64_t t0 = tile * p.tokens_per_tile;
      const int64_t rows = (std::min(n, t0 + p.tokens_per_tile) - t0) * group;
      for (int64_t r = 0; r < rows; ++r) {
        const attn::RowCoords row = attn::RowOf(g, tile, r, p.tokens_per_tile, group);
        const size_t stat = static_cast<size_t>(
            attn::PartialRow(attn::BlockIndex(g, tile, 0, p.tiles, p.splits), r));
        attn::MergeSoftmaxPartials(pmax.data() + stat, psum.data() + stat, rows_per_block,
                                   pacc.data() + stat * d, rows_per_block * d, p.splits, d, 0, 1,
                                   out.data() + (row.token * heads + row.head) * d, HostExp);
        ++writes[static_cast<size_t>(row.token * heads + row.head)];
      }
    }
  }
  for (int w : writes) ASSERT_EQ(w, 1) << "every (token, head) is merged exactly once";
  double worst = 0;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* qr = q.data() + (t * heads + h) * d;
      const int64_t g = h / group;
      std::vector<double> sc(static_cast<size_t>(first + t + 1));
      double m = -1e300;
      for (size_t j = 0; j < sc.size(); ++j) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += double(qr[i]) * key_at(k, j, g, i);
        sc[j] = dot / std::sqrt(double(d));
        m = std::max(m, sc[j]);
      }
      double total = 0;
      for (double& x : sc) x = std::exp(x - m), total += x;
      for (int64_t i = 0; i < d; ++i) {
        double want = 0;
        for (size_t j = 0; j < sc.size(); ++j) want += sc[j] * key_at(v, j, g, i);
        want /= total;
        const float got = out[static_cast<size_t>((t * heads + h) * d + i)];
        worst = std::isfinite(got) ? std::max(worst, std::abs(got - want)) : 1e300;
      }
    }
  }
  EXPECT_LT(worst, 2e-5) << "n " << n << " first " << first << " kv_heads " << kv_heads << " group "
                         << group << " splits " << p.splits;
}

TEST(HybridSplitPlan, SplitSoftmaxEqualsDirectSoftmax) {
  CheckSplitAttention(1, 0, 1, 4, 64);       // the first token: one key
  CheckSplitAttention(1, 3000, 2, 4, 64);    // decode over a long context: many splits
  CheckSplitAttention(5, 700, 2, 6, 96);     // a short suffix, a group that does not divide 16
  CheckSplitAttention(40, 0, 2, 1, 32);      // prefill, causal cuts inside tiles
  CheckSplitAttention(3, 1000, 1, 16, 160);  // a full block of one token's 16 heads
  CheckSplitAttention(70, 300, 3, 2, 32);    // several tiles and splits per KV head
}

TEST(HybridCompare, AgreeingTensorsPass) {
  const auto want = Random(1000, 3);
  auto got = want;
  got[17] += 1e-6f;
  const TensorAgreement t = CompareTensor("logits", got, want, 1, 1000);
  EXPECT_TRUE(t.ok(1e-5)) << t.Describe();
  EXPECT_GT(t.worst_relative, 0.0);
  CompareVerdict v;
  v.tolerance = 1e-5;
  v.tensors = {t};
  v.tokens = CompareTokens(std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{1, 2, 3});
  EXPECT_TRUE(v.pass());
}

TEST(HybridCompare, NanAndInfFailLoudly) {
  const auto want = Random(64, 4);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    auto got = want;
    got[5] = bad;
    const TensorAgreement t = CompareTensor("state", got, want, 4, 16);
    EXPECT_EQ(t.nonfinite_got, 1);
    EXPECT_FALSE(t.ok(1e9));  // no tolerance admits a NaN
    EXPECT_TRUE(std::isnan(t.worst_relative));
    EXPECT_NE(t.Describe().find("NaN/Inf"), std::string::npos);
    // In the reference as well.
    EXPECT_FALSE(CompareTensor("state", want, got, 4, 16).ok(1e9));
    CompareVerdict v;
    v.tolerance = 1e-3;
    v.tensors = {t};
    v.tokens = CompareTokens(std::vector<int32_t>{1}, std::vector<int32_t>{1});
    EXPECT_FALSE(v.pass());
    EXPECT_TRUE(std::isnan(v.Worst("state")));
  }
}

TEST(HybridCompare, ErrorInASmallMagnitudeHeadFails) {
  // Head 0 has values ~100, head 1 ~0.01; a 1% error in head 1 is 1e-6 of the tensor's scale.
  std::vector<float> want(2 * 8 * 32);
  for (size_t i = 0; i < want.size(); ++i) want[i] = ((i / 32) % 2 == 0 ? 100.0f : 0.01f);
  auto got = want;
  got[32 + 3] *= 1.01f;  // outer 0, head 1
  EXPECT_TRUE(CompareTensor("k", got, want, 1, static_cast<int64_t>(want.size())).ok(1e-3));
  const TensorAgreement per_head = CompareTensor("k", got, want, 2, 32);
  EXPECT_FALSE(per_head.ok(1e-3)) << per_head.Describe();
  EXPECT_EQ(per_head.worst_group, 1);
  EXPECT_NEAR(per_head.worst_relative, 0.01, 1e-4);
  // An all-zero head is judged by absolute error against the tensor's scale, not 0/0.
  std::vector<float> zero_head(want.size());
  for (size_t i = 0; i < want.size(); ++i) zero_head[i] = (i / 32) % 2 == 0 ? 1.0f : 0.0f;
  EXPECT_TRUE(CompareTensor("v", zero_head, zero_head, 2, 32).ok(0));
  auto off = zero_head;
  off[33] = 1e-3f;
  EXPECT_FALSE(CompareTensor("v", off, zero_head, 2, 32).ok(1e-3));
}

TEST(HybridCompare, SizeMismatchAndEmptyFail) {
  const auto a = Random(10, 5);
  const auto b = Random(11, 5);
  EXPECT_FALSE(CompareTensor("x", a, b, 1, 10).ok(1));
  EXPECT_FALSE(CompareTensor("x", a, a, 3, 1).ok(1));  // 10 is not a multiple of 3
  CompareVerdict v;
  v.tolerance = 1;
  v.tokens = CompareTokens(std::vector<int32_t>{1}, std::vector<int32_t>{1});
  EXPECT_FALSE(v.pass());  // nothing compared
}

TEST(HybridCompare, TokenMismatchFailsAndIsLocated) {
  const TokenAgreement t =
      CompareTokens(std::vector<int32_t>{5, 6, 7, 9}, std::vector<int32_t>{5, 6, 8, 9});
  EXPECT_EQ(t.agree, 3);
  EXPECT_EQ(t.total, 4);
  EXPECT_EQ(t.first_mismatch, 2);
  EXPECT_FALSE(t.ok());
  EXPECT_FALSE(CompareTokens(std::vector<int32_t>{5}, std::vector<int32_t>{5, 6}).ok());
  EXPECT_FALSE(CompareTokens({}, {}).ok());
  const auto want = Random(16, 6);
  CompareVerdict v;
  v.tolerance = 1e-3;
  v.tensors = {CompareTensor("logits", want, want, 1, 16)};
  v.tokens = t;
  const auto failures = v.Failures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].find("3/4"), std::string::npos);
  v.tokens = CompareTokens(std::vector<int32_t>{1}, std::vector<int32_t>{1});
  EXPECT_TRUE(v.pass());
  v.repeat_logits = false;
  EXPECT_FALSE(v.pass());
}

}  // namespace
}  // namespace prefixd::hybrid
