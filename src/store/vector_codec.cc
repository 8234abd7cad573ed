#include "store/vector_codec.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "common/ascii.h"
#include "prefixd/float16.h"

namespace prefixd::store {
namespace {

// Rows are little-endian on the wire and on disk; loads and stores below are plain memcpy.
static_assert(std::endian::native == std::endian::little,
              "the V-store codec assumes little-endian");

constexpr uint32_t kBlock = 32;       // fp8 and mlx4g32 values per scale
constexpr float kE4m3Max = 448.0f;    // largest finite e4m3fn magnitude
constexpr float kFp16Max = 65504.0f;  // largest finite fp16 magnitude

float LoadF32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
void StoreF32(uint8_t* p, float v) { std::memcpy(p, &v, 4); }
void StoreU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
void StoreU32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

// Round half to even. Adding and removing 2^23 leaves an integer rounded under the default
// rounding mode (to nearest, ties to even), which nothing in prefixd changes; unlike
// std::nearbyint it needs no library call on baseline x86-64, so the loops stay vectorisable.
float RoundEven(float v) {
  constexpr float kShift = 8388608.0f;  // 2^23: floats at or above it are integers
  const float a = std::fabs(v);
  return a < kShift ? std::copysign((a + kShift) - kShift, v) : v;
}

// A quantiser's code: `v` rounded half to even and clamped to [0, top]. Clamping to
// [-1, top + 1] first cannot change the result and keeps the value where adding 1.5 × 2^23
// rounds it to an integer; no branch, so the loops vectorise.
float Code(float v, float top) {
  constexpr float kShift = 12582912.0f;  // 1.5 × 2^23: the spacing of floats there is 1
  v = std::min(std::max(v, -1.0f), top + 1.0f);
  v = (v + kShift) - kShift;
  return std::min(std::max(v, 0.0f), top);
}

// fp32 -> e4m3fn, round to nearest even in integer arithmetic, saturating at ±448.
uint8_t E4m3FromFloat(float v) {
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7f;   // NaN
  if (magnitude >= 0x43e00000u) return sign | 0x7e;  // 448 and up: e4m3fn has no infinity
  if (magnitude >= 0x3c800000u) {                    // normal, 2^-6 and up
    // Rebias the exponent (127 -> 7) and keep 3 of the 23 mantissa bits: add just under half
    // an ulp plus the kept part's lsb, so a tie goes to even; a carry bumps the exponent, which
    // is the correct result.
    const uint32_t lsb = (magnitude >> 20) & 1u;
    return sign | static_cast<uint8_t>((magnitude - 0x3c000000u + 0x7ffffu + lsb) >> 20);
  }
  // Subnormal: a multiple of 2^-9; 8 is the smallest normal, code 0x08, so it stays continuous.
  return sign | static_cast<uint8_t>(RoundEven(std::bit_cast<float>(magnitude) * 512.0f));
}

const std::array<float, 256>& E4m3Table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) {
      const int e = (c >> 3) & 15, m = c & 7;
      float v;
      if (e == 15 && m == 7) {
        v = std::numeric_limits<float>::quiet_NaN();
      } else if (e == 0) {
        v = std::ldexp(static_cast<float>(m), -9);
      } else {
        v = std::ldexp(static_cast<float>(8 + m), e - 10);
      }
      t[static_cast<size_t>(c)] = (c & 0x80) ? -v : v;
    }
    return t;
  }();
  return table;
}

// Lossless tiers: each element converted on its own.
template <typename Convert>
void ConvertElements(const uint8_t* in, size_t in_size, uint8_t* out, size_t out_size, size_t n,
                     Convert convert) {
  for (size_t i = 0; i < n; ++i) convert(in + i * in_size, out + i * out_size);
}

// fp16 <-> fp32 in bulk: the default tier's hot paths. Where the CPU has F16C, eight values at a
// time in hardware, which rounds to nearest even exactly as Fp32ToFp16 does and widens exactly
// as Fp16ToFp32 does, except that it quietens signalling NaNs: a block holding a NaN or Inf goes
// through the scalar functions, so every result is the scalar one, bit for bit.
#if defined(__x86_64__)
__attribute__((target("avx,f16c"))) void Fp32ToFp16F16c(const uint8_t* in, uint8_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(reinterpret_cast<const float*>(in + 4 * i));
    const __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
    // Inf and NaN: all exponent bits set.
    const __m256 special = _mm256_cmp_ps(magnitude, _mm256_set1_ps(INFINITY), _CMP_NLT_UQ);
    if (_mm256_movemask_ps(special) != 0) {
      for (size_t k = i; k < i + 8; ++k) StoreU16(out + 2 * k, Fp32ToFp16(LoadF32(in + 4 * k)));
      continue;
    }
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), h);
  }
  for (; i < n; ++i) StoreU16(out + 2 * i, Fp32ToFp16(LoadF32(in + 4 * i)));
}

__attribute__((target("avx,f16c"))) void Fp16ToFp32F16c(const uint8_t* in, float* out, size_t n) {
  size_t i = 0;
  const __m128i exponent = _mm_set1_epi16(0x7c00);
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
    const __m128i special = _mm_cmpeq_epi16(_mm_and_si128(h, exponent), exponent);
    if (_mm_movemask_epi8(special) != 0) {
      for (size_t k = i; k < i + 8; ++k) out[k] = Fp16ToFp32(LoadU16(in + 2 * k));
      continue;
    }
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = Fp16ToFp32(LoadU16(in + 2 * i));
}

bool HasF16c() {
  // F16C from CPUID leaf 1 (ECX bit 29): clang before 16 does not know the "f16c" name.
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 &&
           (ecx & bit_F16C) != 0;
  }();
  return has;
}
#endif

void Fp32ToFp16Bulk(const uint8_t* in, uint8_t* out, size_t n) {
#if defined(__x86_64__)
  if (HasF16c()) return Fp32ToFp16F16c(in, out, n);
#endif
  for (size_t i = 0; i < n; ++i) StoreU16(out + 2 * i, Fp32ToFp16(LoadF32(in + 4 * i)));
}

void Fp16ToFp32Bulk(const uint8_t* in, float* out, size_t n) {
#if defined(__x86_64__)
  if (HasF16c()) return Fp16ToFp32F16c(in, out, n);
#endif
  for (size_t i = 0; i < n; ++i) out[i] = Fp16ToFp32(LoadU16(in + 2 * i));
}

// Widens one row of input to fp32.
void InputRowToFp32(InputFormat format, const uint8_t* in, uint32_t dim, float* out) {
  switch (format) {
    case InputFormat::kF32:
      std::memcpy(out, in, size_t{dim} * 4);
      return;
    case InputFormat::kF16:
      Fp16ToFp32Bulk(in, out, dim);
      return;
    case InputFormat::kBf16:
      for (uint32_t j = 0; j < dim; ++j) out[j] = Bf16ToFp32(LoadU16(in + 2 * j));
      return;
  }
}

void EncodeInt8Row(const float* x, uint32_t dim, uint8_t* out) {
  float mn = x[0], mx = x[0];
  for (uint32_t j = 1; j < dim; ++j) mn = std::min(mn, x[j]), mx = std::max(mx, x[j]);
  // The range in double (it may exceed the float range), rounded once to the stored scale.
  const float scale = static_cast<float>((static_cast<double>(mx) - mn) / 255.0);
  StoreF32(out, scale);
  StoreF32(out + 4, mn);
  uint8_t* codes = out + 8;
  if (scale == 0.0f) {  // a constant row: min alone decodes it exactly
    std::memset(codes, 0, dim);
    return;
  }
  for (uint32_t j = 0; j < dim; ++j) {
    codes[j] = static_cast<uint8_t>(static_cast<int32_t>(Code((x[j] - mn) / scale, 255.0f)));
  }
}

void EncodeFp8Row(const float* x, uint32_t dim, uint8_t* out) {
  for (uint32_t b = 0; b < dim / kBlock; ++b, out += 2 + kBlock) {
    const float* v = x + b * kBlock;
    float amax = 0.0f;
    for (uint32_t j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(v[j]));
    uint16_t scale_bits = 0;
    if (amax > 0.0f) {
      // Rounded up to bf16, so |v| / scale never passes 448 and the top of the block is kept.
      const float wanted = amax / kE4m3Max;
      scale_bits = Fp32ToBf16(wanted);
      if (Bf16ToFp32(scale_bits) < wanted) ++scale_bits;
      if (scale_bits == 0) scale_bits = 1;  // amax so small the quotient underflowed
    }
    StoreU16(out, scale_bits);
    if (scale_bits == 0) {
      std::memset(out + 2, 0, kBlock);
      continue;
    }
    const float scale = Bf16ToFp32(scale_bits);
    for (uint32_t j = 0; j < kBlock; ++j) out[2 + j] = E4m3FromFloat(v[j] / scale);
  }
}

void EncodeMlx4Row(const float* x, uint32_t dim, uint8_t* out) {
  uint8_t* codes = out;
  uint8_t* scales = out + dim / 2;
  uint8_t* biases = scales + dim / 16;
  for (uint32_t g = 0; g < dim / kBlock; ++g) {
    const float* v = x + g * kBlock;
    float mn = v[0], mx = v[0];
    for (uint32_t j = 1; j < kBlock; ++j) mn = std::min(mn, v[j]), mx = std::max(mx, v[j]);
    // Scale and bias are rounded to fp16 first and the codes computed against the rounded
    // values, so decoding reproduces exactly what the encoder aimed at.
    const uint16_t scale_bits =
        Fp32ToFp16(static_cast<float>((static_cast<double>(mx) - mn) / 15.0));
    const uint16_t bias_bits = Fp32ToFp16(mn);
    StoreU16(scales + 2 * g, scale_bits);
    StoreU16(biases + 2 * g, bias_bits);
    const float scale = Fp16ToFp32(scale_bits), bias = Fp16ToFp32(bias_bits);
    uint32_t q[kBlock] = {};
    if (scale != 0.0f) {
      for (uint32_t j = 0; j < kBlock; ++j) {
        q[j] = static_cast<uint32_t>(static_cast<int32_t>(Code((v[j] - bias) / scale, 15.0f)));
      }
    }
    // Value j of the row is bits 4·(j mod 8) of u32 word j / 8.
    for (uint32_t w = 0; w < kBlock / 8; ++w) {
      uint32_t word = 0;
      for (uint32_t k = 0; k < 8; ++k) word |= q[8 * w + k] << (4 * k);
      StoreU32(codes + 4 * (g * (kBlock / 8) + w), word);
    }
  }
}

}  // namespace

std::string_view TierName(Tier tier) {
  switch (tier) {
    case Tier::kInt8:
      return "int8";
    case Tier::kFp16:
      return "fp16";
    case Tier::kFp8:
      return "fp8";
    case Tier::kMlx4g32:
      return "mlx4g32";
    case Tier::kFp32:
      return "fp32";
    case Tier::kBf16:
      return "bf16";
  }
  return "?";
}

std::optional<Tier> ParseTier(std::string_view name) {
  for (Tier t : {Tier::kFp32, Tier::kFp16, Tier::kBf16, Tier::kInt8, Tier::kFp8, Tier::kMlx4g32}) {
    if (EqualsIgnoreCase(name, TierName(t))) return t;
  }
  return std::nullopt;
}

std::optional<Tier> TierFromCode(uint32_t code) {
  switch (code) {
    case 0:
    case 2:
    case 5:
    case 7:
    case 8:
    case 9:
      return static_cast<Tier>(code);
    default:
      return std::nullopt;
  }
}

std::optional<InputFormat> ParseInputFormat(std::string_view name) {
  if (EqualsIgnoreCase(name, "F32")) return InputFormat::kF32;
  if (EqualsIgnoreCase(name, "F16")) return InputFormat::kF16;
  if (EqualsIgnoreCase(name, "BF16")) return InputFormat::kBf16;
  return std::nullopt;
}

std::string_view InputFormatName(InputFormat format) {
  switch (format) {
    case InputFormat::kF32:
      return "F32";
    case InputFormat::kF16:
      return "F16";
    case InputFormat::kBf16:
      return "BF16";
  }
  return "?";
}

size_t InputElementBytes(InputFormat format) { return format == InputFormat::kF32 ? 4 : 2; }

size_t RowBytes(Tier tier, uint32_t dim) {
  const size_t d = dim;
  switch (tier) {
    case Tier::kFp32:
      return 4 * d;
    case Tier::kFp16:
    case Tier::kBf16:
      return 2 * d;
    case Tier::kInt8:
      return 8 + d;
    case Tier::kFp8:
      return d / kBlock * (2 + kBlock);
    case Tier::kMlx4g32:
      return d / 2 + d / 8;
  }
  return 0;
}

std::string CheckDim(Tier tier, uint32_t dim) {
  if ((tier == Tier::kFp8 || tier == Tier::kMlx4g32) && dim % kBlock != 0) {
    return "VQUANT " + std::string(TierName(tier)) +
           " needs value_dim to be a multiple of 32 (got " + std::to_string(dim) + ")";
  }
  return {};
}

bool StoresValues(Tier tier) {
  return tier == Tier::kFp32 || tier == Tier::kFp16 || tier == Tier::kBf16;
}

std::string EncodeRows(Tier tier, uint32_t dim, InputFormat format, const uint8_t* in, size_t rows,
                       uint8_t* out) {
  const size_t n = rows * dim;
  const size_t in_size = InputElementBytes(format);
  switch (tier) {
    case Tier::kFp32:
      if (format == InputFormat::kF32) {
        std::memcpy(out, in, n * 4);
      } else {
        ConvertElements(in, in_size, out, 4, n, [format](const uint8_t* i, uint8_t* o) {
          const uint16_t h = LoadU16(i);
          StoreF32(o, format == InputFormat::kF16 ? Fp16ToFp32(h) : Bf16ToFp32(h));
        });
      }
      return {};
    case Tier::kFp16:
      if (format == InputFormat::kF16) {
        std::memcpy(out, in, n * 2);
      } else if (format == InputFormat::kF32) {
        Fp32ToFp16Bulk(in, out, n);
      } else {
        ConvertElements(in, 2, out, 2, n, [](const uint8_t* i, uint8_t* o) {
          StoreU16(o, Fp32ToFp16(Bf16ToFp32(LoadU16(i))));
        });
      }
      return {};
    case Tier::kBf16:
      if (format == InputFormat::kBf16) {
        std::memcpy(out, in, n * 2);
      } else if (format == InputFormat::kF32) {
        ConvertElements(in, 4, out, 2, n,
                        [](const uint8_t* i, uint8_t* o) { StoreU16(o, Fp32ToBf16(LoadF32(i))); });
      } else {
        ConvertElements(in, 2, out, 2, n, [](const uint8_t* i, uint8_t* o) {
          StoreU16(o, Fp32ToBf16(Fp16ToFp32(LoadU16(i))));
        });
      }
      return {};
    case Tier::kInt8:
    case Tier::kFp8:
    case Tier::kMlx4g32:
      break;
  }
  std::vector<float> row(dim);
  const size_t row_bytes = RowBytes(tier, dim);
  // Magnitudes whose bit patterns are at or above this refuse the row.
  const uint32_t refuse =
      tier == Tier::kMlx4g32 ? std::bit_cast<uint32_t>(kFp16Max) + 1 : 0x7f800000u;
  for (size_t r = 0; r < rows; ++r) {
    InputRowToFp32(format, in + r * dim * in_size, dim, row.data());
    // One branch-free pass (it vectorises); the offender is looked for only when there is one.
    uint32_t worst = 0;
    for (uint32_t j = 0; j < dim; ++j) {
      worst = std::max(worst, std::bit_cast<uint32_t>(row[j]) & 0x7fffffffu);
    }
    for (uint32_t j = 0; worst >= refuse && j < dim; ++j) {
      if (!std::isfinite(row[j])) {
        return "row " + std::to_string(r) + " value " + std::to_string(j) +
               " is NaN or infinite; VQUANT " + std::string(TierName(tier)) +
               " stores finite values only";
      }
      if (tier == Tier::kMlx4g32 && std::fabs(row[j]) > kFp16Max) {
        return "row " + std::to_string(r) + " value " + std::to_string(j) + " (" +
               std::to_string(row[j]) + ") is beyond mlx4g32's fp16 scale and bias (|v| <= 65504)";
      }
    }
    uint8_t* dst = out + r * row_bytes;
    if (tier == Tier::kInt8) {
      EncodeInt8Row(row.data(), dim, dst);
    } else if (tier == Tier::kFp8) {
      EncodeFp8Row(row.data(), dim, dst);
    } else {
      EncodeMlx4Row(row.data(), dim, dst);
    }
  }
  return {};
}

void DecodeRows(Tier tier, uint32_t dim, const uint8_t* in, size_t rows, float* out) {
  const size_t n = rows * dim;
  switch (tier) {
    case Tier::kFp32:
      std::memcpy(out, in, n * 4);
      return;
    case Tier::kFp16:
      Fp16ToFp32Bulk(in, out, n);
      return;
    case Tier::kBf16:
      for (size_t i = 0; i < n; ++i) out[i] = Bf16ToFp32(LoadU16(in + 2 * i));
      return;
    case Tier::kInt8:
      for (size_t r = 0; r < rows; ++r, in += 8 + dim, out += dim) {
        const float scale = LoadF32(in), mn = LoadF32(in + 4);
        for (uint32_t j = 0; j < dim; ++j) out[j] = mn + static_cast<float>(in[8 + j]) * scale;
      }
      return;
    case Tier::kFp8: {
      const auto& table = E4m3Table();
      for (size_t r = 0; r < rows; ++r) {
        for (uint32_t b = 0; b < dim / kBlock; ++b, in += 2 + kBlock, out += kBlock) {
          const float scale = Bf16ToFp32(LoadU16(in));
          for (uint32_t j = 0; j < kBlock; ++j) out[j] = table[in[2 + j]] * scale;
        }
      }
      return;
    }
    case Tier::kMlx4g32: {
      const size_t row_bytes = RowBytes(tier, dim);
      for (size_t r = 0; r < rows; ++r, in += row_bytes, out += dim) {
        const uint8_t* scales = in + dim / 2;
        const uint8_t* biases = scales + dim / 16;
        for (uint32_t g = 0; g < dim / kBlock; ++g) {
          const float scale = Fp16ToFp32(LoadU16(scales + 2 * g));
          const float bias = Fp16ToFp32(LoadU16(biases + 2 * g));
          for (uint32_t j = 0; j < kBlock; ++j) {
            const uint32_t element = g * kBlock + j;
            const uint32_t code = (LoadU32(in + 4 * (element / 8)) >> (4 * (element % 8))) & 15u;
            out[element] = static_cast<float>(code) * scale + bias;
          }
        }
      }
      return;
    }
  }
}

uint8_t Fp32ToE4m3(float value) { return E4m3FromFloat(value); }

float E4m3ToFp32(uint8_t code) { return E4m3Table()[code]; }

}  // namespace prefixd::store
