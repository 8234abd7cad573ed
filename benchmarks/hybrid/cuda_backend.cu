#include "cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

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

// Owned device memory of `count` elements of T.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  ~DeviceArray() { Release(); }
  DeviceArray(DeviceArray&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      Release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }

  // Makes room for at least `count` elements; the contents are lost when it grows.
  Status Ensure(size_t count) {
    if (count <= count_) return Status::Ok();
    Release();
    HY_CUDA(cudaMalloc(&ptr_, std::max<size_t>(count, 1) * sizeof(T)));
    count_ = count;
    return Status::Ok();
  }

  T* get() const { return ptr_; }
  size_t count() const { return count_; }

 private:
  void Release() {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = nullptr;
    count_ = 0;
  }
  T* ptr_ = nullptr;
  size_t count_ = 0;
};
using DeviceFloats = DeviceArray<float>;

Status Upload(const FloatBuffer& host, DeviceFloats* dev) {
  PREFIXD_RETURN_IF_ERROR(dev->Ensure(host.size()));
  if (!host.empty()) {
    HY_CUDA(cudaMemcpy(dev->get(), host.data(), host.bytes(), cudaMemcpyHostToDevice));
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
// ([K−1, channels], oldest first) supplies the history and is advanced.
constexpr int kMaxConvKernel = 8;
__global__ void CausalConvKernel(const float* in, int n, int channels, const float* weight,
                                 int kernel, float* state, float* out) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  float w[kMaxConvKernel];
  float window[kMaxConvKernel];  // window[j] = x[t − (K−1) + j]
  for (int j = 0; j < kernel; ++j) w[j] = weight[static_cast<size_t>(c) * kernel + j];
  for (int j = 0; j + 1 < kernel; ++j) window[j] = state[static_cast<size_t>(j) * channels + c];
  for (int t = 0; t < n; ++t) {
    window[kernel - 1] = in[static_cast<size_t>(t) * channels + c];
    float acc = w[0] * window[0];
    for (int j = 1; j < kernel; ++j) acc += w[j] * window[j];
    out[static_cast<size_t>(t) * channels + c] = DevSilu(acc);
    for (int j = 0; j + 1 < kernel; ++j) window[j] = window[j + 1];
  }
  for (int j = 0; j + 1 < kernel; ++j) state[static_cast<size_t>(j) * channels + c] = window[j];
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

// Zero-centred RMSNorm of one attention head then rotate-half RoPE on its first 2·half dims, one
// warp per (token, head). Reads x (row t, head h at x + t·x_row + h·x_head), writes y likewise;
// x may equal y. cos/sin are [tokens, half], computed on the host exactly as the CPU does.
__global__ void HeadNormRopeKernel(const float* x, size_t x_row, size_t x_head, float* y,
                                   size_t y_row, size_t y_head, int heads, int rows, const float* w,
                                   int d, float eps, const float* cos_table, const float* sin_table,
                                   int half) {
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
  for (int i = lane; i < half; i += kWarp) {
    const float c = cos_table[static_cast<size_t>(t) * half + i];
    const float s = sin_table[static_cast<size_t>(t) * half + i];
    const float x1 = yr[i];
    const float x2 = yr[i + half];
    yr[i] = x1 * c - x2 * s;
    yr[i + half] = x2 * c + x1 * s;
  }
}

// Causal GQA attention. A block is one KV head and `tokens_per_tile` query tokens of its group's
// query heads (32 rows: 8 warps × 4 rows). Keys stream through shared memory in tiles of 16; each
// warp walks them in order per row with an online softmax (a dot product per key: lane partial
// sums in e order and a butterfly), so each row's result is fixed by the shapes alone.
constexpr int kAttnWarps = 8;
constexpr int kRowsPerWarp = 4;
constexpr int kAttnRows = kAttnWarps * kRowsPerWarp;
constexpr int kKeyTile = 16;

template <int E>
__global__ void AttentionKernel(const float* q, size_t q_stride, const float* kc, const float* vc,
                                size_t kv_stride, float* out, size_t out_stride, int n, int first,
                                int heads, int kv_heads, int tokens_per_tile, float scale) {
  constexpr int D = kWarp * E;
  __shared__ float ks[kKeyTile][D];
  __shared__ float vs[kKeyTile][D];
  const int group = heads / kv_heads;
  const int tiles = (n + tokens_per_tile - 1) / tokens_per_tile;
  const int g = blockIdx.x / tiles;
  const int t0 = (blockIdx.x % tiles) * tokens_per_tile;
  const int t1 = min(n, t0 + tokens_per_tile);
  const int rows = (t1 - t0) * group;
  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;

  float qr[kRowsPerWarp][E];
  float acc[kRowsPerWarp][E];
  float run_max[kRowsPerWarp];
  float run_sum[kRowsPerWarp];
  int last_key[kRowsPerWarp];
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int r = warp + kAttnWarps * rr;
    const int t = t0 + r / group;
    const int h = g * group + r % group;
    last_key[rr] = r < rows ? first + t : -1;
    run_max[rr] = -INFINITY;
    run_sum[rr] = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      qr[rr][e] =
          r < rows ? q[t * q_stride + static_cast<size_t>(h) * D + lane + kWarp * e] * scale : 0.0f;
      acc[rr][e] = 0.0f;
    }
  }
  const int n_keys = first + t1;
  for (int k0 = 0; k0 < n_keys; k0 += kKeyTile) {
    const int kn = min(kKeyTile, n_keys - k0);
    __syncthreads();
    for (int idx = threadIdx.x; idx < kKeyTile * D; idx += blockDim.x) {
      const int j = idx / D;
      const int i = idx % D;
      const size_t at = static_cast<size_t>(k0 + j) * kv_stride + static_cast<size_t>(g) * D + i;
      ks[j][i] = j < kn ? kc[at] : 0.0f;
      vs[j][i] = j < kn ? vc[at] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int limit = min(kn, last_key[rr] - k0 + 1);  // warp-uniform
      for (int j = 0; j < limit; ++j) {
        float partial = 0.0f;
#pragma unroll
        for (int e = 0; e < E; ++e) partial += qr[rr][e] * ks[j][lane + kWarp * e];
        const float s = WarpSum(partial);
        const float new_max = fmaxf(run_max[rr], s);
        const float correction = expf(run_max[rr] - new_max);
        const float p = expf(s - new_max);
        run_sum[rr] = run_sum[rr] * correction + p;
#pragma unroll
        for (int e = 0; e < E; ++e)
          acc[rr][e] = acc[rr][e] * correction + p * vs[j][lane + kWarp * e];
        run_max[rr] = new_max;
      }
    }
  }
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int r = warp + kAttnWarps * rr;
    if (r >= rows) continue;
    const int t = t0 + r / group;
    const int h = g * group + r % group;
    const float inv = 1.0f / run_sum[rr];
#pragma unroll
    for (int e = 0; e < E; ++e) {
      out[t * out_stride + static_cast<size_t>(h) * D + lane + kWarp * e] = acc[rr][e] * inv;
    }
  }
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

class CudaBackend final : public Backend {
 public:
  CudaBackend(const ModelConfig& config, const CudaOptions& options)
      : config_(config),
        chunk_(std::max<int64_t>(options.prefill_chunk, 1)),
        device_(options.device),
        host_state_(config) {}

  ~CudaBackend() override {
    if (blas_ != nullptr) cublasDestroy(blas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Status Init(const ModelWeights& w) {
    const ModelConfig& c = config_;
    if (c.head_dim % kWarp != 0 || c.head_dim / kWarp > 8) {
      if (c.num_attention_layers() > 0) {
        return Status::InvalidArgument("the CUDA backend needs head_dim a multiple of 32, <= 256");
      }
    }
    if (c.linear_key_head_dim > 8 * kWarp || c.linear_conv_kernel_dim > kMaxConvKernel) {
      return Status::InvalidArgument("the CUDA backend needs Dk <= 256 and a conv kernel <= 8");
    }
    if (c.num_attention_heads / c.num_key_value_heads > kAttnRows) {
      return Status::InvalidArgument("the CUDA backend needs at most 32 query heads per KV head");
    }
    HY_CUDA(cudaSetDevice(device_));
    HY_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    HY_CUBLAS(cublasCreate(&blas_));
    HY_CUBLAS(cublasSetStream(blas_, stream_));
    // Exact fp32 products: no TF32 or other reduced-precision shortcuts.
    HY_CUBLAS(cublasSetMathMode(blas_, CUBLAS_PEDANTIC_MATH));

    PREFIXD_RETURN_IF_ERROR(Upload(w.embed, &embed_));
    PREFIXD_RETURN_IF_ERROR(Upload(w.final_norm, &final_norm_));
    if (!w.lm_head.empty()) PREFIXD_RETURN_IF_ERROR(Upload(w.lm_head, &lm_head_));
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
        if (!src->empty()) PREFIXD_RETURN_IF_ERROR(Upload(*src, dst));
      }
      if (d.kind == LayerKind::kLinear) {
        PREFIXD_RETURN_IF_ERROR(d.conv.Ensure(host_state_.layers()[i].conv.size()));
        PREFIXD_RETURN_IF_ERROR(d.recurrent.Ensure(host_state_.layers()[i].recurrent.size()));
      }
    }
    Reset(0);
    return Sync();
  }

  std::string_view name() const override { return "cuda"; }
  const ModelConfig& config() const override { return config_; }
  SequenceState& host_state() override { return host_state_; }

  void Reset(int64_t reserve_tokens) override {
    n_tokens_ = 0;
    for (DeviceLayer& d : layers_) {
      if (d.kind != LayerKind::kLinear) continue;
      cudaMemsetAsync(d.conv.get(), 0, d.conv.count() * sizeof(float), stream_);
      cudaMemsetAsync(d.recurrent.get(), 0, d.recurrent.count() * sizeof(float), stream_);
    }
    static_cast<void>(status_ = EnsureCapacity(reserve_tokens));
    host_state_.Clear();
    host_state_.Reserve(reserve_tokens);
    cudaStreamSynchronize(stream_);
  }

  Status PullState() override {
    PREFIXD_RETURN_IF_ERROR(status_);
    host_state_.ResizeTokens(n_tokens_);
    for (size_t i = 0; i < layers_.size(); ++i) {
      LayerState& h = host_state_.layers()[i];
      const DeviceLayer& d = layers_[i];
      if (d.kind == LayerKind::kLinear) {
        HY_CUDA(cudaMemcpy(h.conv.data(), d.conv.get(), h.conv.bytes(), cudaMemcpyDeviceToHost));
        HY_CUDA(cudaMemcpy(h.recurrent.data(), d.recurrent.get(), h.recurrent.bytes(),
                           cudaMemcpyDeviceToHost));
      } else if (n_tokens_ > 0) {
        HY_CUDA(cudaMemcpy(h.k.data(), d.k.get(), h.k.bytes(), cudaMemcpyDeviceToHost));
        HY_CUDA(cudaMemcpy(h.v.data(), d.v.get(), h.v.bytes(), cudaMemcpyDeviceToHost));
      }
    }
    return Status::Ok();
  }

  Status PushState() override {
    PREFIXD_RETURN_IF_ERROR(status_);
    const int64_t n = host_state_.n_tokens();
    PREFIXD_RETURN_IF_ERROR(EnsureCapacity(n));
    for (size_t i = 0; i < layers_.size(); ++i) {
      const LayerState& h = host_state_.layers()[i];
      DeviceLayer& d = layers_[i];
      if (d.kind == LayerKind::kLinear) {
        HY_CUDA(cudaMemcpy(d.conv.get(), h.conv.data(), h.conv.bytes(), cudaMemcpyHostToDevice));
        HY_CUDA(cudaMemcpy(d.recurrent.get(), h.recurrent.data(), h.recurrent.bytes(),
                           cudaMemcpyHostToDevice));
      } else if (n > 0) {
        HY_CUDA(cudaMemcpy(d.k.get(), h.k.data(), h.k.bytes(), cudaMemcpyHostToDevice));
        HY_CUDA(cudaMemcpy(d.v.get(), h.v.data(), h.v.bytes(), cudaMemcpyHostToDevice));
      }
    }
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
    PREFIXD_RETURN_IF_ERROR(EnsureCapacity(n_tokens_ + total));
    for (int64_t done = 0; done < total;) {
      const int64_t m = std::min(chunk_, total - done);
      const bool last = done + m == total;
      PREFIXD_RETURN_IF_ERROR(
          ForwardChunk(tokens.subspan(static_cast<size_t>(done), static_cast<size_t>(m)),
                       last ? logits : std::span<float>()));
      done += m;
      if (progress) {
        PREFIXD_RETURN_IF_ERROR(Sync());
        progress(done, total);
      }
    }
    return Sync();
  }

 private:
  Status Sync() {
    HY_CUDA(cudaStreamSynchronize(stream_));
    HY_CUDA(cudaGetLastError());
    return Status::Ok();
  }

  // Room for `tokens` rows of K and V in every attention layer, keeping the rows held.
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
        HY_CUDA(cudaStreamSynchronize(stream_));
        *buf = std::move(fresh);
      }
    }
    capacity_ = capacity;
    return Status::Ok();
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
          std::pair{&attn_, c.num_attention_heads * c.head_dim},
          std::pair{&rope_cos_, std::max<int64_t>(c.rope_dim() / 2, 1)},
          std::pair{&rope_sin_, std::max<int64_t>(c.rope_dim() / 2, 1)}}) {
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
    HY_CUDA(cudaMemcpyAsync(tokens_.get(), tokens.data(), tokens.size_bytes(),
                            cudaMemcpyHostToDevice, stream_));
    EmbedKernel<<<static_cast<unsigned>(m), kBlock, 0, stream_>>>(
        tokens_.get(), embed_.get(), static_cast<int>(hidden), x_.get());
    if (c.num_attention_layers() > 0) PREFIXD_RETURN_IF_ERROR(RopeTables(m));
    const size_t elems = static_cast<size_t>(m * hidden);
    for (DeviceLayer& d : layers_) {
      RmsNormKernel<<<static_cast<unsigned>(m), kBlock, 0, stream_>>>(
          x_.get(), d.input_norm.get(), static_cast<int>(hidden), eps, h_.get());
      if (d.kind == LayerKind::kLinear) {
        PREFIXD_RETURN_IF_ERROR(LinearAttention(d, m));
      } else {
        PREFIXD_RETURN_IF_ERROR(FullAttention(d, m));
      }
      AddKernel<<<Blocks(elems, kBlock), kBlock, 0, stream_>>>(x_.get(), mix_.get(), elems);
      RmsNormKernel<<<static_cast<unsigned>(m), kBlock, 0, stream_>>>(
          x_.get(), d.post_norm.get(), static_cast<int>(hidden), eps, h_.get());
      const int64_t ffn = c.intermediate_size;
      PREFIXD_RETURN_IF_ERROR(Gemm(h_.get(), m, hidden, d.mlp_gate.get(), ffn, gate_.get()));
      PREFIXD_RETURN_IF_ERROR(Gemm(h_.get(), m, hidden, d.mlp_up.get(), ffn, up_.get()));
      const size_t ffn_elems = static_cast<size_t>(m * ffn);
      SiluMulKernel<<<Blocks(ffn_elems, kBlock), kBlock, 0, stream_>>>(gate_.get(), up_.get(),
                                                                       ffn_elems);
      PREFIXD_RETURN_IF_ERROR(Gemm(gate_.get(), m, ffn, d.mlp_down.get(), hidden, mix_.get()));
      AddKernel<<<Blocks(elems, kBlock), kBlock, 0, stream_>>>(x_.get(), mix_.get(), elems);
    }
    HY_CUDA(cudaGetLastError());
    n_tokens_ += m;
    if (logits.empty()) return Status::Ok();
    RmsNormKernel<<<1, kBlock, 0, stream_>>>(x_.get() + (m - 1) * hidden, final_norm_.get(),
                                             static_cast<int>(hidden), eps, last_.get());
    const float* head = lm_head_.count() > 0 ? lm_head_.get() : embed_.get();
    PREFIXD_RETURN_IF_ERROR(Gemm(last_.get(), 1, hidden, head, c.vocab_size, logits_.get()));
    HY_CUDA(cudaMemcpyAsync(logits.data(), logits_.get(), logits.size_bytes(),
                            cudaMemcpyDeviceToHost, stream_));
    return Sync();
  }

  // cos/sin of every (position, frequency) of this chunk, computed on the host in double like
  // the CPU backend's.
  Status RopeTables(int64_t m) {
    const int64_t half = config_.rope_dim() / 2;
    if (half == 0) return Status::Ok();
    cos_host_.resize(static_cast<size_t>(m * half));
    sin_host_.resize(static_cast<size_t>(m * half));
    for (int64_t t = 0; t < m; ++t) {
      const double position = static_cast<double>(n_tokens_ + t);
      for (int64_t i = 0; i < half; ++i) {
        const double inv_freq = std::pow(
            config_.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(2 * half));
        cos_host_[static_cast<size_t>(t * half + i)] =
            static_cast<float>(std::cos(position * inv_freq));
        sin_host_[static_cast<size_t>(t * half + i)] =
            static_cast<float>(std::sin(position * inv_freq));
      }
    }
    HY_CUDA(cudaMemcpyAsync(rope_cos_.get(), cos_host_.data(), cos_host_.size() * sizeof(float),
                            cudaMemcpyHostToDevice, stream_));
    HY_CUDA(cudaMemcpyAsync(rope_sin_.get(), sin_host_.data(), sin_host_.size() * sizeof(float),
                            cudaMemcpyHostToDevice, stream_));
    // The host tables are rewritten by the next chunk: wait until they have been read.
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
    CausalConvKernel<<<Blocks(static_cast<size_t>(conv_dim), kBlock), kBlock, 0, stream_>>>(
        qkv_.get(), static_cast<int>(m), static_cast<int>(conv_dim), d.conv1d.get(),
        static_cast<int>(c.linear_conv_kernel_dim), d.conv.get(), conv_out_.get());
    GdnPrepKernel<<<static_cast<unsigned>(m), kBlock, 0, stream_>>>(
        conv_out_.get(), static_cast<int>(conv_dim), static_cast<int>(c.key_dim()),
        static_cast<int>(c.linear_num_key_heads), static_cast<int>(dk),
        1.0f / std::sqrt(static_cast<float>(dk)), alpha_.get(), beta_.get(), d.a_log.get(),
        d.dt_bias.get(), static_cast<int>(hv));
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
    const int norm_rows = static_cast<int>(m * hv);
    GatedNormKernel<<<Blocks(static_cast<size_t>(norm_rows), 8), 8 * kWarp, 0, stream_>>>(
        core_.get(), z_.get(), d.norm.get(), norm_rows, static_cast<int>(dv),
        static_cast<float>(c.rms_norm_eps));
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
    const int q_rows = static_cast<int>(m * heads);
    HeadNormRopeKernel<<<Blocks(static_cast<size_t>(q_rows), 8), 8 * kWarp, 0, stream_>>>(
        qg_.get(), static_cast<size_t>(q_proj), static_cast<size_t>(per_head), q_.get(),
        static_cast<size_t>(heads * hd), static_cast<size_t>(hd), static_cast<int>(heads), q_rows,
        d.q_norm.get(), static_cast<int>(hd), eps, rope_cos_.get(), rope_sin_.get(), half);
    const int k_rows = static_cast<int>(m * kv_heads);
    HeadNormRopeKernel<<<Blocks(static_cast<size_t>(k_rows), 8), 8 * kWarp, 0, stream_>>>(
        k_new, static_cast<size_t>(kv_dim), static_cast<size_t>(hd), k_new,
        static_cast<size_t>(kv_dim), static_cast<size_t>(hd), static_cast<int>(kv_heads), k_rows,
        d.k_norm.get(), static_cast<int>(hd), eps, rope_cos_.get(), rope_sin_.get(), half);

    const int group = static_cast<int>(heads / kv_heads);
    const int tokens_per_tile = std::max(1, kAttnRows / group);
    const unsigned blocks =
        static_cast<unsigned>(kv_heads * ((m + tokens_per_tile - 1) / tokens_per_tile));
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    auto launch = [&](auto kernel) {
      kernel<<<blocks, kAttnWarps * kWarp, 0, stream_>>>(
          q_.get(), static_cast<size_t>(heads * hd), d.k.get(), d.v.get(),
          static_cast<size_t>(kv_dim), attn_.get(), static_cast<size_t>(heads * hd),
          static_cast<int>(m), static_cast<int>(n_tokens_), static_cast<int>(heads),
          static_cast<int>(kv_heads), tokens_per_tile, scale);
    };
    switch (hd / kWarp) {
      case 1:
        launch(AttentionKernel<1>);
        break;
      case 2:
        launch(AttentionKernel<2>);
        break;
      case 4:
        launch(AttentionKernel<4>);
        break;
      case 8:
        launch(AttentionKernel<8>);
        break;
      default:
        return Status::InvalidArgument(
            "the CUDA attention kernel needs head_dim 32, 64, 128 or 256");
    }
    if (c.attn_output_gate) {
      const size_t count = static_cast<size_t>(m * heads * hd);
      OutputGateKernel<<<Blocks(count, kBlock), kBlock, 0, stream_>>>(
          attn_.get(), qg_.get(), static_cast<int>(heads), static_cast<int>(hd),
          static_cast<int>(q_proj), count);
    }
    return Gemm(attn_.get(), m, heads * hd, d.o_proj.get(), hidden, mix_.get());
  }

  const ModelConfig config_;
  const int64_t chunk_;
  const int device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  Status status_;  // a failure Reset() could not return

  DeviceFloats embed_, final_norm_, lm_head_;
  std::vector<DeviceLayer> layers_;
  int64_t n_tokens_ = 0;
  int64_t capacity_ = 0;
  SequenceState host_state_;

  DeviceFloats x_, h_, mix_, gate_, up_, qkv_, conv_out_, z_, beta_, alpha_, core_, qg_, q_, attn_,
      rope_cos_, rope_sin_, last_, logits_;
  DeviceArray<int32_t> tokens_;
  std::vector<float> cos_host_, sin_host_;
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
