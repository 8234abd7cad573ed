#include "prefixd/state_blob.h"

#include <bit>
#include <cstring>
#include <limits>
#include <string>

#include "prefixd/float16.h"

namespace prefixd {
namespace {

// Element data is copied with memcpy as fp32/fp16 host values; only the header fields are
// assembled byte by byte.
static_assert(std::endian::native == std::endian::little,
              "the state-blob codec assumes a little-endian host");

bool IsKnownDType(uint32_t code) { return code <= static_cast<uint32_t>(DType::kBFloat16); }

uint32_t LoadU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

uint8_t* StoreU32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v >> 16);
  p[3] = static_cast<uint8_t>(v >> 24);
  return p + 4;
}

std::string HexU32(uint32_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out = "0x00000000";
  for (int i = 9; i >= 2; --i, v >>= 4) out[i] = kDigits[v & 0xf];
  return out;
}

std::string ShapeString(std::span<const uint32_t> shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  out += "]";
  return out;
}

Status Malformed(size_t offset, const std::string& what) {
  return Status::Corruption("malformed state blob at offset " + std::to_string(offset) + ": " +
                            what);
}

// Stored size of one array (header + data) and its data size, after validating it.
struct ArrayLayout {
  size_t header_bytes = 0;
  size_t data_bytes = 0;
};

Result<ArrayLayout> LayoutOf(const StateArray& array, size_t index) {
  const std::string where = "array " + std::to_string(index) + ": ";
  if (!IsKnownDType(static_cast<uint32_t>(array.dtype))) {
    return Status::InvalidArgument(where + "unknown dtype " +
                                   std::to_string(static_cast<uint32_t>(array.dtype)));
  }
  if (array.shape.size() > kMaxStateArrayDims) {
    return Status::InvalidArgument(where + std::to_string(array.shape.size()) +
                                   " dims exceed the limit of " +
                                   std::to_string(kMaxStateArrayDims));
  }
  auto count = ShapeElementCount(array.shape);
  if (!count.ok()) return Status::InvalidArgument(where + count.status().message());
  uint64_t native_bytes = 0;
  uint64_t stored_bytes = 0;
  if (__builtin_mul_overflow(*count, NativeElementSize(array.dtype), &native_bytes) ||
      __builtin_mul_overflow(*count, StoredElementSize(array.dtype), &stored_bytes) ||
      stored_bytes > std::numeric_limits<size_t>::max() / 2) {
    return Status::InvalidArgument(where + "shape " + ShapeString(array.shape) + " is too large");
  }
  if (array.bytes.size() != native_bytes) {
    return Status::InvalidArgument(where + "shape " + ShapeString(array.shape) + " of " +
                                   std::string(DTypeName(array.dtype)) + " needs " +
                                   std::to_string(native_bytes) + " bytes, got " +
                                   std::to_string(array.bytes.size()));
  }
  return ArrayLayout{.header_bytes = 8 + 4 * array.shape.size(),
                     .data_bytes = static_cast<size_t>(stored_bytes)};
}

}  // namespace

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "fp32";
    case DType::kFloat16:
      return "fp16";
    case DType::kBFloat16:
      return "bf16";
  }
  return "unknown";
}

Result<uint64_t> ShapeElementCount(std::span<const uint32_t> shape) {
  for (uint32_t dim : shape) {
    if (dim == 0) return uint64_t{0};
  }
  uint64_t count = 1;
  for (uint32_t dim : shape) {
    if (__builtin_mul_overflow(count, uint64_t{dim}, &count)) {
      return Status::OutOfRange("element count of shape " + ShapeString(shape) +
                                " overflows 64 bits");
    }
  }
  return count;
}

Result<size_t> EncodedStateBlobSize(std::span<const StateArray> arrays) {
  if (arrays.size() > std::numeric_limits<uint32_t>::max()) {
    return Status::InvalidArgument("too many arrays for a u32 n_arrays");
  }
  size_t total = 8;
  for (size_t i = 0; i < arrays.size(); ++i) {
    PREFIXD_ASSIGN_OR_RETURN(ArrayLayout layout, LayoutOf(arrays[i], i));
    if (__builtin_add_overflow(total, layout.header_bytes + layout.data_bytes, &total)) {
      return Status::InvalidArgument("state blob size overflows size_t");
    }
  }
  return total;
}

Result<size_t> EncodeStateBlobInto(std::span<const StateArray> arrays, std::span<uint8_t> out) {
  PREFIXD_ASSIGN_OR_RETURN(size_t total, EncodedStateBlobSize(arrays));
  if (out.size() < total) {
    return Status::OutOfRange("state blob needs " + std::to_string(total) +
                              " bytes, the buffer has " + std::to_string(out.size()));
  }
  uint8_t* p = out.data();
  p = StoreU32(p, kStateBlobVersion);
  p = StoreU32(p, static_cast<uint32_t>(arrays.size()));
  for (const StateArray& array : arrays) {
    p = StoreU32(p, static_cast<uint32_t>(array.shape.size()));
    for (uint32_t dim : array.shape) p = StoreU32(p, dim);
    p = StoreU32(p, static_cast<uint32_t>(array.dtype));
    if (array.bytes.empty()) continue;
    if (array.dtype == DType::kBFloat16) {
      // Widen: a bf16 is the top half of the fp32 with the same value.
      const size_t n = array.bytes.size() / 2;
      const uint8_t* in = array.bytes.data();
      for (size_t i = 0; i < n; ++i, in += 2, p += 4) {
        p[0] = 0;
        p[1] = 0;
        p[2] = in[0];
        p[3] = in[1];
      }
    } else {
      std::memcpy(p, array.bytes.data(), array.bytes.size());
      p += array.bytes.size();
    }
  }
  return total;
}

Result<std::vector<uint8_t>> EncodeStateBlob(std::span<const StateArray> arrays) {
  PREFIXD_ASSIGN_OR_RETURN(size_t total, EncodedStateBlobSize(arrays));
  std::vector<uint8_t> blob(total);
  PREFIXD_ASSIGN_OR_RETURN(size_t written, EncodeStateBlobInto(arrays, blob));
  if (written != total) return Status::Internal("state blob size changed while encoding");
  return blob;
}

Result<std::vector<StateArrayView>> DecodeStateBlob(std::span<const uint8_t> blob) {
  const uint8_t* base = blob.data();
  const size_t size = blob.size();
  size_t pos = 0;
  // Reads the u32 at `pos` named `what`, or fails naming it and what is left.
  auto read_u32 = [&](const std::string& what, uint32_t* value) -> Status {
    if (size - pos < 4) {
      return Malformed(
          pos, "truncated " + what + ": needs 4 bytes, " + std::to_string(size - pos) + " left");
    }
    *value = LoadU32(base + pos);
    pos += 4;
    return Status::Ok();
  };

  uint32_t version = 0;
  uint32_t n_arrays = 0;
  PREFIXD_RETURN_IF_ERROR(read_u32("header (version)", &version));
  if (version != kStateBlobVersion) {
    return Malformed(0, "unsupported version " + std::to_string(version) + " (expected " +
                            std::to_string(kStateBlobVersion) + ")");
  }
  PREFIXD_RETURN_IF_ERROR(read_u32("header (n_arrays)", &n_arrays));
  // The smallest array (0-d fp16) takes 10 bytes; checking before reserving keeps a forged
  // count from allocating.
  if (n_arrays > (size - pos) / 10) {
    return Malformed(4, "n_arrays " + std::to_string(n_arrays) + " cannot fit in the " +
                            std::to_string(size - pos) + " bytes that follow");
  }

  std::vector<StateArrayView> arrays;
  arrays.reserve(n_arrays);
  for (uint32_t i = 0; i < n_arrays; ++i) {
    const std::string name = "array " + std::to_string(i);
    const size_t array_offset = pos;
    uint32_t ndim = 0;
    PREFIXD_RETURN_IF_ERROR(read_u32(name + " ndim", &ndim));
    if (ndim > kMaxStateArrayDims) {
      return Malformed(array_offset, name + " has ndim " + std::to_string(ndim) +
                                         ", over the limit of " +
                                         std::to_string(kMaxStateArrayDims));
    }
    StateArrayView view;
    view.shape.resize(ndim);
    for (uint32_t d = 0; d < ndim; ++d) {
      PREFIXD_RETURN_IF_ERROR(read_u32(name + " shape[" + std::to_string(d) + "]", &view.shape[d]));
    }
    const size_t dtype_offset = pos;
    uint32_t dtype_code = 0;
    PREFIXD_RETURN_IF_ERROR(read_u32(name + " dtype_code", &dtype_code));
    if (!IsKnownDType(dtype_code)) {
      return Malformed(dtype_offset, name + " has unknown dtype_code " +
                                         std::to_string(dtype_code) +
                                         " (0 = fp32, 1 = fp16, 2 = bf16)");
    }
    view.dtype = static_cast<DType>(dtype_code);
    auto count = ShapeElementCount(view.shape);
    if (!count.ok()) return Malformed(array_offset, name + ": " + count.status().message());
    const uint64_t element_size = StoredElementSize(view.dtype);
    const uint64_t left = size - pos;
    // count * element_size <= left, phrased so it cannot overflow.
    if (*count > left / element_size) {
      return Malformed(pos, name + " data is truncated: shape " + ShapeString(view.shape) + " of " +
                                std::string(DTypeName(view.dtype)) + " needs " +
                                (*count > std::numeric_limits<uint64_t>::max() / element_size
                                     ? std::string("more than 2^64")
                                     : std::to_string(*count * element_size)) +
                                " bytes, " + std::to_string(left) + " left");
    }
    const size_t data_bytes = static_cast<size_t>(*count * element_size);
    view.bytes = blob.subspan(pos, data_bytes);
    pos += data_bytes;
    arrays.push_back(std::move(view));
  }
  if (pos != size) {
    return Malformed(pos, std::to_string(size - pos) + " trailing bytes after the last of " +
                              std::to_string(n_arrays) + " arrays");
  }
  return arrays;
}

Status CopyNative(const StateArrayView& array, std::span<uint8_t> out) {
  const uint64_t count = array.element_count();
  const uint64_t want = count * NativeElementSize(array.dtype);
  if (out.size() != want) {
    return Status::InvalidArgument("CopyNative: the " + std::string(DTypeName(array.dtype)) +
                                   " array needs " + std::to_string(want) +
                                   " bytes, the buffer has " + std::to_string(out.size()));
  }
  if (array.dtype != DType::kBFloat16) {
    if (want > 0) std::memcpy(out.data(), array.bytes.data(), want);
    return Status::Ok();
  }
  const uint8_t* in = array.bytes.data();
  uint8_t* p = out.data();
  for (uint64_t i = 0; i < count; ++i, in += 4, p += 2) {
    if (in[0] != 0 || in[1] != 0) {
      return Status::Corruption("bf16 element " + std::to_string(i) + " has fp32 bits " +
                                HexU32(LoadU32(in)) +
                                ", whose low 16 bits are not zero: it is not a widened bf16");
    }
    p[0] = in[2];
    p[1] = in[3];
  }
  return Status::Ok();
}

Status CopyAsFp32(const StateArrayView& array, std::span<float> out) {
  const uint64_t count = array.element_count();
  if (out.size() != count) {
    return Status::InvalidArgument("CopyAsFp32: the array has " + std::to_string(count) +
                                   " elements, the buffer " + std::to_string(out.size()));
  }
  if (count == 0) return Status::Ok();
  if (array.dtype != DType::kFloat16) {  // fp32, or bf16 stored as fp32
    std::memcpy(out.data(), array.bytes.data(), count * 4);
    return Status::Ok();
  }
  const uint8_t* in = array.bytes.data();
  for (uint64_t i = 0; i < count; ++i, in += 2) {
    out[i] = Fp16ToFp32(static_cast<uint16_t>(in[0] | in[1] << 8));
  }
  return Status::Ok();
}

}  // namespace prefixd
