#include "cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "attention_split.h"

namespace prefixd::hybrid {
namespace {

// ---- Errors and memory ----------------------------------------------------------------------

Status CudaFailure(cudaError_t e, const char* what) {
  return Status::Internal(std::string(what) + ": " + cudaGetErrorString(e));
}

#define HY_CUDA(expr)                                           \
  do {                                                          \
    const cudaError_t hy_e_ = (expr);                           \
    if (hy_e_ != cudaSuccess) return CudaFailure(hy_e_, #expr); \
  } while (false)

#define HY_CUBLAS(expr)                                                 \
  do {                                                                  \
    const cublasStatus_t hy_s_ = (expr);                                \
    if (hy_s_ != CUBLAS_STATUS_SUCCESS) {                               \
      return Status::Internal(std::string(#expr) + ": cuBLAS status " + \
                              std::to_string(static_cast<int>(hy_s_))); \
    }                                                                   \
  } while (false)

// After every kernel launch: a bad configuration (too many threads, too much shared memory)
// fails here, at the launch that caused it, rather than at the next synchronisation.
#define HY_LAUNCHED() HY_CUDA(cudaGetLastError())

// Owned device memory of `count` elements of T.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  ~DeviceArray() { static_cast<void>(Release()); }  // a destructor has no one to tell
  DeviceArray(DeviceArray&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      static_cast<void>(Release());  // noexcept; Ensure() is where frees are checked
      ptr_ = std::exchange(o.ptr_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }

  // Makes room for at least `count` elements; the contents are lost when it grows.
  Status Ensure(size_t count) {
    if (count <= count_) return Status::Ok();
    HY_CUDA(Release());
    HY_CUDA(cudaMalloc(&ptr_, std::max<size_t>(count, 1) * sizeof(T)));
    count_ = count;
    return Status::Ok();
  }

  T* get() const { return ptr_; }
  size_t count() const { return count_; }

 private:
  cudaError_t Release() {
    const cudaError_t e = ptr_ != nullptr ? cudaFree(ptr_) : cudaSuccess;
    ptr_ = nullptr;
    count_ = 0;
    return e;
  }
  T* ptr_ = nullptr;
  size_t count_ = 0;
};
using DeviceFloats = DeviceArray<float>;

// Queues the copy of `host` into `dev` on `stream`; the caller synchronises the stream before the
// host buffer may change or the device copy is read.
Status Upload(const FloatBuffer& host, DeviceFloats* dev, cudaStream_t stream) {
  PREFIXD_RETURN_IF_ERROR(dev->Ensure(host.size()));
  if (!host.empty()) {
    HY_CUDA(cudaMemcpyAsync(dev->get(), host.data(), host.bytes(), cudaMemcpyHostToDevice, stream));
  }
  return Status::Ok();
}

// ---- Kernels --------------------------------------------------------------------------------

constexpr int kWarp = 32;
constexpr int kBlock = 256;

// Butterfly sum over a warp. Every lane ends with the same bits: at each level a lane adds its
// partner's value, and a + b == b + a exactly.
__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// Sum over the block (blockDim.x a multiple of 32); every thread gets the same result.
__device__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  v = WarpSum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = lane < static_cast<int>(blockDim.x / kWarp) ? scratch[lane] : 0.0f;
  total = WarpSum(total);
  __syncthreads();
  return total;
}

__device__ __forceinline__ float DevSilu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float DevSigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void EmbedKernel(const int32_t* tokens, const float* embed, int hidden, float* x) {
  const float* row = embed + static_cast<size_t>(tokens[blockIdx.x]) * hidden;
  float* dst = x + static_cast<size_t>(blockIdx.x) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = row[i];
}

// Zero-centred RMSNorm of one row per block: y = x · (mean(x²) + eps)^-½ · (1 + w).
__global__ void RmsNormKernel(const float* x, const float* w, int dim, float eps, float* y) {
  __shared__ float scratch[kWarp];
  const float* xr = x + static_cast<size_t>(blockIdx.x) * dim;
  float* yr = y + static_cast<size_t>(blockIdx.x) * dim;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
  ss = BlockSum(ss, scratch);
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = xr[i] * scale * (1.0f + w[i]);
}

__global__ void AddKernel(float* x, const float* y, size_t count) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] += y[i];
}

__global__ void SiluMulKernel(float* g, const float* u, size_t count) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) g[i] = DevSilu(g[i]) * u[i];
}

// attn[t, h, i] *= sigmoid(gate), the gate being the second half of head h's slice of qg.
__global__ void OutputGateKernel(float* attn, const float* qg, int heads, int d, int q_proj,
                                 size_t count) {
  const size_t idx = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= count) return;
  const size_t hd = static_cast<size_t>(heads) * d;
  const size_t t = idx / hd;
  const int h = static_cast<int>((idx % hd) / d);
  const int i = static_cast<int>(idx % d);
  attn[idx] *= DevSigmoid(qg[t * q_proj + static_cast<size_t>(h) * 2 * d + d + i]);
}

// Causal depthwise conv + SiLU, one thread per channel walking the tokens in order; `state`
// ([K−1, channels], oldest first) supplies the history and is advanced. K is a template
// parameter so the weights and the sliding window live in registers (fully unrolled loops over
// fixed-size arrays), never in local memory.
constexpr int kMaxConvKernel = 8;
template <int K>
__global__ void CausalConvKernel(const float* in, int n, int channels, const float* weight,
                                 float* state, float* out) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  float w[K];
  float window[K];  // window[j] = x[t − (K−1) + j]
#pragma unroll
  for (int j = 0; j < K; ++j) w[j] = weight[static_cast<size_t>(c) * K + j];
#pragma unroll
  for (int j = 0; j + 1 < K; ++j) window[j] = state[static_cast<size_t>(j) * channels + c];
  for (int t = 0; t < n; ++t) {
    window[K - 1] = in[static_cast<size_t>(t) * channels + c];
    float acc = w[0] * window[0];
#pragma unroll
    for (int j = 1; j < K; ++j) acc += w[j] * window[j];
    out[static_cast<size_t>(t) * channels + c] = DevSilu(acc);
#pragma unroll
    for (int j = 0; j + 1 < K; ++j) window[j] = window[j + 1];
  }
#pragma unroll
  for (int j = 0; j + 1 < K; ++j) state[static_cast<size_t>(j) * channels + c] = window[j];
}

// Per token: L2-normalise the q and k heads of the conv output (q also scaled by 1/√Dk), and turn
// the a / b projections into the decay α = exp(−exp(A_log)·softplus(a + dt_bias)) and β.
__global__ void GdnPrepKernel(float* conv_out, int conv_dim, int key_dim, int hk, int dk,
                              float q_scale, float* a_proj, float* b_proj, const float* a_log,
                              const float* dt_bias, int hv) {
  const int t = blockIdx.x;
  const int lane = threadIdx.x % kWarp;
  const int warps = blockDim.x / kWarp;
  float* row = conv_out + static_cast<size_t>(t) * conv_dim;
  for (int h = threadIdx.x / kWarp; h < 2 * hk; h += warps) {
    float* v = row + (h < hk ? h * dk : key_dim + (h - hk) * dk);
    float ss = 0.0f;
    for (int i = lane; i < dk; i += kWarp) ss += v[i] * v[i];
    ss = WarpSum(ss);
    const float scale = (1.0f / sqrtf(ss + 1e-6f)) * (h < hk ? q_scale : 1.0f);
    for (int i = lane; i < dk; i += kWarp) v[i] *= scale;
  }
  for (int h = threadIdx.x; h < hv; h += blockDim.x) {
    const size_t at = static_cast<size_t>(t) * hv + h;
    const float a = a_proj[at] + dt_bias[h];
    const float softplus = a > 20.0f ? a : log1pf(expf(a));
    a_proj[at] = expf(-expf(a_log[h]) * softplus);
    b_proj[at] = DevSigmoid(b_proj[at]);
  }
}

// The Gated DeltaNet recurrence: one warp per row i of one value head's state M = [Dv, Dk]
// (value-major, as on the CPU), walking the tokens in order. A lane keeps E elements of the row
// in registers (element j = lane + 32·e); dot products are per-lane sums in e order followed by
// a butterfly, the same every run.
template <int E>
__global__ void GdnRecurrenceKernel(const float* conv_out, int conv_dim, int key_dim, int dk,
                                    int dv, int hv, int ratio, const float* alpha,
                                    const float* beta, int n, float* state, float* core) {
  const int row = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  if (row >= hv * dv) return;  // whole warps only
  const int lane = threadIdx.x % kWarp;
  const int h = row / dv;
  const int i = row % dv;
  const int kh = h / ratio;
  float* srow = state + static_cast<size_t>(row) * dk;
  float m[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int j = lane + kWarp * e;
    m[e] = j < dk ? srow[j] : 0.0f;
  }
  for (int t = 0; t < n; ++t) {
    const float* base = conv_out + static_cast<size_t>(t) * conv_dim;
    const float* q = base + kh * dk;
    const float* k = base + key_dim + kh * dk;
    const float v = base[2 * key_dim + h * dv + i];
    const float a = alpha[static_cast<size_t>(t) * hv + h];
    const float b = beta[static_cast<size_t>(t) * hv + h];
    float kk[E];
    float qq[E];
    float partial = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int j = lane + kWarp * e;
      kk[e] = j < dk ? k[j] : 0.0f;
      qq[e] = j < dk ? q[j] : 0.0f;
      m[e] *= a;
      partial += m[e] * kk[e];
    }
    const float delta = b * (v - WarpSum(partial));
    float out = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      m[e] += delta * kk[e];
      out += m[e] * qq[e];
    }
    out = WarpSum(out);
    if (lane == 0) core[static_cast<size_t>(t) * hv * dv + static_cast<size_t>(h) * dv + i] = out;
  }
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int j = lane + kWarp * e;
    if (j < dk) srow[j] = m[e];
  }
}

// Gated RMSNorm, one warp per (token, value head) row of Dv: y = w ⊙ o·rms⁻¹ ⊙ silu(z).
__global__ void GatedNormKernel(float* core, const float* z, const float* w, int rows, int dv,
                                float eps) {
  const int r = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  if (r >= rows) return;
  const int lane = threadIdx.x % kWarp;
  float* o = core + static_cast<size_t>(r) * dv;
  const float* zr = z + static_cast<size_t>(r) * dv;
  float ss = 0.0f;
  for (int i = lane; i < dv; i += kWarp) ss += o[i] * o[i];
  ss = WarpSum(ss);
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(dv) + eps);
  for (int i = lane; i < dv; i += kWarp) o[i] = w[i] * (o[i] * scale) * DevSilu(zr[i]);
}

// cos/sin of RoPE angle position · θ^(−2i/rope_dim) for positions [0, positions) and
// i < half, in double then rounded to float, as the CPU backend computes them. Built once per
// capacity on the device; the table is [positions, half].
__global__ void RopeTableKernel(int positions, int half, double theta, float* cos_table,
                                float* sin_table) {
  const size_t idx = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<size_t>(positions) * half) return;
  const int i = static_cast<int>(idx % half);
  const double position = static_cast<double>(idx / half);
  const double inv_freq = pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(2 * half));
  cos_table[idx] = static_cast<float>(cos(position * inv_freq));
  sin_table[idx] = static_cast<float>(sin(position * inv_freq));
}

// Zero-centred RMSNorm of one attention head then rotate-half RoPE on its first 2·half dims, one
// warp per (token, head). Reads x (row t, head h at x + t·x_row + h·x_head), writes y likewise;
// x may equal y. Token t sits at position first + t of the RoPE tables.
__global__ void HeadNormRopeKernel(const float* x, size_t x_row, size_t x_head, float* y,
                                   size_t y_row, size_t y_head, int heads, int rows, const float* w,
                                   int d, float eps, const float* cos_table, const float* sin_table,
                                   int half, int first) {
  const int r = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  if (r >= rows) return;
  const int lane = threadIdx.x % kWarp;
  const int t = r / heads;
  const int h = r % heads;
  const float* xr = x + t * x_row + h * x_head;
  float* yr = y + t * y_row + h * y_head;
  float ss = 0.0f;
  for (int i = lane; i < d; i += kWarp) ss += xr[i] * xr[i];
  ss = WarpSum(ss);
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  for (int i = lane; i < d; i += kWarp) yr[i] = xr[i] * scale * (1.0f + w[i]);
  __syncwarp();
  const size_t row = static_cast<size_t>(first + t) * half;
  for (int i = lane; i < half; i += kWarp) {
    const float c = cos_table[row + i];
    const float s = sin_table[row + i];
    const float x1 = yr[i];
    const float x2 = yr[i + half];
    yr[i] = x1 * c - x2 * s;
    yr[i + half] = x2 * c + x1 * s;
  }
}

// Causal GQA attention, split over the keys (flash-decoding), in two kernels.
//
// AttentionPartialKernel: one block per (KV head g, query tile, key split) of attn::PlanSplits,
// 4 warps. Its rows are (token, query head of g's group) pairs, row r on warp r % 4. The block
// walks its split's keys in tiles of 32 staged in shared memory. For each tile a warp scores its
// 4 rows with lane j taking key j: a full dot product over D in increasing i, each 16-byte load
// of the key (4 elements) and of the queries (one element of all 4 rows) feeding 16 FMAs. It
// folds the tile into each row's online softmax (one max and one sum butterfly per tile, not per
// key) and accumulates P·V with lane l owning dims l, l+32, ... It writes each row's (max, sum,
// unnormalised acc) for the split.
//
// AttentionMergeKernel: one warp per row merges its splits in increasing order with
// attn::MergeSoftmaxPartials, the function the CPU tests check against a direct softmax.
//
// Every value has one owner and a loop order fixed by the shapes, so results are deterministic;
// a decode step or a short suffix over a long context spreads over ~1K blocks, bound by reading
// K and V rather than by one block's sequential walk.
//
// Dynamic shared memory, in floats: q [4 warps][D][4 rows] (scaled; a warp's 4 rows interleaved
// so one float4 holds element i of all of them), k [32][D + 4] (padded: the 8 lanes of a
// 16-byte load phase, j·(D+4) + i apart, hit 8 different groups of 4 banks), v [32][D],
// p [4][4][32].
constexpr int kKeyPad = 4;
template <int E>
constexpr size_t AttentionSharedBytes() {
  constexpr int D = kWarp * E;
  return sizeof(float) * (attn::kRowsPerBlock * D + attn::kKeyTile * (D + kKeyPad) +
                          attn::kKeyTile * D + attn::kWarps * attn::kRowsPerWarp * attn::kKeyTile);
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int offset = kWarp / 2; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

struct AttentionShape {
  const float* q;
  size_t q_stride;
  const float* k;
  const float* v;
  size_t kv_stride;
  int n;
  int first;
  int group;
  int tokens_per_tile;
  int tiles;
  int splits;
  int split_keys;
  float scale;
};

template <int E>
__global__ void __launch_bounds__(attn::kWarps* kWarp)
    AttentionPartialKernel(AttentionShape a, float* part_max, float* part_sum, float* part_acc) {
  constexpr int D = kWarp * E;
  constexpr int kRows = attn::kRowsPerBlock;
  constexpr int kTile = attn::kKeyTile;
  extern __shared__ float shared[];
  float* qs = shared;                      // [kWarps][D][kRowsPerWarp]
  float* ks = qs + kRows * D;              // [kTile][D + kKeyPad]
  float* vs = ks + kTile * (D + kKeyPad);  // [kTile][D]
  float* ps = vs + kTile * D;              // [kWarps][kRowsPerWarp][kTile]

  const int item = blockIdx.x;
  const attn::BlockCoords block = attn::DecodeBlock(item, a.tiles, a.splits);
  const int split = static_cast<int>(block.split);
  const int tile = static_cast<int>(block.tile);
  const int g = static_cast<int>(block.g);
  const int t0 = tile * a.tokens_per_tile;
  const int t1 = min(a.n, t0 + a.tokens_per_tile);
  const int rows = (t1 - t0) * a.group;
  const int key_begin = split * a.split_keys;
  const int key_end = min(key_begin + a.split_keys, a.first + t1);
  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;

  for (int idx = threadIdx.x; idx < kRows * D; idx += blockDim.x) {
    const int r = idx / D;
    const int i = idx % D;
    const attn::RowCoords row = attn::RowOf(g, tile, r, a.tokens_per_tile, a.group);
    // Row r is warp r % 4's row r / 4.
    qs[((r % attn::kWarps) * D + i) * attn::kRowsPerWarp + r / attn::kWarps] =
        r < rows ? a.q[row.token * a.q_stride + static_cast<size_t>(row.head) * D + i] * a.scale
                 : 0.0f;
  }

  float run_max[attn::kRowsPerWarp];
  float run_sum[attn::kRowsPerWarp];
  float acc[attn::kRowsPerWarp][E];
  int last_key[attn::kRowsPerWarp];  // the row's own position; −1 for rows past the tile
#pragma unroll
  for (int rr = 0; rr < attn::kRowsPerWarp; ++rr) {
    const int r = warp + attn::kWarps * rr;
    last_key[rr] =
        r < rows
            ? a.first + static_cast<int>(attn::RowOf(g, tile, r, a.tokens_per_tile, a.group).token)
            : -1;
    run_max[rr] = -INFINITY;
    run_sum[rr] = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[rr][e] = 0.0f;
  }

  for (int k0 = key_begin; k0 < key_end; k0 += kTile) {
    const int kn = min(kTile, key_end - k0);
    __syncthreads();  // the previous tile (and, the first time, qs) is no longer being written
    // 16-byte loads (D, kv_stride and g·D are multiples of 4 floats, cudaMalloc aligns to 256).
    constexpr int kQuads = D / 4;
#pragma unroll 4
    for (int idx = threadIdx.x; idx < kTile * kQuads; idx += blockDim.x) {
      const int j = idx / kQuads;
      const int i = (idx % kQuads) * 4;
      float4 kq = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      float4 vq = kq;
      if (j < kn) {
        const size_t at =
            static_cast<size_t>(k0 + j) * a.kv_stride + static_cast<size_t>(g) * D + i;
        kq = *reinterpret_cast<const float4*>(a.k + at);
        vq = *reinterpret_cast<const float4*>(a.v + at);
      }
      *reinterpret_cast<float4*>(ks + j * (D + kKeyPad) + i) = kq;
      *reinterpret_cast<float4*>(vs + j * D + i) = vq;
    }
    __syncthreads();

    // Scores: lane j scores key k0 + j against each of the warp's rows.
    static_assert(attn::kRowsPerWarp == 4, "a float4 holds one element of a warp's 4 rows");
    float score[attn::kRowsPerWarp];
#pragma unroll
    for (int rr = 0; rr < attn::kRowsPerWarp; ++rr) score[rr] = 0.0f;
    const float4* krow = reinterpret_cast<const float4*>(ks + lane * (D + kKeyPad));
    const float4* qrows = reinterpret_cast<const float4*>(qs) + warp * D;  // broadcast reads
#pragma unroll 4
    for (int i4 = 0; i4 < D / 4; ++i4) {
      const float4 k4 = krow[i4];
      const float kd[4] = {k4.x, k4.y, k4.z, k4.w};
#pragma unroll
      for (int c = 0; c < 4; ++c) {  // element i = 4·i4 + c, in increasing i
        const float4 q4 = qrows[4 * i4 + c];
        score[0] += q4.x * kd[c];
        score[1] += q4.y * kd[c];
        score[2] += q4.z * kd[c];
        score[3] += q4.w * kd[c];
      }
    }

    // Online softmax, one tile at a time: the same update as the CPU backend's per block.
#pragma unroll
    for (int rr = 0; rr < attn::kRowsPerWarp; ++rr) {
      float* p_row = ps + (warp * attn::kRowsPerWarp + rr) * kTile;
      if (last_key[rr] < k0) {  // warp-uniform: no key of this tile is visible to the row
        p_row[lane] = 0.0f;
        continue;
      }
      const bool visible = lane < kn && k0 + lane <= last_key[rr];
      const float tile_max = WarpMax(visible ? score[rr] : -INFINITY);
      const float new_max = fmaxf(run_max[rr], tile_max);
      const float correction = run_max[rr] == -INFINITY ? 0.0f : expf(run_max[rr] - new_max);
      const float p = visible ? expf(score[rr] - new_max) : 0.0f;
      run_sum[rr] = run_sum[rr] * correction + WarpSum(p);
      run_max[rr] = new_max;
      p_row[lane] = p;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[rr][e] *= correction;
    }
    __syncwarp();

    // acc += P · V: lane l owns dims l + 32e of each row.
    for (int j = 0; j < kn; ++j) {
      float v[E];
#pragma unroll
      for (int e = 0; e < E; ++e) v[e] = vs[j * D + lane + kWarp * e];
#pragma unroll
      for (int rr = 0; rr < attn::kRowsPerWarp; ++rr) {
        const float p = ps[(warp * attn::kRowsPerWarp + rr) * kTile + j];
#pragma unroll
        for (int e = 0; e < E; ++e) acc[rr][e] += p * v[e];
      }
    }
    __syncwarp();
  }

#pragma unroll
  for (int rr = 0; rr < attn::kRowsPerWarp; ++rr) {
    const int r = warp + attn::kWarps * rr;
    if (r >= rows) continue;
    const size_t at = static_cast<size_t>(attn::PartialRow(item, r));
    if (lane == 0) {
      part_max[at] = run_max[rr];
      part_sum[at] = run_sum[rr];
    }
#pragma unroll
    for (int e = 0; e < E; ++e) part_acc[at * D + lane + kWarp * e] = acc[rr][e];
  }
}

struct DeviceExp {
  __device__ float operator()(float x) const { return expf(x); }
};

// One warp per row (KV head g, tile, row r): merges the row's splits into out.
__global__ void AttentionMergeKernel(AttentionShape a, int kv_heads, int d, const float* part_max,
                                     const float* part_sum, const float* part_acc, float* out,
                                     size_t out_stride) {
  constexpr int kRows = attn::kRowsPerBlock;
  const int warp_id = blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp;
  if (warp_id >= kv_heads * a.tiles * kRows) return;
  const int lane = threadIdx.x % kWarp;
  const int r = warp_id % kRows;
  const int tile = (warp_id / kRows) % a.tiles;
  const int g = warp_id / (kRows * a.tiles);
  const int t0 = tile * a.tokens_per_tile;
  const int rows = (min(a.n, t0 + a.tokens_per_tile) - t0) * a.group;
  if (r >= rows) return;
  const attn::RowCoords row = attn::RowOf(g, tile, r, a.tokens_per_tile, a.group);
  // Split s of this row: PartialRow(BlockIndex(g, tile, s), r), kRows apart for consecutive s.
  const size_t stat =
      static_cast<size_t>(attn::PartialRow(attn::BlockIndex(g, tile, 0, a.tiles, a.splits), r));
  attn::MergeSoftmaxPartials(
      part_max + stat, part_sum + stat, kRows, part_acc + stat * static_cast<size_t>(d),
      static_cast<int64_t>(kRows) * d, a.splits, d, lane, kWarp,
      out + row.token * out_stride + static_cast<size_t>(row.head) * d, DeviceExp{});
}

// Calls fn(std::integral_constant<int, value>) for a run-time value in [V, Max] (the caller has
// checked the range; a value past Max gets Max), so kernels can take sizes as template arguments.
template <int V, int Max, typename Fn>
void DispatchInt(int value, Fn&& fn) {
  if constexpr (V < Max) {
    if (value > V) return DispatchInt<V + 1, Max>(value, fn);
  }
  fn(std::integral_constant<int, V>{});
}

unsigned Blocks(size_t count, int per_block) {
  return static_cast<unsigned>((count + per_block - 1) / per_block);
}

// ---- The backend ----------------------------------------------------------------------------

struct DeviceLayer {
  LayerKind kind = LayerKind::kLinear;
  DeviceFloats input_norm, post_norm, mlp_gate, mlp_up, mlp_down;
  DeviceFloats in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, conv1d, a_log, dt_bias, norm, out_proj;
  DeviceFloats q_proj, k_proj, v_proj, o_proj, q_norm, k_norm;
  // State.
  DeviceFloats conv, recurrent, k, v;
};

// Page-locks the host mirror's buffers (cudaHostRegister) so state copies are DMA transfers
// queued on the backend's stream, with no pageable staging. A FloatBuffer may move when it grows:
// Track() then unregisters the old range before registering the new one. Buffers that cannot be
// registered stay pageable: slower, still correct, because every copy is followed by a stream
// synchronisation.
class HostPins {
 public:
  ~HostPins() { static_cast<void>(ReleaseAll()); }

  Status Track(const FloatBuffer& buffer) {
    const void* base = buffer.data();
    const size_t bytes = buffer.capacity() * sizeof(float);
    Pin& pin = pins_[&buffer];
    if (pin.base == base && pin.bytes == bytes) return Status::Ok();
    if (pin.base != base) {
      // The buffer moved: its old memory is already freed, so the driver may or may not still
      // know the range. Either way it is released now; an error here says nothing about `buffer`.
      static_cast<void>(Unregister(&pin));
      static_cast<void>(cudaGetLastError());
    } else {
      PREFIXD_RETURN_IF_ERROR(Unregister(&pin));  // grew in place: re-register the larger range
    }
    if (base == nullptr || bytes < kMinBytes) return Status::Ok();
    const cudaError_t e = cudaHostRegister(const_cast<void*>(base), bytes, cudaHostRegisterDefault);
    if (e != cudaSuccess) {
      // Not sticky: clear it. AlreadyRegistered means a page shared with another registration;
      // anything else (a platform without host registration) is said once. Either way the
      // buffer stays pageable: slower copies, the same bytes.
      static_cast<void>(cudaGetLastError());
      if (e != cudaErrorHostMemoryAlreadyRegistered && !warned_) {
        std::fprintf(stderr, "prefixd-hybrid: cudaHostRegister: %s; state copies stay pageable\n",
                     cudaGetErrorString(e));
        warned_ = true;
      }
      pin = {base, bytes, false};  // not retried (a retry would land in a timed hydration)
      return Status::Ok();
    }
    pin = {base, bytes, true};
    return Status::Ok();
  }

  // Before a buffer is freed or regrown by code outside Track()'s view.
  Status Forget(const FloatBuffer& buffer) {
    auto it = pins_.find(&buffer);
    if (it == pins_.end()) return Status::Ok();
    return Unregister(&it->second);
  }

  Status ReleaseAll() {
    Status first;
    for (auto& [buffer, pin] : pins_) {
      Status s = Unregister(&pin);
      if (first.ok()) static_cast<void>(first = std::move(s));
    }
    return first;
  }

 private:
  // Small buffers may share pages with other allocations; their copies are tiny anyway.
  static constexpr size_t kMinBytes = size_t{128} << 10;
  struct Pin {
    const void* base = nullptr;
    size_t bytes = 0;
    bool registered = false;
  };
  static Status Unregister(Pin* pin) {
    if (!pin->registered) {
      *pin = {};
      return Status::Ok();
    }
    const cudaError_t e = cudaHostUnregister(const_cast<void*>(pin->base));
    *pin = {};
    if (e != cudaSuccess) return CudaFailure(e, "cudaHostUnregister(host state mirror)");
    return Status::Ok();
  }
  std::map<const FloatBuffer*, Pin> pins_;
  bool warned_ = false;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(const ModelConfig& config, const CudaOptions& options)
      : config_(config),
        chunk_(std::max<int64_t>(options.prefill_chunk, 1)),
        device_(options.device),
        host_state_(config) {}

  ~CudaBackend() override {
    static_cast<void>(pins_.ReleaseAll());
    if (blas_ != nullptr) cublasDestroy(blas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Everything that would fail later is refused here, before any state exists.
  static Status CheckSupported(const ModelConfig& c) {
    if (c.num_attention_layers() > 0) {
      if (c.head_dim % kWarp != 0 || c.head_dim / kWarp < 1 || c.head_dim / kWarp > 8) {
        return Status::InvalidArgument(
            "the CUDA backend needs head_dim a multiple of 32, <= 256 (got " +
            std::to_string(c.head_dim) + ")");
      }
      if (c.num_attention_heads / c.num_key_value_heads > attn::kRowsPerBlock) {
        return Status::InvalidArgument("the CUDA backend needs at most 16 query heads per KV head");
      }
    }
    if (c.num_linear_layers() > 0 &&
        (c.linear_key_head_dim > 8 * kWarp || c.linear_conv_kernel_dim > kMaxConvKernel)) {
      return Status::InvalidArgument("the CUDA backend needs Dk <= 256 and a conv kernel <= 8");
    }
    return Status::Ok();
  }

  Status Init(const ModelWeights& w) {
    PREFIXD_RETURN_IF_ERROR(CheckSupported(config_));
    HY_CUDA(cudaSetDevice(device_));
    HY_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    HY_CUBLAS(cublasCreate(&blas_));
    HY_CUBLAS(cublasSetStream(blas_, stream_));
    // Exact fp32 products: no TF32 or other reduced-precision shortcuts.
    HY_CUBLAS(cublasSetMathMode(blas_, CUBLAS_PEDANTIC_MATH));
    if (config_.num_attention_layers() > 0) PREFIXD_RETURN_IF_ERROR(AllowAttentionSharedMemory());

    PREFIXD_RETURN_IF_ERROR(Upload(w.embed, &embed_, stream_));
    PREFIXD_RETURN_IF_ERROR(Upload(w.final_norm, &final_norm_, stream_));
    if (!w.lm_head.empty()) PREFIXD_RETURN_IF_ERROR(Upload(w.lm_head, &lm_head_, stream_));
    layers_.resize(w.layers.size());
    for (size_t i = 0; i < w.layers.size(); ++i) {
      const LayerWeights& lw = w.layers[i];
      DeviceLayer& d = layers_[i];
      d.kind = lw.kind;
      for (auto [src, dst] : {std::pair{&lw.input_norm, &d.input_norm},
                              std::pair{&lw.post_norm, &d.post_norm},
                              std::pair{&lw.mlp_gate, &d.mlp_gate},
                              std::pair{&lw.mlp_up, &d.mlp_up},
                              std::pair{&lw.mlp_down, &d.mlp_down},
                              std::pair{&lw.linear.in_proj_qkv, &d.in_proj_qkv},
                              std::pair{&lw.linear.in_proj_z, &d.in_proj_z},
                              std::pair{&lw.linear.in_proj_b, &d.in_proj_b},
                              std::pair{&lw.linear.in_proj_a, &d.in_proj_a},
                              std::pair{&lw.linear.conv1d, &d.conv1d},
                              std::pair{&lw.linear.a_log, &d.a_log},
                              std::pair{&lw.linear.dt_bias, &d.dt_bias},
                              std::pair{&lw.linear.norm, &d.norm},
                              std::pair{&lw.linear.out_proj, &d.out_proj},
                              std::pair{&lw.attn.q_proj, &d.q_proj},
                              std::pair{&lw.attn.k_proj, &d.k_proj},
                              std::pair{&lw.attn.v_proj, &d.v_proj},
                              std::pair{&lw.attn.o_proj, &d.o_proj},
                              std::pair{&lw.attn.q_norm, &d.q_norm},
                              std::pair{&lw.attn.k_norm, &d.k_norm}}) {
        if (!src->empty()) PREFIXD_RETURN_IF_ERROR(Upload(*src, dst, stream_));
      }
      if (d.kind == LayerKind::kLinear) {
        PREFIXD_RETURN_IF_ERROR(d.conv.Ensure(host_state_.layers()[i].conv.size()));
        PREFIXD_RETURN_IF_ERROR(d.recurrent.Ensure(host_state_.layers()[i].recurrent.size()));
      }
    }
    // The weights' host copies may be freed once this returns: wait for every upload.
    PREFIXD_RETURN_IF_ERROR(Sync());
    Reset(0);
    return status_;
  }

  std::string_view name() const override { return "cuda"; }
  const ModelConfig& config() const override { return config_; }
  SequenceState& host_state() override { return host_state_; }

  // Reset cannot return a Status (the Backend interface); a failure is kept and returned by the
  // next Forward / PullState / PushState. The first failure sticks: after a CUDA error the
  // device context is not trusted again.
  void Reset(int64_t reserve_tokens) override {
    static_cast<void>(Remember(ResetDevice(reserve_tokens)));
  }

  Status PullState() override {
    PREFIXD_RETURN_IF_ERROR(status_);
    PREFIXD_RETURN_IF_ERROR(UnpinKvBeforeGrowth(n_tokens_));
    host_state_.ResizeTokens(n_tokens_);
    PREFIXD_RETURN_IF_ERROR(PinMirror());
    for (size_t i = 0; i < layers_.size(); ++i) {
      LayerState& h = host_state_.layers()[i];
      const DeviceLayer& d = layers_[i];
      if (d.kind == LayerKind::kLinear) {
        PREFIXD_RETURN_IF_ERROR(CopyToHost(d.conv, &h.conv));
        PREFIXD_RETURN_IF_ERROR(CopyToHost(d.recurrent, &h.recurrent));
      } else if (n_tokens_ > 0) {
        PREFIXD_RETURN_IF_ERROR(CopyToHost(d.k, &h.k));
        PREFIXD_RETURN_IF_ERROR(CopyToHost(d.v, &h.v));
      }
    }
    return Sync();
  }

  Status PushState() override {
    PREFIXD_RETURN_IF_ERROR(status_);
    const int64_t n = host_state_.n_tokens();
    PREFIXD_RETURN_IF_ERROR(EnsureCapacity(n));
    // The caller filled the mirror, possibly growing (moving) its buffers.
    PREFIXD_RETURN_IF_ERROR(PinMirror());
    for (size_t i = 0; i < layers_.size(); ++i) {
      const LayerState& h = host_state_.layers()[i];
      DeviceLayer& d = layers_[i];
      if (d.kind == LayerKind::kLinear) {
        PREFIXD_RETURN_IF_ERROR(CopyToDevice(h.conv, &d.conv));
        PREFIXD_RETURN_IF_ERROR(CopyToDevice(h.recurrent, &d.recurrent));
      } else if (n > 0) {
        PREFIXD_RETURN_IF_ERROR(CopyToDevice(h.k, &d.k));
        PREFIXD_RETURN_IF_ERROR(CopyToDevice(h.v, &d.v));
      }
    }
    // Every byte has landed before the state is used or the mirror changes.
    PREFIXD_RETURN_IF_ERROR(Sync());
    n_tokens_ = n;
    return Status::Ok();
  }

  Status Forward(std::span<const int32_t> tokens, std::span<float> logits,
                 const ProgressFn& progress) override {
    PREFIXD_RETURN_IF_ERROR(status_);
    if (tokens.empty()) return Status::InvalidArgument("Forward needs at least one token");
    if (!logits.empty() && static_cast<int64_t>(logits.size()) != config_.vocab_size) {
      return Status::InvalidArgument("logits buffer is not vocab_size floats");
    }
    for (int32_t t : tokens) {
      if (t < 0 || t >= config_.vocab_size) {
        return Status::InvalidArgument("token id " + std::to_string(t) + " outside the vocabulary");
      }
    }
    const int64_t total = static_cast<int64_t>(tokens.size());
    PREFIXD_RETURN_IF_ERROR(Remember(EnsureCapacity(n_tokens_ + total)));
    for (int64_t done = 0; done < total;) {
      const int64_t m = std::min(chunk_, total - done);
      const bool last = done + m == total;
      PREFIXD_RETURN_IF_ERROR(
          Remember(ForwardChunk(tokens.subspan(static_cast<size_t>(done), static_cast<size_t>(m)),
                                last ? logits : std::span<float>())));
      done += m;
      if (progress) {
        PREFIXD_RETURN_IF_ERROR(Remember(Sync()));
        progress(done, total);
      }
    }
    return Remember(Sync());
  }

 private:
  // Keeps the first failure; returns `s` so call sites can pass it on.
  Status Remember(Status s) {
    if (status_.ok() && !s.ok()) static_cast<void>(status_ = s);
    return s;
  }

  Status Sync() {
    HY_CUDA(cudaStreamSynchronize(stream_));
    HY_CUDA(cudaGetLastError());
    return Status::Ok();
  }

  Status ResetDevice(int64_t reserve_tokens) {
    PREFIXD_RETURN_IF_ERROR(status_);
    n_tokens_ = 0;
    for (DeviceLayer& d : layers_) {
      if (d.kind != LayerKind::kLinear) continue;
      HY_CUDA(cudaMemsetAsync(d.conv.get(), 0, d.conv.count() * sizeof(float), stream_));
      HY_CUDA(cudaMemsetAsync(d.recurrent.get(), 0, d.recurrent.count() * sizeof(float), stream_));
    }
    PREFIXD_RETURN_IF_ERROR(EnsureCapacity(reserve_tokens));
    // The mirror is reserved (and pinned) here, so a hydration of up to reserve_tokens fills it
    // in place; buffers that do not move stay registered from one sequence to the next.
    PREFIXD_RETURN_IF_ERROR(UnpinKvBeforeGrowth(reserve_tokens));
    host_state_.Clear();
    host_state_.Reserve(reserve_tokens);
    PREFIXD_RETURN_IF_ERROR(PinMirror());
    return Sync();
  }

  // Growing a K/V buffer frees its old memory: unregister it while that memory still exists.
  Status UnpinKvBeforeGrowth(int64_t tokens) {
    const size_t needed = static_cast<size_t>(tokens * host_state_.kv_dim());
    for (LayerState& h : host_state_.layers()) {
      if (needed <= h.k.capacity() && needed <= h.v.capacity()) continue;
      PREFIXD_RETURN_IF_ERROR(pins_.Forget(h.k));
      PREFIXD_RETURN_IF_ERROR(pins_.Forget(h.v));
    }
    return Status::Ok();
  }

  Status PinMirror() {
    for (LayerState& h : host_state_.layers()) {
      for (const FloatBuffer* b : {&h.conv, &h.recurrent, &h.k, &h.v}) {
        PREFIXD_RETURN_IF_ERROR(pins_.Track(*b));
      }
    }
    return Status::Ok();
  }

  Status CopyToHost(const DeviceFloats& dev, FloatBuffer* host) {
    if (host->empty()) return Status::Ok();
    HY_CUDA(
        cudaMemcpyAsync(host->data(), dev.get(), host->bytes(), cudaMemcpyDeviceToHost, stream_));
    return Status::Ok();
  }

  Status CopyToDevice(const FloatBuffer& host, DeviceFloats* dev) {
    if (host.empty()) return Status::Ok();
    if (host.size() > dev->count()) {
      return Status::InvalidArgument("the host state is larger than the device state");
    }
    HY_CUDA(
        cudaMemcpyAsync(dev->get(), host.data(), host.bytes(), cudaMemcpyHostToDevice, stream_));
    return Status::Ok();
  }

  // Room for `tokens` rows of K and V in every attention layer, keeping the rows held, and RoPE
  // tables for every position up to the capacity.
  Status EnsureCapacity(int64_t tokens) {
    if (tokens <= capacity_) return Status::Ok();
    const int64_t capacity = std::max(tokens, capacity_ + capacity_ / 2);
    const size_t kv_dim = static_cast<size_t>(config_.kv_dim());
    for (DeviceLayer& d : layers_) {
      if (d.kind != LayerKind::kFullAttention) continue;
      for (DeviceFloats* buf : {&d.k, &d.v}) {
        DeviceFloats fresh;
        PREFIXD_RETURN_IF_ERROR(fresh.Ensure(static_cast<size_t>(capacity) * kv_dim));
        if (n_tokens_ > 0) {
          HY_CUDA(cudaMemcpyAsync(fresh.get(), buf->get(),
                                  static_cast<size_t>(n_tokens_) * kv_dim * sizeof(float),
                                  cudaMemcpyDeviceToDevice, stream_));
        }
        PREFIXD_RETURN_IF_ERROR(Sync());  // the old buffer is freed next
        *buf = std::move(fresh);
      }
    }
    const int half = static_cast<int>(config_.rope_dim() / 2);
    if (config_.num_attention_layers() > 0 && half > 0) {
      const size_t entries = static_cast<size_t>(capacity) * static_cast<size_t>(half);
      PREFIXD_RETURN_IF_ERROR(rope_cos_.Ensure(entries));
      PREFIXD_RETURN_IF_ERROR(rope_sin_.Ensure(entries));
      RopeTableKernel<<<Blocks(entries, kBlock), kBlock, 0, stream_>>>(
          static_cast<int>(capacity), half, config_.rope_theta, rope_cos_.get(), rope_sin_.get());
      HY_LAUNCHED();
    }
    capacity_ = capacity;
    return Status::Ok();
  }

  // The attention kernel needs more than the default 48 KiB of shared memory for large heads.
  Status AllowAttentionSharedMemory() {
    Status st;
    DispatchHeadDim([&](auto e) {
      constexpr int E = decltype(e)::value;
      const cudaError_t err = cudaFuncSetAttribute(AttentionPartialKernel<E>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(AttentionSharedBytes<E>()));
      if (err != cudaSuccess) {
        static_cast<void>(st = CudaFailure(err, "cudaFuncSetAttribute(attention shared memory)"));
      }
    });
    return st;
  }

  // Calls fn(std::integral_constant<int, head_dim / 32>); CheckSupported() has limited head_dim
  // to multiples of 32 up to 256.
  template <typename Fn>
  void DispatchHeadDim(Fn&& fn) const {
    DispatchInt<1, 8>(static_cast<int>(config_.head_dim / kWarp), fn);
  }

  // y[n, out] = x[n, in] · w[out, in]ᵀ (row-major), with y's rows `ldy` apart.
  Status Gemm(const float* x, int64_t n, int64_t in, const float* w, int64_t out, float* y,
              int64_t ldy) {
    const float one = 1.0f;
    const float zero = 0.0f;
    // Column-major view: yᵀ[out, n] = w_cm[in, out]ᵀ · xᵀ[in, n].
    HY_CUBLAS(cublasSgemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out),
                          static_cast<int>(n), static_cast<int>(in), &one, w, static_cast<int>(in),
                          x, static_cast<int>(in), &zero, y, static_cast<int>(ldy)));
    return Status::Ok();
  }
  Status Gemm(const float* x, int64_t n, int64_t in, const float* w, int64_t out, float* y) {
    return Gemm(x, n, in, w, out, y, out);
  }

  Status Scratch(int64_t m) {
    const ModelConfig& c = config_;
    const size_t t = static_cast<size_t>(m);
    for (auto [buf, width] :
         {std::pair{&x_, c.hidden_size}, std::pair{&h_, c.hidden_size},
          std::pair{&mix_, c.hidden_size}, std::pair{&gate_, c.intermediate_size},
          std::pair{&up_, c.intermediate_size}, std::pair{&qkv_, c.conv_dim()},
          std::pair{&conv_out_, c.conv_dim()}, std::pair{&z_, c.value_dim()},
          std::pair{&beta_, c.linear_num_value_heads}, std::pair{&alpha_, c.linear_num_value_heads},
          std::pair{&core_, c.value_dim()}, std::pair{&qg_, c.q_proj_dim()},
          std::pair{&q_, c.num_attention_heads * c.head_dim},
          std::pair{&attn_, c.num_attention_heads * c.head_dim}}) {
      PREFIXD_RETURN_IF_ERROR(buf->Ensure(t * static_cast<size_t>(std::max<int64_t>(width, 1))));
    }
    PREFIXD_RETURN_IF_ERROR(tokens_.Ensure(t));
    PREFIXD_RETURN_IF_ERROR(last_.Ensure(static_cast<size_t>(c.hidden_size)));
    return logits_.Ensure(static_cast<size_t>(c.vocab_size));
  }

  Status ForwardChunk(std::span<const int32_t> tokens, std::span<float> logits) {
    const ModelConfig& c = config_;
    const int64_t m = static_cast<int64_t>(tokens.size());
    const int64_t hidden = c.hidden_size;
    const float eps = static_cast<float>(c.rms_norm_eps);
    PREFIXD_RETURN_IF_ERROR(Scratch(m));
    // From pageable memory: the call returns once the ids are staged, so `tokens` may go.
    HY_CUDA(cudaMemcpyAsync(tokens_.get(), tokens.data(), tokens.size_bytes(),
                            cudaMemcpyHostToDevice, stream_));
    EmbedKernel<<<static_cast<unsigned>(m), kBlock, 0, stream_>>>(
        tokens_.get(), embed_.get(), static_cast<int>(hidden), x_.get());
    HY_LAUNCHED();
    const size_t elems = static_cast<size_t>(m * hidden);
    for (DeviceLayer& d : layers_) {
      RmsNormKernel<<<static_cast<unsigned>(m), kBlock, 0, stream_>>>(
          x_.get(), d.input_norm.get(), static_cast<int>(hidden), eps, h_.get());
      HY_LAUNCHED();
      if (d.kind == LayerKind::kLinear) {
        PREFIXD_RETURN_IF_ERROR(LinearAttention(d, m));
      } else {
        PREFIXD_RETURN_IF_ERROR(FullAttention(d, m));
      }
      AddKernel<<<Blocks(elems, kBlock), kBlock, 0, stream_>>>(x_.get(), mix_.get(), elems);
      HY_LAUNCHED();
      RmsNormKernel<<<static_cast<unsigned>(m), kBlock, 0, stream_>>>(
          x_.get(), d.post_norm.get(), static_cast<int>(hidden), eps, h_.get());
      HY_LAUNCHED();
      const int64_t ffn = c.intermediate_size;
      PREFIXD_RETURN_IF_ERROR(Gemm(h_.get(), m, hidden, d.mlp_gate.get(), ffn, gate_.get()));
      PREFIXD_RETURN_IF_ERROR(Gemm(h_.get(), m, hidden, d.mlp_up.get(), ffn, up_.get()));
      const size_t ffn_elems = static_cast<size_t>(m * ffn);
      SiluMulKernel<<<Blocks(ffn_elems, kBlock), kBlock, 0, stream_>>>(gate_.get(), up_.get(),
                                                                       ffn_elems);
      HY_LAUNCHED();
      PREFIXD_RETURN_IF_ERROR(Gemm(gate_.get(), m, ffn, d.mlp_down.get(), hidden, mix_.get()));
      AddKernel<<<Blocks(elems, kBlock), kBlock, 0, stream_>>>(x_.get(), mix_.get(), elems);
      HY_LAUNCHED();
    }
    n_tokens_ += m;
    if (logits.empty()) return Status::Ok();
    RmsNormKernel<<<1, kBlock, 0, stream_>>>(x_.get() + (m - 1) * hidden, final_norm_.get(),
                                             static_cast<int>(hidden), eps, last_.get());
    HY_LAUNCHED();
    const float* head = lm_head_.count() > 0 ? lm_head_.get() : embed_.get();
    PREFIXD_RETURN_IF_ERROR(Gemm(last_.get(), 1, hidden, head, c.vocab_size, logits_.get()));
    HY_CUDA(cudaMemcpyAsync(logits.data(), logits_.get(), logits.size_bytes(),
                            cudaMemcpyDeviceToHost, stream_));
    return Sync();
  }

  Status LinearAttention(DeviceLayer& d, int64_t m) {
    const ModelConfig& c = config_;
    const int64_t hidden = c.hidden_size;
    const int64_t conv_dim = c.conv_dim();
    const int64_t value_dim = c.value_dim();
    const int64_t hv = c.linear_num_value_heads;
    const int64_t dk = c.linear_key_head_dim;
    const int64_t dv = c.linear_value_head_dim;
    PREFIXD_RETURN_IF_ERROR(Gemm(h_.get(), m, hidden, d.in_proj_qkv.get(), conv_dim, qkv_.get()));
    PREFIXD_RETURN_IF_ERROR(Gemm(h_.get(), m, hidden, d.in_proj_z.get(), value_dim, z_.get()));
    PREFIXD_RETURN_IF_ERROR(Gemm(h_.get(), m, hidden, d.in_proj_b.get(), hv, beta_.get()));
    PREFIXD_RETURN_IF_ERROR(Gemm(h_.get(), m, hidden, d.in_proj_a.get(), hv, alpha_.get()));
    auto conv = [&](auto kernel) {
      kernel<<<Blocks(static_cast<size_t>(conv_dim), kBlock), kBlock, 0, stream_>>>(
          qkv_.get(), static_cast<int>(m), static_cast<int>(conv_dim), d.conv1d.get(), d.conv.get(),
          conv_out_.get());
    };
    // CheckSupported(): 1 <= K <= kMaxConvKernel.
    DispatchInt<1, kMaxConvKernel>(static_cast<int>(c.linear_conv_kernel_dim),
                                   [&](auto k) { conv(CausalConvKernel<decltype(k)::value>); });
    HY_LAUNCHED();
    GdnPrepKernel<<<static_cast<unsigned>(m), kBlock, 0, stream_>>>(
        conv_out_.get(), static_cast<int>(conv_dim), static_cast<int>(c.key_dim()),
        static_cast<int>(c.linear_num_key_heads), static_cast<int>(dk),
        1.0f / std::sqrt(static_cast<float>(dk)), alpha_.get(), beta_.get(), d.a_log.get(),
        d.dt_bias.get(), static_cast<int>(hv));
    HY_LAUNCHED();
    const int rows = static_cast<int>(hv * dv);
    constexpr int kWarpsPerBlock = 4;
    const unsigned blocks = Blocks(static_cast<size_t>(rows), kWarpsPerBlock);
    const int lane_elems = static_cast<int>((dk + kWarp - 1) / kWarp);
    auto launch = [&](auto kernel) {
      kernel<<<blocks, kWarpsPerBlock * kWarp, 0, stream_>>>(
          conv_out_.get(), static_cast<int>(conv_dim), static_cast<int>(c.key_dim()),
          static_cast<int>(dk), static_cast<int>(dv), static_cast<int>(hv),
          static_cast<int>(hv / c.linear_num_key_heads), alpha_.get(), beta_.get(),
          static_cast<int>(m), d.recurrent.get(), core_.get());
    };
    if (lane_elems <= 1) {
      launch(GdnRecurrenceKernel<1>);
    } else if (lane_elems <= 2) {
      launch(GdnRecurrenceKernel<2>);
    } else if (lane_elems <= 4) {
      launch(GdnRecurrenceKernel<4>);
    } else {
      launch(GdnRecurrenceKernel<8>);
    }
    HY_LAUNCHED();
    const int norm_rows = static_cast<int>(m * hv);
    GatedNormKernel<<<Blocks(static_cast<size_t>(norm_rows), 8), 8 * kWarp, 0, stream_>>>(
        core_.get(), z_.get(), d.norm.get(), norm_rows, static_cast<int>(dv),
        static_cast<float>(c.rms_norm_eps));
    HY_LAUNCHED();
    return Gemm(core_.get(), m, value_dim, d.out_proj.get(), hidden, mix_.get());
  }

  Status FullAttention(DeviceLayer& d, int64_t m) {
    const ModelConfig& c = config_;
    const int64_t hidden = c.hidden_size;
    const int64_t heads = c.num_attention_heads;
    const int64_t kv_heads = c.num_key_value_heads;
    const int64_t hd = c.head_dim;
    const int64_t q_proj = c.q_proj_dim();
    const int64_t kv_dim = c.kv_dim();
    const int64_t per_head = c.attn_output_gate ? 2 * hd : hd;
    const float eps = static_cast<float>(c.rms_norm_eps);
    float* k_new = d.k.get() + n_tokens_ * kv_dim;
    float* v_new = d.v.get() + n_tokens_ * kv_dim;
    PREFIXD_RETURN_IF_ERROR(Gemm(h_.get(), m, hidden, d.q_proj.get(), q_proj, qg_.get()));
    PREFIXD_RETURN_IF_ERROR(Gemm(h_.get(), m, hidden, d.k_proj.get(), kv_dim, k_new));
    PREFIXD_RETURN_IF_ERROR(Gemm(h_.get(), m, hidden, d.v_proj.get(), kv_dim, v_new));
    const int half = static_cast<int>(c.rope_dim() / 2);
    const int first = static_cast<int>(n_tokens_);
    const int q_rows = static_cast<int>(m * heads);
    HeadNormRopeKernel<<<Blocks(static_cast<size_t>(q_rows), 8), 8 * kWarp, 0, stream_>>>(
        qg_.get(), static_cast<size_t>(q_proj), static_cast<size_t>(per_head), q_.get(),
        static_cast<size_t>(heads * hd), static_cast<size_t>(hd), static_cast<int>(heads), q_rows,
        d.q_norm.get(), static_cast<int>(hd), eps, rope_cos_.get(), rope_sin_.get(), half, first);
    HY_LAUNCHED();
    const int k_rows = static_cast<int>(m * kv_heads);
    HeadNormRopeKernel<<<Blocks(static_cast<size_t>(k_rows), 8), 8 * kWarp, 0, stream_>>>(
        k_new, static_cast<size_t>(kv_dim), static_cast<size_t>(hd), k_new,
        static_cast<size_t>(kv_dim), static_cast<size_t>(hd), static_cast<int>(kv_heads), k_rows,
        d.k_norm.get(), static_cast<int>(hd), eps, rope_cos_.get(), rope_sin_.get(), half, first);
    HY_LAUNCHED();
    PREFIXD_RETURN_IF_ERROR(Attention(d, m));
    if (c.attn_output_gate) {
      const size_t count = static_cast<size_t>(m * heads * hd);
      OutputGateKernel<<<Blocks(count, kBlock), kBlock, 0, stream_>>>(
          attn_.get(), qg_.get(), static_cast<int>(heads), static_cast<int>(hd),
          static_cast<int>(q_proj), count);
      HY_LAUNCHED();
    }
    return Gemm(attn_.get(), m, heads * hd, d.o_proj.get(), hidden, mix_.get());
  }

  // q_ (this chunk's queries) against every key of the layer so far, into attn_.
  Status Attention(DeviceLayer& d, int64_t m) {
    const ModelConfig& c = config_;
    const int64_t group = c.num_attention_heads / c.num_key_value_heads;
    const attn::SplitPlan plan = attn::PlanSplits(m, n_tokens_, c.num_key_value_heads, group);
    const size_t rows = static_cast<size_t>(plan.blocks()) * attn::kRowsPerBlock;
    PREFIXD_RETURN_IF_ERROR(part_max_.Ensure(rows));
    PREFIXD_RETURN_IF_ERROR(part_sum_.Ensure(rows));
    PREFIXD_RETURN_IF_ERROR(part_acc_.Ensure(rows * static_cast<size_t>(c.head_dim)));
    const size_t row_stride = static_cast<size_t>(c.num_attention_heads * c.head_dim);
    const AttentionShape shape{.q = q_.get(),
                               .q_stride = row_stride,
                               .k = d.k.get(),
                               .v = d.v.get(),
                               .kv_stride = static_cast<size_t>(c.kv_dim()),
                               .n = static_cast<int>(m),
                               .first = static_cast<int>(n_tokens_),
                               .group = static_cast<int>(group),
                               .tokens_per_tile = static_cast<int>(plan.tokens_per_tile),
                               .tiles = static_cast<int>(plan.tiles),
                               .splits = static_cast<int>(plan.splits),
                               .split_keys = static_cast<int>(plan.split_keys),
                               .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
    DispatchHeadDim([&](auto e) {
      constexpr int E = decltype(e)::value;
      AttentionPartialKernel<E>
          <<<static_cast<unsigned>(plan.blocks()), attn::kWarps * kWarp, AttentionSharedBytes<E>(),
             stream_>>>(shape, part_max_.get(), part_sum_.get(), part_acc_.get());
    });
    HY_LAUNCHED();
    const size_t merge_rows =
        static_cast<size_t>(c.num_key_value_heads * plan.tiles) * attn::kRowsPerBlock;
    AttentionMergeKernel<<<Blocks(merge_rows, 8), 8 * kWarp, 0, stream_>>>(
        shape, static_cast<int>(c.num_key_value_heads), static_cast<int>(c.head_dim),
        part_max_.get(), part_sum_.get(), part_acc_.get(), attn_.get(), row_stride);
    HY_LAUNCHED();
    return Status::Ok();
  }

  const ModelConfig config_;
  const int64_t chunk_;
  const int device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  Status status_;  // the first failure; every later call returns it

  DeviceFloats embed_, final_norm_, lm_head_;
  std::vector<DeviceLayer> layers_;
  int64_t n_tokens_ = 0;
  int64_t capacity_ = 0;
  SequenceState host_state_;
  HostPins pins_;  // after host_state_: unregisters before the mirror is freed

  DeviceFloats x_, h_, mix_, gate_, up_, qkv_, conv_out_, z_, beta_, alpha_, core_, qg_, q_, attn_,
      last_, logits_;
  DeviceFloats rope_cos_, rope_sin_;             // [capacity, rope_dim / 2]
  DeviceFloats part_max_, part_sum_, part_acc_;  // attention's per-split partial results
  DeviceArray<int32_t> tokens_;
};

}  // namespace

Result<std::unique_ptr<Backend>> MakeCudaBackend(const ModelConfig& config,
                                                 const ModelWeights& weights,
                                                 const CudaOptions& options) {
  PREFIXD_RETURN_IF_ERROR(config.Validate());
  if (static_cast<int64_t>(weights.layers.size()) != config.num_layers()) {
    return Status::InvalidArgument("weights do not match the model config");
  }
  auto backend = std::make_unique<CudaBackend>(config, options);
  PREFIXD_RETURN_IF_ERROR(backend->Init(weights));
  return std::unique_ptr<Backend>(std::move(backend));
}

Result<std::string> CudaDeviceDescription(int device) {
  int count = 0;
  HY_CUDA(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count) {
    return Status::NotFound("no CUDA device " + std::to_string(device) + " (" +
                            std::to_string(count) + " found)");
  }
  cudaDeviceProp prop{};
  HY_CUDA(cudaGetDeviceProperties(&prop, device));
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ", " + std::to_string(prop.totalGlobalMem >> 30) + " GiB)";
}

}  // namespace prefixd::hybrid
