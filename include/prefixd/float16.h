// Bit-exact conversions between fp32 and the two 16-bit float formats (IEEE binary16 "fp16" and
// bfloat16), shared by the state-blob codec and the V-store. Pure functions: any thread.
//
// Narrowing rounds to nearest, ties to even, in integer arithmetic, so the result never depends
// on the FPU rounding mode or on flush-to-zero. NaN stays NaN with its sign and the top payload
// bits; it is quietened only when those bits are all zero (they would otherwise read as Inf).
// A signalling NaN is therefore not quietened, and widening then narrowing is the identity on
// all 65,536 patterns of either format.
#pragma once

#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>

namespace prefixd {

// fp16 -> fp32; exact (every fp16 value, subnormals included, is an fp32 value).
constexpr float Fp16ToFp32(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1f) {  // Inf or NaN: the payload moves to the top of the fp32 mantissa
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent != 0) {  // normal: rebias 15 -> 127
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  }
  if (mantissa == 0) return std::bit_cast<float>(sign);
  // Subnormal m * 2^-24: shift the leading one up to the implicit bit position.
  const int shift = std::countl_zero(mantissa) - 21;  // 1..10
  mantissa = (mantissa << shift) & 0x3ffu;
  return std::bit_cast<float>(sign | (static_cast<uint32_t>(113 - shift) << 23) | (mantissa << 13));
}

// fp32 -> fp16, round to nearest even; overflow gives ±Inf, underflow ±0 or a subnormal.
constexpr uint16_t Fp32ToFp16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {  // NaN
    uint32_t payload = (magnitude >> 13) & 0x3ffu;
    if (payload == 0) payload = 0x200u;
    return static_cast<uint16_t>(sign | 0x7c00u | payload);
  }
  // 65520 = 0x477ff000 is the midpoint between 65504 (max fp16, odd mantissa) and 2^16: it and
  // everything above rounds to Inf, as does Inf itself.
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude >= 0x38800000u) {  // fp16 normal range, 2^-14 and up
    // Rebias the exponent (127 -> 15) and round: add just under half an ulp, plus the lsb
    // of the kept part so an exact tie goes to even. A carry out of the mantissa bumps the
    // exponent, which is the correct result.
    const uint32_t lsb = (magnitude >> 13) & 1u;
    const uint32_t rounded = magnitude - 0x38000000u + 0xfffu + lsb;
    return static_cast<uint16_t>(sign | (rounded >> 13));
  }
  // fp16 subnormal range: the result is round(value / 2^-24). Anything at or below 2^-25
  // (biased fp32 exponent < 102, or exactly 2^-25, a tie to even 0) becomes zero.
  const uint32_t exponent = magnitude >> 23;
  if (exponent < 102) return static_cast<uint16_t>(sign);
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;  // value = s * 2^(e-150)
  const uint32_t shift = 126 - exponent;                             // 14..24
  uint32_t result = significand >> shift;
  const uint32_t remainder = significand & ((1u << shift) - 1);
  const uint32_t half_way = 1u << (shift - 1);
  if (remainder > half_way || (remainder == half_way && (result & 1u))) ++result;
  return static_cast<uint16_t>(sign | result);  // 0x400 after a carry is the smallest normal
}

// bf16 -> fp32; exact (bf16 is the top half of an fp32).
constexpr float Bf16ToFp32(uint16_t bf16) {
  return std::bit_cast<float>(static_cast<uint32_t>(bf16) << 16);
}

// fp32 -> bf16, round to nearest even; overflow gives ±Inf. A value widened from bf16 comes
// back unchanged.
constexpr uint16_t Fp32ToBf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: truncate, keeping it a NaN
    uint16_t top = static_cast<uint16_t>(bits >> 16);
    if ((top & 0x7fu) == 0) top |= 0x40u;
    return top;
  }
  const uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7fffu + lsb) >> 16);
}

// Span forms. `out` must have exactly as many elements as `in`.
inline void ConvertFp32ToFp16(std::span<const float> in, std::span<uint16_t> out) {
  assert(in.size() == out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = Fp32ToFp16(in[i]);
}
inline void ConvertFp16ToFp32(std::span<const uint16_t> in, std::span<float> out) {
  assert(in.size() == out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = Fp16ToFp32(in[i]);
}
inline void ConvertFp32ToBf16(std::span<const float> in, std::span<uint16_t> out) {
  assert(in.size() == out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = Fp32ToBf16(in[i]);
}
inline void ConvertBf16ToFp32(std::span<const uint16_t> in, std::span<float> out) {
  assert(in.size() == out.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = Bf16ToFp32(in[i]);
}

}  // namespace prefixd
