// Split-K ("flash-decoding") causal attention: how the CUDA backend cuts the keys of one
// attention call across blocks (PlanSplits), and how the per-split partial softmax results of a
// query row merge into its output (MergeSoftmaxPartials). Pure inline functions with no state,
// compiled for the host and, under nvcc, for the device: the CUDA kernels call exactly this code
// and the CPU unit tests check it against a direct softmax, so the GPU's arithmetic is reviewed
// without a GPU. Any thread.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define PREFIXD_HYBRID_HOST_DEVICE __host__ __device__
#else
#define PREFIXD_HYBRID_HOST_DEVICE
#endif

namespace prefixd::hybrid::attn {

// Query rows per block: (token, query head of the KV group) pairs, 4 warps × 4 rows.
inline constexpr int kWarps = 4;
inline constexpr int kRowsPerWarp = 4;
inline constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;
// Keys per shared-memory tile: one key per lane while scoring.
inline constexpr int kKeyTile = 32;
// A split covers at least this many keys, so short contexts are not cut into slivers.
inline constexpr int64_t kMinSplitKeys = 256;
// Split until about this many blocks run; enough to cover every SM of an H200 several times.
inline constexpr int64_t kTargetBlocks = 1024;

// The cut of one attention call: n query tokens at positions first..first+n−1 of a cache of
// first + n keys, kv_heads KV heads of `group` query heads each. A block is (KV head, query tile,
// key split), numbered ((g · tiles) + tile) · splits + split. It depends on the shapes only, so
// two processes running the same call get the same cut and the same bits.
struct SplitPlan {
  int64_t tokens_per_tile = 0;  // query tokens per block (rows = tokens · group)
  int64_t tiles = 0;            // query tiles per KV head
  int64_t splits = 0;           // key splits per tile
  int64_t split_keys = 0;       // keys per split, a multiple of kKeyTile
  int64_t kv_heads = 0;

  int64_t blocks() const { return kv_heads * tiles * splits; }
  // Keys [begin, end) of `split` for `tile`: the split's range, cut at the tile's last token.
  // Empty (begin >= end) when every key of the split is in the future of the tile's rows.
  int64_t key_begin(int64_t split) const { return split * split_keys; }
  int64_t key_end(int64_t tile, int64_t split, int64_t n, int64_t first) const {
    const int64_t tile_end = (tile + 1) * tokens_per_tile < n ? (tile + 1) * tokens_per_tile : n;
    const int64_t split_end = (split + 1) * split_keys;
    return split_end < first + tile_end ? split_end : first + tile_end;
  }
};

// `group` must be in [1, kRowsPerBlock] and n >= 1.
inline SplitPlan PlanSplits(int64_t n, int64_t first, int64_t kv_heads, int64_t group) {
  SplitPlan p;
  p.kv_heads = kv_heads;
  p.tokens_per_tile = kRowsPerBlock / group;
  p.tiles = (n + p.tokens_per_tile - 1) / p.tokens_per_tile;
  const int64_t keys = first + n;
  const int64_t base = kv_heads * p.tiles;
  const int64_t most = (keys + kMinSplitKeys - 1) / kMinSplitKeys;
  int64_t splits = (kTargetBlocks + base - 1) / base;
  splits = splits < most ? splits : most;
  splits = splits < 1 ? 1 : splits;
  const int64_t per_split = (keys + splits - 1) / splits;
  p.split_keys = (per_split + kKeyTile - 1) / kKeyTile * kKeyTile;
  p.splits = (keys + p.split_keys - 1) / p.split_keys;  // rounding may leave fewer splits
  return p;
}

// Block `item` of a plan is KV head g, query tile `tile`, key split `split`, numbered
// ((g · tiles) + tile) · splits + split; BlockIndex is the inverse.
struct BlockCoords {
  int64_t g = 0;
  int64_t tile = 0;
  int64_t split = 0;
};
PREFIXD_HYBRID_HOST_DEVICE inline BlockCoords DecodeBlock(int64_t item, int64_t tiles,
                                                          int64_t splits) {
  return {item / (splits * tiles), (item / splits) % tiles, item % splits};
}
PREFIXD_HYBRID_HOST_DEVICE inline int64_t BlockIndex(int64_t g, int64_t tile, int64_t split,
                                                     int64_t tiles, int64_t splits) {
  return (g * tiles + tile) * splits + split;
}

// Row r of a block of KV head g and query tile `tile`: the query token and query head it is.
// Rows run over a token's `group` heads first, so one block covers whole tokens.
struct RowCoords {
  int64_t token = 0;
  int64_t head = 0;
};
PREFIXD_HYBRID_HOST_DEVICE inline RowCoords RowOf(int64_t g, int64_t tile, int64_t r,
                                                  int64_t tokens_per_tile, int64_t group) {
  return {tile * tokens_per_tile + r / group, g * group + r % group};
}

// Where a block's per-row statistics go: row r of block `item` at item · kRowsPerBlock + r (and
// its accumulator at that index · D).
PREFIXD_HYBRID_HOST_DEVICE inline int64_t PartialRow(int64_t item, int64_t r) {
  return item * kRowsPerBlock + r;
}

// Merges one query row's partial results over `splits` key splits, in increasing split order.
// Split s holds max_s (the largest scaled score it saw, −∞ when it saw no key), sum_s =
// Σ e^{score − max_s} and acc_s = Σ e^{score − max_s} · v over its keys. The row's output is
//   out[i] = Σ_s e^{max_s − M} acc_s[i] / Σ_s e^{max_s − M} sum_s,   M = max_s max_s,
// skipping splits that saw no key; this is exactly softmax(scores) · V. Split s's statistics are
// at max[s · stat_stride], sum[s · stat_stride] and acc + s · acc_stride. Elements
// i = first_dim, first_dim + dim_step, ... < d are written, so a warp's lanes can share a row.
template <typename ExpFn>
PREFIXD_HYBRID_HOST_DEVICE inline void MergeSoftmaxPartials(
    const float* max, const float* sum, int64_t stat_stride, const float* acc, int64_t acc_stride,
    int64_t splits, int64_t d, int64_t first_dim, int64_t dim_step, float* out, ExpFn exp_fn) {
  const float neg_inf = -__builtin_huge_valf();
  float total_max = neg_inf;
  for (int64_t s = 0; s < splits; ++s) {
    const float m = max[s * stat_stride];
    total_max = m > total_max ? m : total_max;
  }
  float total_sum = 0.0f;
  for (int64_t s = 0; s < splits; ++s) {
    const float m = max[s * stat_stride];
    if (m != neg_inf) total_sum += sum[s * stat_stride] * exp_fn(m - total_max);
  }
  const float inv = 1.0f / total_sum;
  for (int64_t i = first_dim; i < d; i += dim_step) {
    float value = 0.0f;
    for (int64_t s = 0; s < splits; ++s) {
      const float m = max[s * stat_stride];
      if (m != neg_inf) value += acc[s * acc_stride + i] * exp_fn(m - total_max);
    }
    out[i] = value * inv;
  }
}

}  // namespace prefixd::hybrid::attn
