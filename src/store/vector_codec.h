// VectorCodec: the V-store's storage tiers: how one row (token) of `dim` values is laid out in
// each tier and the conversions from client input (fp32, fp16, bf16) to stored rows and from
// stored rows back to fp32. docs/vstore-tiers.md specifies every byte. Pure functions: any thread.
//
// Every encoder is deterministic (integer rounding or correctly rounded float operations in a
// fixed order, no FMA contraction, no table built at run time from the FPU state), and every
// scale lives inside its row, so encoding one batch never depends on, or changes, another.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace prefixd::store {

// The numbers are the stored tier codes (log records, snapshots). Pion's codes are kept where
// Pion has the tier (int8 0, fp16 2, fp8 5, mlx4g32 7); fp32 and bf16 are prefixd's.
enum class Tier : uint8_t {
  kInt8 = 0,     // per row: f32 scale, f32 min, dim × u8 (affine)
  kFp16 = 2,     // dim × IEEE binary16
  kFp8 = 5,      // per 32-block: bf16 scale, 32 × e4m3fn
  kMlx4g32 = 7,  // MLX affine int4, group 32: u32 codes, fp16 scales, fp16 biases
  kFp32 = 8,     // dim × IEEE binary32
  kBf16 = 9,     // dim × bfloat16
};

// How a client sends rows (V.STOREBATCH ... FMT).
enum class InputFormat : uint8_t { kF32, kF16, kBf16 };

inline constexpr std::string_view kTierNames = "fp32|fp16|bf16|int8|fp8|mlx4g32";

std::string_view TierName(Tier tier);
// Case-insensitive; nullopt for an unknown name.
std::optional<Tier> ParseTier(std::string_view name);
std::optional<Tier> TierFromCode(uint32_t code);

// F32, F16 or BF16 (case-insensitive).
std::optional<InputFormat> ParseInputFormat(std::string_view name);
std::string_view InputFormatName(InputFormat format);
size_t InputElementBytes(InputFormat format);

// Bytes one row of `dim` values takes in `tier`.
size_t RowBytes(Tier tier, uint32_t dim);
// Empty when `tier` can store rows of `dim` values, else why not (fp8 and mlx4g32 need dim to be
// a multiple of their 32-value block).
std::string CheckDim(Tier tier, uint32_t dim);
// fp32, fp16 and bf16 rows are the values themselves: V.FETCH ... FMT NATIVE sends them as
// stored. The other tiers are decoded to fp32.
bool StoresValues(Tier tier);

// Encodes `rows` rows of `dim` input values (little-endian, `format`) from `in` into `out`,
// which must hold rows × RowBytes(tier, dim) bytes. Returns an error text, empty on success:
// quantized tiers refuse NaN and infinities (they have no code for them), and mlx4g32 refuses
// values its fp16 scale and bias cannot reach. `in` and `out` need no alignment.
std::string EncodeRows(Tier tier, uint32_t dim, InputFormat format, const uint8_t* in, size_t rows,
                       uint8_t* out);

// Decodes `rows` stored rows from `in` into rows × dim floats at `out`. All-zero row bytes decode
// to zeros in every tier.
void DecodeRows(Tier tier, uint32_t dim, const uint8_t* in, size_t rows, float* out);

// e4m3fn (no infinities, NaN = S.1111.111) conversions, exposed for tests. Encoding rounds to
// nearest even and saturates at ±448.
uint8_t Fp32ToE4m3(float value);
float E4m3ToFp32(uint8_t code);

}  // namespace prefixd::store
