// The reference state-blob codec, format version 1 (docs: design.md §3): the typed n-d arrays of
// one layer's recurrent state in one little-endian byte string, the blob that SSM.PREFIX.STORE
// keeps. Pure functions over caller-owned memory: any thread.
//
// Layout, every integer a little-endian u32:
//   version (= 1), n_arrays,
//   then per array: ndim, shape[ndim], dtype_code, and the element data, row-major.
// dtype_code 0 = fp32 (4 bytes per element), 1 = fp16 (2 bytes), 2 = bf16, which is stored
// widened to fp32 (4 bytes, losslessly) for compatibility with Pion's writers.
//
// ndim = 0 is a scalar: one element. There is no "absent array" in v1. Pion writes a None slot
// as four zero u32s, which this layout reads as a 0-d fp32 scalar 0.0 followed by the first u32
// of the next array, so no local rule can tell the two apart; the decoder does not guess and
// such a blob is rejected (usually as trailing bytes). Write a missing slot as an empty array
// (ndim 1, shape [0]) instead: it is unambiguous and costs 12 bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "prefixd/status.h"

namespace prefixd {

enum class DType : uint32_t {
  kFloat32 = 0,
  kFloat16 = 1,
  kBFloat16 = 2,
};

inline constexpr uint32_t kStateBlobVersion = 1;
// numpy's historical limit; any real state has at most 4 or 5.
inline constexpr uint32_t kMaxStateArrayDims = 32;

// Bytes per element in the caller's own representation: 4, 2, 2.
constexpr size_t NativeElementSize(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }
// Bytes per element inside a blob: 4, 2, 4 (bf16 is widened to fp32).
constexpr size_t StoredElementSize(DType dtype) { return dtype == DType::kFloat16 ? 2 : 4; }
std::string_view DTypeName(DType dtype);  // "fp32", "fp16", "bf16"

// Elements in an array of this shape (1 for a scalar), or an error when the product does not
// fit in 64 bits. A shape with a zero dimension holds zero elements whatever the others are.
Result<uint64_t> ShapeElementCount(std::span<const uint32_t> shape);

// One array to encode. `bytes` holds the elements in the caller's native representation,
// little-endian and row-major: fp32, fp16, or raw bf16 (2 bytes each, which the encoder widens).
// It is only borrowed for the duration of the call.
struct StateArray {
  DType dtype = DType::kFloat32;
  std::vector<uint32_t> shape;  // empty: a scalar
  std::span<const uint8_t> bytes;
};

// One decoded array. `bytes` points into the decoded blob (no copy), which must outlive the view,
// and holds the stored representation: fp32 for kFloat32 and kBFloat16, fp16 for kFloat16. Its
// alignment is whatever the blob gives (4 bytes into an aligned blob unless an earlier fp16 array
// has an odd element count), so read elements with memcpy or the Copy* helpers below.
struct StateArrayView {
  DType dtype = DType::kFloat32;
  std::vector<uint32_t> shape;
  std::span<const uint8_t> bytes;

  uint64_t element_count() const { return bytes.size() / StoredElementSize(dtype); }
};

// Size of the blob EncodeStateBlob would produce; InvalidArgument when an array is inconsistent
// (unknown dtype, too many dims, bytes.size() not element count × native element size).
Result<size_t> EncodedStateBlobSize(std::span<const StateArray> arrays);

// Encodes into `out`, which needs at least EncodedStateBlobSize() bytes; returns the bytes written.
Result<size_t> EncodeStateBlobInto(std::span<const StateArray> arrays, std::span<uint8_t> out);

// Encodes into a new buffer.
Result<std::vector<uint8_t>> EncodeStateBlob(std::span<const StateArray> arrays);

// Parses a blob, checking every length against the buffer before reading it: header, version,
// n_arrays, ndim (at most kMaxStateArrayDims), each shape, dtype_code, the element count
// (overflow-safe) and data size, and that nothing trails the last array. A malformed blob gives
// Corruption with a message naming what is wrong and its byte offset.
Result<std::vector<StateArrayView>> DecodeStateBlob(std::span<const uint8_t> blob);

// Writes a decoded array back in the native representation the encoder took, the exact inverse
// of encoding. fp32 and fp16 are copied; bf16 is narrowed from its fp32 form, which is exact for
// any value the encoder widened: an element with nonzero low 16 bits was not, and gives
// Corruption. `out` must be element_count() × NativeElementSize() bytes.
Status CopyNative(const StateArrayView& array, std::span<uint8_t> out);

// Writes a decoded array as fp32 (fp16 and bf16 widen exactly). `out` must have element_count()
// elements.
Status CopyAsFp32(const StateArrayView& array, std::span<float> out);

}  // namespace prefixd
