// Tests for the state-blob codec (prefixd/state_blob.h) and the fp16/bf16 conversions
// (prefixd/float16.h): model-shaped round trips, the exact byte layout, every malformed-blob
// rejection, and bit-exact rounding against independent oracles.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "prefixd/float16.h"
#include "prefixd/state_blob.h"

namespace prefixd {
namespace {

// ---------------------------------------------------------------------------------------------
// Helpers

float FromBits(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t ToBits(float value) { return std::bit_cast<uint32_t>(value); }

void PutU32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

std::vector<uint8_t> Words(std::initializer_list<uint32_t> words) {
  std::vector<uint8_t> out;
  for (uint32_t w : words) PutU32(out, w);
  return out;
}

// Native bytes for an array: arbitrary bit patterns (NaNs, subnormals, Inf included), since the
// codec must carry any bits exactly.
std::vector<uint8_t> RandomNative(DType dtype, const std::vector<uint32_t>& shape, uint32_t seed) {
  uint64_t count = *ShapeElementCount(shape);
  std::vector<uint8_t> bytes(count * NativeElementSize(dtype));
  std::mt19937 rng(seed);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

struct OwnedArray {
  DType dtype;
  std::vector<uint32_t> shape;
  std::vector<uint8_t> bytes;
};

// Encodes, decodes, and checks every array comes back with the same dtype, shape and bits.
void ExpectRoundTrip(const std::vector<OwnedArray>& owned) {
  std::vector<StateArray> arrays;
  for (const auto& a : owned) arrays.push_back({a.dtype, a.shape, a.bytes});

  auto size = EncodedStateBlobSize(arrays);
  ASSERT_TRUE(size.ok()) << size.status().ToString();
  auto blob = EncodeStateBlob(arrays);
  ASSERT_TRUE(blob.ok()) << blob.status().ToString();
  ASSERT_EQ(blob->size(), *size);

  auto views = DecodeStateBlob(*blob);
  ASSERT_TRUE(views.ok()) << views.status().ToString();
  ASSERT_EQ(views->size(), owned.size());
  for (size_t i = 0; i < owned.size(); ++i) {
    const StateArrayView& v = (*views)[i];
    SCOPED_TRACE("array " + std::to_string(i));
    EXPECT_EQ(v.dtype, owned[i].dtype);
    EXPECT_EQ(v.shape, owned[i].shape);
    EXPECT_EQ(v.element_count(), *ShapeElementCount(owned[i].shape));
    // Zero copy: the view lies inside the blob.
    if (!v.bytes.empty()) {
      EXPECT_GE(v.bytes.data(), blob->data());
      EXPECT_LE(v.bytes.data() + v.bytes.size(), blob->data() + blob->size());
    }
    std::vector<uint8_t> native(owned[i].bytes.size());
    Status st = CopyNative(v, native);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(native == owned[i].bytes) << "native bytes differ";

    std::vector<float> as_fp32(v.element_count());
    ASSERT_TRUE(CopyAsFp32(v, as_fp32).ok());
    for (size_t e = 0; e < as_fp32.size(); ++e) {
      uint32_t expected = 0;
      if (v.dtype == DType::kFloat32) {
        std::memcpy(&expected, owned[i].bytes.data() + 4 * e, 4);
      } else {
        uint16_t h = static_cast<uint16_t>(owned[i].bytes[2 * e] | owned[i].bytes[2 * e + 1] << 8);
        expected = ToBits(v.dtype == DType::kFloat16 ? Fp16ToFp32(h) : Bf16ToFp32(h));
      }
      ASSERT_EQ(ToBits(as_fp32[e]), expected) << "element " << e;
    }
  }
}

Status DecodeStatus(const std::vector<uint8_t>& blob) { return DecodeStateBlob(blob).status(); }

// ---------------------------------------------------------------------------------------------
// Round trips of real model layouts

TEST(StateBlobTest, MambaFp32) {
  ExpectRoundTrip(
      {{DType::kFloat32, {1, 3, 1536}, RandomNative(DType::kFloat32, {1, 3, 1536}, 1)},
       {DType::kFloat32, {1, 1536, 16}, RandomNative(DType::kFloat32, {1, 1536, 16}, 2)}});
}

TEST(StateBlobTest, MambaFp16ConvState) {
  ExpectRoundTrip(
      {{DType::kFloat16, {1, 3, 1536}, RandomNative(DType::kFloat16, {1, 3, 1536}, 3)},
       {DType::kFloat32, {1, 1536, 16}, RandomNative(DType::kFloat32, {1, 1536, 16}, 4)}});
}

TEST(StateBlobTest, GatedDeltaNet) {
  ExpectRoundTrip(
      {{DType::kFloat32, {1, 3, 6144}, RandomNative(DType::kFloat32, {1, 3, 6144}, 5)},
       {DType::kFloat32, {1, 16, 128, 128}, RandomNative(DType::kFloat32, {1, 16, 128, 128}, 6)}});
}

TEST(StateBlobTest, GatedDeltaNetBf16ConvState) {
  ExpectRoundTrip(
      {{DType::kBFloat16, {1, 3, 6144}, RandomNative(DType::kBFloat16, {1, 3, 6144}, 7)},
       {DType::kFloat32, {1, 16, 128, 128}, RandomNative(DType::kFloat32, {1, 16, 128, 128}, 8)}});
}

TEST(StateBlobTest, Rwkv7) {
  ExpectRoundTrip({{DType::kFloat32, {2048}, RandomNative(DType::kFloat32, {2048}, 9)},
                   {DType::kFloat32, {32, 64, 64}, RandomNative(DType::kFloat32, {32, 64, 64}, 10)},
                   {DType::kFloat32, {2048}, RandomNative(DType::kFloat32, {2048}, 11)}});
}

TEST(StateBlobTest, EachDtype) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(std::string(DTypeName(dtype)));
    ExpectRoundTrip({{dtype, {7, 5}, RandomNative(dtype, {7, 5}, 12)}});
  }
}

TEST(StateBlobTest, MixedDtypesWithOddFp16CountsStayExact) {
  // An odd fp16 count leaves later arrays 2-byte aligned; the views must still be exact.
  ExpectRoundTrip({{DType::kFloat16, {3}, RandomNative(DType::kFloat16, {3}, 13)},
                   {DType::kFloat32, {2, 2}, RandomNative(DType::kFloat32, {2, 2}, 14)},
                   {DType::kBFloat16, {5}, RandomNative(DType::kBFloat16, {5}, 15)},
                   {DType::kFloat16, {1}, RandomNative(DType::kFloat16, {1}, 16)}});
}

TEST(StateBlobTest, ScalarsAndEmptyArrays) {
  ExpectRoundTrip({{DType::kFloat32, {}, RandomNative(DType::kFloat32, {}, 17)},
                   {DType::kFloat16, {}, RandomNative(DType::kFloat16, {}, 18)},
                   {DType::kBFloat16, {}, RandomNative(DType::kBFloat16, {}, 19)},
                   {DType::kFloat32, {0}, {}},
                   {DType::kFloat16, {3, 0, 5}, {}},
                   {DType::kBFloat16, {0, 0}, {}}});
}

TEST(StateBlobTest, NoArrays) {
  auto blob = EncodeStateBlob(std::span<const StateArray>());
  ASSERT_TRUE(blob.ok());
  EXPECT_EQ(*blob, Words({1, 0}));
  auto views = DecodeStateBlob(*blob);
  ASSERT_TRUE(views.ok());
  EXPECT_TRUE(views->empty());
}

TEST(StateBlobTest, ExactByteLayout) {
  // fp16 [2] = {1.0, -2.0}, bf16 scalar = 1.5 (0x3fc0), fp32 [1] = 0.5.
  const std::vector<uint8_t> fp16 = {0x00, 0x3c, 0x00, 0xc0};
  const std::vector<uint8_t> bf16 = {0xc0, 0x3f};
  const std::vector<uint8_t> fp32 = {0x00, 0x00, 0x00, 0x3f};
  std::vector<StateArray> arrays = {
      {DType::kFloat16, {2}, fp16}, {DType::kBFloat16, {}, bf16}, {DType::kFloat32, {1}, fp32}};
  auto blob = EncodeStateBlob(arrays);
  ASSERT_TRUE(blob.ok());
  std::vector<uint8_t> expected = Words({1, 3, 1, 2, 1});
  expected.insert(expected.end(), fp16.begin(), fp16.end());
  std::vector<uint8_t> rest = Words({0, 2, 0x3fc00000, 1, 1, 0, 0x3f000000});
  expected.insert(expected.end(), rest.begin(), rest.end());
  EXPECT_EQ(*blob, expected);
}

TEST(StateBlobTest, EncodeIntoCallerBuffer) {
  const std::vector<uint8_t> data = RandomNative(DType::kFloat32, {4}, 20);
  std::vector<StateArray> arrays = {{DType::kFloat32, {4}, data}};
  std::vector<uint8_t> buffer(64, 0xee);
  auto written = EncodeStateBlobInto(arrays, buffer);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(*written, 8u + 12u + 16u);
  auto views = DecodeStateBlob(std::span<const uint8_t>(buffer).first(*written));
  ASSERT_TRUE(views.ok());
  EXPECT_EQ(views->at(0).bytes.data(), buffer.data() + 20);  // a view, not a copy

  std::vector<uint8_t> small(*written - 1);
  EXPECT_EQ(EncodeStateBlobInto(arrays, small).status().code(), StatusCode::kOutOfRange);
}

TEST(StateBlobTest, EncoderRejectsInconsistentArrays) {
  const std::vector<uint8_t> six(6);
  std::vector<StateArray> wrong_size = {{DType::kFloat32, {2}, six}};
  auto r = EncodeStateBlob(wrong_size);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("needs 8 bytes, got 6"), std::string::npos)
      << r.status().message();

  std::vector<StateArray> bad_dtype = {{static_cast<DType>(3), {3}, six}};
  EXPECT_EQ(EncodeStateBlob(bad_dtype).status().code(), StatusCode::kInvalidArgument);

  std::vector<StateArray> too_many_dims = {
      {DType::kFloat32, std::vector<uint32_t>(kMaxStateArrayDims + 1, 1), {}}};
  EXPECT_EQ(EncodeStateBlob(too_many_dims).status().code(), StatusCode::kInvalidArgument);

  std::vector<StateArray> overflow = {{DType::kFloat32, {0xffffffffu, 0xffffffffu, 2}, {}}};
  EXPECT_EQ(EncodeStateBlob(overflow).status().code(), StatusCode::kInvalidArgument);

  // bf16 input is native 2-byte elements, not pre-widened fp32.
  const std::vector<uint8_t> eight(8);
  std::vector<StateArray> bf16_widened = {{DType::kBFloat16, {4}, eight}};
  EXPECT_TRUE(EncodeStateBlob(bf16_widened).ok());
  std::vector<StateArray> bf16_as_fp32 = {{DType::kBFloat16, {2}, eight}};
  EXPECT_FALSE(EncodeStateBlob(bf16_as_fp32).ok());
}

TEST(StateBlobTest, MaxDimsAccepted) {
  std::vector<uint32_t> shape(kMaxStateArrayDims, 1);
  shape[0] = 2;
  ExpectRoundTrip({{DType::kFloat16, shape, RandomNative(DType::kFloat16, shape, 21)}});
}

TEST(StateBlobTest, CopyHelpersCheckSizes) {
  const std::vector<uint8_t> data = RandomNative(DType::kFloat16, {4}, 22);
  std::vector<StateArray> arrays = {{DType::kFloat16, {4}, data}};
  auto blob = EncodeStateBlob(arrays);
  ASSERT_TRUE(blob.ok());
  auto views = DecodeStateBlob(*blob);
  ASSERT_TRUE(views.ok());
  std::vector<uint8_t> wrong(7);
  EXPECT_EQ(CopyNative(views->at(0), wrong).code(), StatusCode::kInvalidArgument);
  std::vector<float> wrong_floats(3);
  EXPECT_EQ(CopyAsFp32(views->at(0), wrong_floats).code(), StatusCode::kInvalidArgument);
}

TEST(StateBlobTest, Bf16NarrowingRejectsValuesThatWereNotWidened) {
  // A bf16-tagged array whose fp32 has nonzero low bits did not come from a bf16.
  std::vector<uint8_t> blob = Words({1, 1, 1, 2, 2, 0x3f800000, 0x3f800001});
  auto views = DecodeStateBlob(blob);
  ASSERT_TRUE(views.ok()) << views.status().ToString();
  std::vector<uint8_t> native(4);
  Status st = CopyNative(views->at(0), native);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("element 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("0x3f800001"), std::string::npos) << st.message();
}

// ---------------------------------------------------------------------------------------------
// Malformed blobs

std::vector<uint8_t> SmallValidBlob() {
  static const std::vector<uint8_t> fp32 = RandomNative(DType::kFloat32, {2, 3}, 30);
  static const std::vector<uint8_t> fp16 = RandomNative(DType::kFloat16, {3}, 31);
  static const std::vector<uint8_t> bf16 = RandomNative(DType::kBFloat16, {}, 32);
  std::vector<StateArray> arrays = {
      {DType::kFloat32, {2, 3}, fp32}, {DType::kFloat16, {3}, fp16}, {DType::kBFloat16, {}, bf16}};
  return *EncodeStateBlob(arrays);
}

TEST(StateBlobMalformedTest, EveryTruncationIsRejected) {
  const std::vector<uint8_t> blob = SmallValidBlob();
  ASSERT_TRUE(DecodeStateBlob(blob).ok());
  for (size_t len = 0; len < blob.size(); ++len) {
    std::vector<uint8_t> cut(blob.begin(), blob.begin() + static_cast<ptrdiff_t>(len));
    Status st = DecodeStatus(cut);
    ASSERT_EQ(st.code(), StatusCode::kCorruption) << "length " << len;
    EXPECT_NE(st.message().find("at offset"), std::string::npos) << st.message();
  }
}

TEST(StateBlobMalformedTest, TruncationMessagesNameTheField) {
  const std::vector<uint8_t> blob = SmallValidBlob();
  auto cut = [&](size_t len) {
    return DecodeStatus(
               std::vector<uint8_t>(blob.begin(), blob.begin() + static_cast<ptrdiff_t>(len)))
        .message();
  };
  EXPECT_NE(cut(0).find("truncated header (version)"), std::string::npos) << cut(0);
  EXPECT_NE(cut(6).find("truncated header (n_arrays)"), std::string::npos) << cut(6);
  // n_arrays = 3 needs at least 30 more bytes.
  EXPECT_NE(cut(20).find("n_arrays 3 cannot fit"), std::string::npos) << cut(20);
  // Array 2 (bf16 scalar) starts at 8 + (16 + 24) + (12 + 6) = 66: ndim, dtype, 4 data bytes.
  EXPECT_NE(cut(68).find("array 2 ndim"), std::string::npos) << cut(68);
  EXPECT_NE(cut(72).find("array 2 dtype_code"), std::string::npos) << cut(72);
  EXPECT_NE(cut(76).find("offset 74: array 2 data is truncated"), std::string::npos) << cut(76);
  // Array 0's data is 24 bytes from offset 24.
  EXPECT_NE(cut(40).find("offset 24: array 0 data is truncated"), std::string::npos) << cut(40);
  EXPECT_NE(cut(40).find("needs 24 bytes"), std::string::npos) << cut(40);
}

TEST(StateBlobMalformedTest, BadVersion) {
  for (uint32_t version : {0u, 2u, 0xffffffffu}) {
    Status st = DecodeStatus(Words({version, 0}));
    EXPECT_EQ(st.code(), StatusCode::kCorruption);
    EXPECT_NE(st.message().find("offset 0: unsupported version " + std::to_string(version)),
              std::string::npos)
        << st.message();
  }
}

TEST(StateBlobMalformedTest, UnknownDtype) {
  for (uint32_t code : {3u, 7u, 0xffffffffu}) {
    Status st = DecodeStatus(Words({1, 1, 1, 1, code, 0}));
    EXPECT_EQ(st.code(), StatusCode::kCorruption);
    EXPECT_NE(
        st.message().find("offset 16: array 0 has unknown dtype_code " + std::to_string(code)),
        std::string::npos)
        << st.message();
  }
}

TEST(StateBlobMalformedTest, AbsurdNdim) {
  for (uint32_t ndim : {kMaxStateArrayDims + 1, 1000u, 0xffffffffu}) {
    std::vector<uint8_t> blob = Words({1, 1, ndim});
    blob.resize(blob.size() + 200, 0);
    Status st = DecodeStatus(blob);
    EXPECT_EQ(st.code(), StatusCode::kCorruption);
    EXPECT_NE(st.message().find("offset 8: array 0 has ndim " + std::to_string(ndim)),
              std::string::npos)
        << st.message();
  }
}

TEST(StateBlobMalformedTest, ShapeProductOverflow) {
  std::vector<uint8_t> blob = Words({1, 1, 3, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0});
  blob.resize(blob.size() + 64, 0);
  Status st = DecodeStatus(blob);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("overflows 64 bits"), std::string::npos) << st.message();

  // The count fits 64 bits but the byte size does not.
  blob = Words({1, 1, 2, 0xffffffffu, 0xffffffffu, 0});
  blob.resize(blob.size() + 64, 0);
  st = DecodeStatus(blob);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("more than 2^64"), std::string::npos) << st.message();

  // A zero dimension makes the array empty whatever the others are.
  blob = Words({1, 1, 4, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0, 0});
  auto views = DecodeStateBlob(blob);
  ASSERT_TRUE(views.ok()) << views.status().ToString();
  EXPECT_EQ(views->at(0).element_count(), 0u);
}

TEST(StateBlobMalformedTest, DataLongerThanBlob) {
  // [1000] fp32 needs 4000 bytes; 8 are there.
  Status st = DecodeStatus(Words({1, 1, 1, 1000, 0, 0, 0}));
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("offset 20: array 0 data is truncated: shape [1000] of fp32 needs "
                              "4000 bytes, 8 left"),
            std::string::npos)
      << st.message();
}

TEST(StateBlobMalformedTest, TrailingGarbage) {
  std::vector<uint8_t> blob = SmallValidBlob();
  const size_t end = blob.size();
  blob.push_back(0);
  Status st = DecodeStatus(blob);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("offset " + std::to_string(end) + ": 1 trailing bytes"),
            std::string::npos)
      << st.message();
}

TEST(StateBlobMalformedTest, HugeArrayCountDoesNotAllocate) {
  Status st = DecodeStatus(Words({1, 0xffffffffu, 0, 0}));
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("offset 4: n_arrays 4294967295 cannot fit"), std::string::npos)
      << st.message();
}

TEST(StateBlobMalformedTest, PionNoneSlotIsNotGuessed) {
  // Pion writes a None slot as four zero u32s; read with v1 rules that is a 0-d fp32 scalar plus
  // a stray u32, so the blob (None, then fp32 [1]) is rejected rather than misread.
  std::vector<uint8_t> blob = Words({1, 2, 0, 0, 0, 0, 1, 1, 0, 0x3f800000});
  EXPECT_EQ(DecodeStatus(blob).code(), StatusCode::kCorruption);
}

TEST(StateBlobMalformedTest, RandomMutationsNeverEscapeTheBuffer) {
  const std::vector<uint8_t> valid = SmallValidBlob();
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> blob = valid;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 4) {
        case 0:
          blob[rng() % blob.size()] = static_cast<uint8_t>(rng());
          break;
        case 1:
          blob.resize(rng() % (blob.size() + 1));
          break;
        case 2:
          blob.push_back(static_cast<uint8_t>(rng()));
          break;
        case 3:  // set one header-ish u32 to a random small or huge value
          if (blob.size() >= 4) {
            size_t at = (rng() % (blob.size() / 4)) * 4;
            uint32_t v = rng() % 2 ? rng() % 8 : static_cast<uint32_t>(rng());
            std::memcpy(blob.data() + at, &v, 4);
          }
          break;
      }
      if (blob.empty()) break;
    }
    auto views = DecodeStateBlob(blob);
    if (!views.ok()) {
      ASSERT_EQ(views.status().code(), StatusCode::kCorruption);
      continue;
    }
    size_t total = 8;
    for (const auto& v : *views) {
      ASSERT_GE(v.bytes.data() == nullptr ? blob.data() : v.bytes.data(), blob.data());
      total += 8 + 4 * v.shape.size() + v.bytes.size();
    }
    ASSERT_EQ(total, blob.size());
  }
}

// ---------------------------------------------------------------------------------------------
// fp16

TEST(Float16Test, KnownPatterns) {
  struct Case {
    float in;
    uint16_t out;
  };
  const Case cases[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {0.5f, 0x3800},
      {0.1f, 0x2e66},
      {1.0f / 3.0f, 0x3555},
      {65504.0f, 0x7bff},                      // max finite
      {65519.99f, 0x7bff},                     // just under the overflow midpoint
      {65520.0f, 0x7c00},                      // the midpoint ties to even: Inf
      {1e6f, 0x7c00},                          // overflow
      {-1e6f, 0xfc00},                         //
      {std::ldexp(1.0f, -14), 0x0400},         // min normal
      {std::ldexp(1.0f, -24), 0x0001},         // min subnormal
      {std::ldexp(1023.0f, -24), 0x03ff},      // max subnormal
      {std::ldexp(1.0f, -25), 0x0000},         // half the min subnormal: tie to even 0
      {std::ldexp(1.5f, -25), 0x0001},         // above the tie
      {std::ldexp(3.0f, -25), 0x0002},         // 1.5 ulp: tie to even 2
      {std::ldexp(5.0f, -25), 0x0002},         // 2.5 ulp: tie to even 2
      {std::ldexp(2047.0f, -25), 0x0400},      // max subnormal + half: tie rounds up into normals
      {std::ldexp(1.0f, -30), 0x0000},         // underflow
      {-std::ldexp(1.0f, -24), 0x8001},        //
      {1.0f + std::ldexp(1.0f, -11), 0x3c00},  // tie, even below
      {1.0f + 3 * std::ldexp(1.0f, -11), 0x3c02},                      // tie, even above
      {1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20), 0x3c01},  // just above a tie
      {2049.0f, 0x6800},                                               // tie to even 2048
      {2051.0f, 0x6802},                                               // tie to even 2052
      {std::numeric_limits<float>::infinity(), 0x7c00},
      {-std::numeric_limits<float>::infinity(), 0xfc00},
      {std::numeric_limits<float>::denorm_min(), 0x0000},
      {std::numeric_limits<float>::max(), 0x7c00},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Fp32ToFp16(c.in), c.out) << std::hexfloat << c.in;
  }
}

TEST(Float16Test, NaNs) {
  EXPECT_EQ(Fp32ToFp16(FromBits(0x7fc00000)), 0x7e00);  // canonical quiet NaN
  EXPECT_EQ(Fp32ToFp16(FromBits(0xffc00000)), 0xfe00);  // sign kept
  EXPECT_EQ(Fp32ToFp16(FromBits(0x7fa00000)),
            0x7d00);  // signalling NaN: payload kept, not quietened
  EXPECT_EQ(Fp32ToFp16(FromBits(0x7f800001)), 0x7e00);  // payload below fp16 precision: still NaN
  EXPECT_EQ(Fp32ToFp16(FromBits(0x7fffffff)), 0x7fff);

  EXPECT_EQ(ToBits(Fp16ToFp32(0x7e00)), 0x7fc00000u);
  EXPECT_EQ(ToBits(Fp16ToFp32(0x7d00)), 0x7fa00000u);
  EXPECT_EQ(ToBits(Fp16ToFp32(0xfc00)), 0xff800000u);
  EXPECT_EQ(ToBits(Fp16ToFp32(0x7c00)), 0x7f800000u);
}

TEST(Float16Test, WideningIsExactForAllPatterns) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    const uint32_t exponent = (h >> 10) & 0x1f;
    const uint32_t mantissa = h & 0x3ff;
    const float sign = (h & 0x8000) ? -1.0f : 1.0f;
    if (exponent == 0x1f) {
      if (mantissa == 0) {
        ASSERT_TRUE(std::isinf(f) && std::signbit(f) == bool(h & 0x8000)) << h;
      } else {
        ASSERT_TRUE(std::isnan(f)) << h;
      }
    } else if (exponent == 0) {
      ASSERT_EQ(ToBits(f), ToBits(sign * std::ldexp(static_cast<float>(mantissa), -24))) << h;
    } else {
      ASSERT_EQ(ToBits(f), ToBits(sign * std::ldexp(static_cast<float>(1024 + mantissa),
                                                    static_cast<int>(exponent) - 25)))
          << h;
    }
    ASSERT_EQ(Fp32ToFp16(f), h) << "round trip of 0x" << std::hex << h;
  }
}

// Independent oracle: the nearest fp16 by search over the (monotonic) positive patterns, ties to
// the even pattern, with 0x7c00 standing for 2^16 so that overflow follows the same rule.
uint16_t ReferenceFp16(float value) {
  const double x = std::fabs(static_cast<double>(value));
  auto as_double = [](uint32_t h) {
    return h == 0x7c00 ? 65536.0 : double{Fp16ToFp32(static_cast<uint16_t>(h))};
  };
  uint32_t lo = 0;
  uint32_t hi = 0x7c00;
  if (x >= 65536.0) {
    lo = hi;
  } else {
    while (hi - lo > 1) {  // invariant: value(lo) <= x < value(hi)
      const uint32_t mid = (lo + hi) / 2;
      (as_double(mid) <= x ? lo : hi) = mid;
    }
    const double below = x - as_double(lo);
    const double above = as_double(hi) - x;
    if (above < below || (above == below && (hi & 1) == 0)) lo = hi;
  }
  return static_cast<uint16_t>(lo | (std::signbit(value) ? 0x8000 : 0));
}

TEST(Float16Test, NarrowingMatchesOracle) {
  std::mt19937 rng(99);
  auto check = [](uint32_t bits) {
    const float f = FromBits(bits);
    if (std::isnan(f)) return;
    ASSERT_EQ(Fp32ToFp16(f), ReferenceFp16(f)) << "fp32 bits 0x" << std::hex << bits;
#if defined(__FLT16_MANT_DIG__)
    ASSERT_EQ(Fp32ToFp16(f), std::bit_cast<uint16_t>(static_cast<_Float16>(f)))
        << "compiler _Float16 disagrees for 0x" << std::hex << bits;
#endif
  };
  // Every fp32 whose exponent falls in or near the fp16 range, with a stride through mantissas
  // that also visits every tie and near-tie (low 13 bits 0x0fff, 0x1000, 0x1001).
  for (uint32_t exponent = 100; exponent <= 145; ++exponent) {
    for (uint32_t high = 0; high < 1024; ++high) {
      for (uint32_t low : {0x0000u, 0x0001u, 0x0fffu, 0x1000u, 0x1001u, 0x1fffu}) {
        const uint32_t bits = exponent << 23 | high << 13 | low;
        check(bits);
        check(bits | 0x80000000u);
      }
    }
  }
  for (int i = 0; i < 2000000; ++i) check(static_cast<uint32_t>(rng()));
}

// ---------------------------------------------------------------------------------------------
// bf16

TEST(BFloat16Test, KnownPatterns) {
  struct Case {
    uint32_t in;
    uint16_t out;
  };
  const Case cases[] = {
      {0x00000000, 0x0000}, {0x80000000, 0x8000},  // ±0
      {0x3f800000, 0x3f80},                        // 1.0
      {0x3f808000, 0x3f80},                        // 1 + 2^-8: tie, even below
      {0x3f818000, 0x3f82},                        // tie, even above
      {0x3f808001, 0x3f81},                        // just above a tie
      {0x3f807fff, 0x3f80},                        // just below a tie
      {0xc0490fdb, 0xc049},                        // -pi
      {0x7f7f7fff, 0x7f7f},                        // rounds down to max finite
      {0x7f7f8000, 0x7f80},                        // tie at the top: even is Inf
      {0x7f7fffff, 0x7f80},                        // FLT_MAX overflows
      {0xff7fffff, 0xff80},                        //
      {0x7f800000, 0x7f80}, {0xff800000, 0xff80},  // ±Inf
      {0x00000001, 0x0000},                        // fp32 subnormals round like any value
      {0x00008000, 0x0000},                        // tie, even 0
      {0x00018000, 0x0002},                        // tie, even above
      {0x00010000, 0x0001},                        // bf16 subnormal, exact
      {0x007fffff, 0x0080},                        // max fp32 subnormal rounds to min normal
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Fp32ToBf16(FromBits(c.in)), c.out) << std::hex << c.in;
  }
}

TEST(BFloat16Test, NaNs) {
  EXPECT_EQ(Fp32ToBf16(FromBits(0x7fc00000)), 0x7fc0);
  EXPECT_EQ(Fp32ToBf16(FromBits(0xffc00000)), 0xffc0);
  EXPECT_EQ(Fp32ToBf16(FromBits(0x7f810000)), 0x7f81);  // signalling NaN kept as is
  EXPECT_EQ(Fp32ToBf16(FromBits(0x7f800001)), 0x7fc0);  // low payload only: quietened, not Inf
  EXPECT_EQ(Fp32ToBf16(FromBits(0x7fffffff)), 0x7fff);  // no rounding carry into the sign
  EXPECT_EQ(Fp32ToBf16(FromBits(0xff80ffff)), 0xffc0);
}

TEST(BFloat16Test, WideningThenNarrowingIsIdentityForAllPatterns) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = Bf16ToFp32(static_cast<uint16_t>(b));
    ASSERT_EQ(ToBits(f), b << 16);
    ASSERT_EQ(Fp32ToBf16(f), b) << std::hex << b;
  }
}

uint16_t ReferenceBf16(float value) {
  const uint32_t bits = ToBits(value);
  const uint32_t sign = bits & 0x80000000u;
  const uint32_t magnitude = bits & 0x7fffffffu;
  const uint32_t lo = magnitude & 0xffff0000u;
  const uint32_t hi = lo + 0x10000u;  // may be 0x7f800000, Inf, standing for 2^128
  const double x = FromBits(magnitude);
  const double below = x - double{FromBits(lo)};
  const double above = (hi == 0x7f800000u ? std::ldexp(1.0, 128) : double{FromBits(hi)}) - x;
  const uint32_t pick = (above < below || (above == below && ((hi >> 16) & 1) == 0)) ? hi : lo;
  return static_cast<uint16_t>((sign | pick) >> 16);
}

TEST(BFloat16Test, NarrowingMatchesOracle) {
  std::mt19937 rng(7);
  auto check = [](uint32_t bits) {
    const float f = FromBits(bits);
    if (std::isnan(f) || std::isinf(f)) return;
    ASSERT_EQ(Fp32ToBf16(f), ReferenceBf16(f)) << "fp32 bits 0x" << std::hex << bits;
  };
  for (uint32_t top = 0; top < 0x10000; ++top) {
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      check(top << 16 | low);
    }
  }
  for (int i = 0; i < 2000000; ++i) check(static_cast<uint32_t>(rng()));
}

TEST(Float16Test, SpanConversions) {
  const std::vector<float> in = {1.0f, -2.0f, 65520.0f, std::ldexp(1.0f, -24)};
  std::vector<uint16_t> half(in.size());
  ConvertFp32ToFp16(in, half);
  EXPECT_EQ(half, (std::vector<uint16_t>{0x3c00, 0xc000, 0x7c00, 0x0001}));
  std::vector<float> back(in.size());
  ConvertFp16ToFp32(half, back);
  EXPECT_EQ(back[3], std::ldexp(1.0f, -24));

  std::vector<uint16_t> bf(in.size());
  ConvertFp32ToBf16(in, bf);
  EXPECT_EQ(bf[0], 0x3f80);
  ConvertBf16ToFp32(bf, back);
  EXPECT_EQ(back[1], -2.0f);
}

static_assert(Fp32ToFp16(1.0f) == 0x3c00, "usable in constant expressions");
static_assert(Fp16ToFp32(0x3c00) == 1.0f);
static_assert(Fp32ToBf16(1.0f) == 0x3f80);

}  // namespace
}  // namespace prefixd
