// The V-store tiers: lossless tiers byte-exact (fp16/bf16 against an independent
// round-to-nearest-even reference), lossy tiers within the error bands docs/vstore-tiers.md
// documents (measured here on unit-normal data), determinism, the byte layouts, and that a later
// batch never changes an earlier row.
#include "store/vector_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include "prefixd/float16.h"
#include "store/vector_store.h"

namespace prefixd::store {
namespace {

constexpr Tier kAllTiers[] = {Tier::kFp32, Tier::kFp16, Tier::kBf16,
                              Tier::kInt8, Tier::kFp8,  Tier::kMlx4g32};

std::vector<float> UnitNormal(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

const uint8_t* AsBytes(const void* p) { return static_cast<const uint8_t*>(p); }

std::vector<uint8_t> Encode(Tier tier, uint32_t dim, InputFormat format, const void* in,
                            size_t rows) {
  std::vector<uint8_t> out(rows * RowBytes(tier, dim));
  std::string err = EncodeRows(tier, dim, format, AsBytes(in), rows, out.data());
  EXPECT_EQ(err, "");
  return out;
}

std::vector<float> Decode(Tier tier, uint32_t dim, const std::vector<uint8_t>& stored) {
  const size_t rows = stored.size() / RowBytes(tier, dim);
  std::vector<float> out(rows * dim);
  DecodeRows(tier, dim, stored.data(), rows, out.data());
  return out;
}

// An independent reference for round-to-nearest-even narrowing: every finite value of the
// 16-bit format, sorted, and a search for the nearest, ties to the even bit pattern.
class NearestEven {
 public:
  explicit NearestEven(float (*widen)(uint16_t)) {
    for (uint32_t bits = 0; bits < 0x10000; ++bits) {
      float v = widen(static_cast<uint16_t>(bits));
      if (std::isfinite(v) && !(v == 0.0f && std::signbit(v))) {
        values_.emplace_back(v, static_cast<uint16_t>(bits));
      }
    }
    std::sort(values_.begin(), values_.end());
    max_ = values_.back().first;
    // The step past the largest finite value: half of it beyond the maximum rounds to infinity.
    uint16_t max_bits = values_.back().second;
    overflow_ = max_ + (max_ - widen(static_cast<uint16_t>(max_bits - 1))) / 2;
  }

  // The reference result for finite `x` (sign handled by symmetry).
  uint16_t operator()(float x, uint16_t inf_bits) const {
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double a = std::fabs(static_cast<double>(x));
    if (a >= overflow_) return sign | inf_bits;
    auto hi = std::lower_bound(values_.begin(), values_.end(),
                               std::make_pair(static_cast<float>(a), uint16_t{0}),
                               [](const auto& l, const auto& r) { return l.first < r.first; });
    if (hi == values_.end()) return sign | values_.back().second;
    if (hi->first == a || hi == values_.begin()) return sign | hi->second;
    auto lo = hi - 1;
    const double down = a - lo->first, up = hi->first - a;
    if (down < up) return sign | lo->second;
    if (up < down) return sign | hi->second;
    return sign | ((lo->second & 1) == 0 ? lo->second : hi->second);
  }

 private:
  std::vector<std::pair<float, uint16_t>> values_;
  double max_ = 0, overflow_ = 0;
};

// Values that probe rounding: random bit patterns across the exponent range, plus unit normals.
std::vector<float> RoundingProbes() {
  std::vector<float> v = UnitNormal(1 << 16, 7);
  std::mt19937 rng(11);
  for (int i = 0; i < (1 << 16); ++i) {
    float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (std::isfinite(f)) v.push_back(f);
  }
  // Exact ties of fp16 (mantissa bit 12 set, lower bits clear) and of bf16 (bit 15).
  for (uint32_t m = 0; m < 4096; ++m) {
    v.push_back(std::bit_cast<float>(0x3f800000u | (m << 13) | 0x1000u));
    v.push_back(std::bit_cast<float>(0x3f800000u | (m << 16) | 0x8000u));
  }
  v.push_back(65504.0f), v.push_back(65519.99f), v.push_back(65520.0f), v.push_back(1e-8f);
  v.push_back(5.9604645e-08f), v.push_back(2.9802322e-08f), v.push_back(-0.0f);
  return v;
}

TEST(VectorCodecTest, Fp32StoresEveryBitPattern) {
  std::vector<uint32_t> bits = {0,           0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00001u,
                                0x7f800001u, 1,           0x007fffffu, 0x3f800000u};
  std::mt19937 rng(3);
  for (int i = 0; i < 4096; ++i) bits.push_back(static_cast<uint32_t>(rng()));
  const uint32_t dim = 1;
  auto stored = Encode(Tier::kFp32, dim, InputFormat::kF32, bits.data(), bits.size());
  ASSERT_EQ(stored.size(), bits.size() * 4);
  EXPECT_EQ(std::memcmp(stored.data(), bits.data(), stored.size()), 0);
  auto back = Decode(Tier::kFp32, dim, stored);
  EXPECT_EQ(std::memcmp(back.data(), bits.data(), stored.size()), 0);
}

TEST(VectorCodecTest, Fp16IsByteExactRoundToNearestEven) {
  const NearestEven reference(Fp16ToFp32);
  std::vector<float> probes = RoundingProbes();
  auto stored = Encode(Tier::kFp16, 1, InputFormat::kF32, probes.data(), probes.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < probes.size(); ++i) {
    uint16_t got;
    std::memcpy(&got, stored.data() + 2 * i, 2);
    uint16_t want = reference(probes[i], 0x7c00);
    if (got != want && ++mismatches < 5) {
      ADD_FAILURE() << "fp16 of " << probes[i] << ": got 0x" << std::hex << got << " want 0x"
                    << want;
    }
  }
  EXPECT_EQ(mismatches, 0u);
  // Decoding widens exactly.
  auto back = Decode(Tier::kFp16, 1, stored);
  for (size_t i = 0; i < probes.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, stored.data() + 2 * i, 2);
    ASSERT_EQ(std::bit_cast<uint32_t>(back[i]), std::bit_cast<uint32_t>(Fp16ToFp32(h)));
  }
}

TEST(VectorCodecTest, Bf16IsByteExactRoundToNearestEven) {
  const NearestEven reference(Bf16ToFp32);
  std::vector<float> probes = RoundingProbes();
  auto stored = Encode(Tier::kBf16, 1, InputFormat::kF32, probes.data(), probes.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < probes.size(); ++i) {
    uint16_t got;
    std::memcpy(&got, stored.data() + 2 * i, 2);
    uint16_t want = reference(probes[i], 0x7f80);
    if (got != want && ++mismatches < 5) {
      ADD_FAILURE() << "bf16 of " << probes[i] << ": got 0x" << std::hex << got << " want 0x"
                    << want;
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

// The bulk fp16 paths (F16C hardware where present) must give the scalar functions' bits for
// every input, NaN payloads and infinities included, wherever they sit in a block of eight.
TEST(VectorCodecTest, BulkFp16ConversionsMatchTheScalarOnesBitForBit) {
  std::vector<uint32_t> bits;
  std::mt19937 rng(17);
  const uint32_t specials[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u,
                               0x7fa00000u, 0xffbfffffu, 0x00000001u, 0x80000000u};
  for (int i = 0; i < 4096; ++i) {
    bits.push_back(i % 13 == 0 ? specials[i % 8] : static_cast<uint32_t>(rng()));
  }
  auto stored = Encode(Tier::kFp16, 64, InputFormat::kF32, bits.data(), bits.size() / 64);
  for (size_t i = 0; i < bits.size(); ++i) {
    uint16_t got;
    std::memcpy(&got, stored.data() + 2 * i, 2);
    ASSERT_EQ(got, Fp32ToFp16(std::bit_cast<float>(bits[i]))) << std::hex << bits[i];
  }
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<uint8_t> raw(all.size() * 2);
  std::memcpy(raw.data(), all.data(), raw.size());
  auto wide = Decode(Tier::kFp16, 64, raw);
  for (uint32_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(wide[i]), std::bit_cast<uint32_t>(Fp16ToFp32(all[i]))) << i;
  }
}

TEST(VectorCodecTest, SixteenBitInputIsStoredAsGiven) {
  std::vector<uint16_t> halves(65536);
  for (uint32_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i);
  for (auto [tier, format] :
       {std::pair{Tier::kFp16, InputFormat::kF16}, std::pair{Tier::kBf16, InputFormat::kBf16}}) {
    auto stored = Encode(tier, 64, format, halves.data(), halves.size() / 64);
    ASSERT_EQ(stored.size(), halves.size() * 2);
    EXPECT_EQ(std::memcmp(stored.data(), halves.data(), stored.size()), 0) << TierName(tier);
  }
  // fp16 input widens exactly into fp32; into bf16 it rounds to nearest even from that fp32.
  auto wide = Decode(Tier::kFp32, 64,
                     Encode(Tier::kFp32, 64, InputFormat::kF16, halves.data(), halves.size() / 64));
  auto narrow = Encode(Tier::kBf16, 64, InputFormat::kF16, halves.data(), halves.size() / 64);
  for (uint32_t i = 0; i < halves.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(wide[i]), std::bit_cast<uint32_t>(Fp16ToFp32(halves[i])));
    uint16_t b;
    std::memcpy(&b, narrow.data() + 2 * i, 2);
    ASSERT_EQ(b, Fp32ToBf16(Fp16ToFp32(halves[i])));
  }
}

struct Band {
  Tier tier;
  double max_abs;  // documented in docs/vstore-tiers.md
};

// Measured on 2^21 unit-normal values per dim (seed 42); see docs/vstore-tiers.md.
constexpr Band kBands[] = {{Tier::kFp16, 0.002},
                           {Tier::kBf16, 0.016},
                           {Tier::kInt8, 0.02},
                           {Tier::kFp8, 0.15},
                           {Tier::kMlx4g32, 0.30}};

TEST(VectorCodecTest, LossyTiersStayWithinTheirDocumentedBands) {
  for (uint32_t dim : {128u, 1024u, 4096u}) {
    const size_t rows = (size_t{1} << 21) / dim;
    std::vector<float> x = UnitNormal(rows * dim, 42);
    for (const Band& band : kBands) {
      auto y = Decode(band.tier, dim, Encode(band.tier, dim, InputFormat::kF32, x.data(), rows));
      double max_abs = 0, sum_sq = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double d = std::fabs(static_cast<double>(x[i]) - y[i]);
        max_abs = std::max(max_abs, d);
        sum_sq += d * d;
      }
      std::cout << "dim " << dim << " " << TierName(band.tier) << ": max |err| " << max_abs
                << ", rms " << std::sqrt(sum_sq / x.size()) << "\n";
      EXPECT_LE(max_abs, band.max_abs) << TierName(band.tier) << " dim " << dim;
    }
  }
}

TEST(VectorCodecTest, QuantizedErrorsMeetTheirPerElementBounds) {
  const uint32_t dim = 256;
  const size_t rows = 512;
  std::vector<float> x = UnitNormal(rows * dim, 5);
  // Rows of very different magnitudes: the bounds are relative to each row or block.
  for (size_t r = 0; r < rows; ++r) {
    const float gain = std::ldexp(1.0f, static_cast<int>(r % 40) - 20);
    for (uint32_t j = 0; j < dim; ++j) x[r * dim + j] *= gain;
  }
  auto int8 = Encode(Tier::kInt8, dim, InputFormat::kF32, x.data(), rows);
  auto int8_back = Decode(Tier::kInt8, dim, int8);
  auto fp8_back =
      Decode(Tier::kFp8, dim, Encode(Tier::kFp8, dim, InputFormat::kF32, x.data(), rows));
  for (size_t r = 0; r < rows; ++r) {
    const float* row = x.data() + r * dim;
    const float mn = *std::min_element(row, row + dim), mx = *std::max_element(row, row + dim);
    // int8: half a step of (max - min) / 255, plus float rounding.
    const double step = (static_cast<double>(mx) - mn) / 255.0;
    for (uint32_t j = 0; j < dim; ++j) {
      ASSERT_LE(std::fabs(row[j] - int8_back[r * dim + j]),
                step * 0.5 + 4e-7 * (std::fabs(mx) + std::fabs(mn)))
          << "row " << r << " value " << j;
      // fp8: 1/16 of the value (3 mantissa bits), or half the subnormal step of its block.
      float block_max = 0;
      for (uint32_t k = j / 32 * 32; k < j / 32 * 32 + 32; ++k)
        block_max = std::max(block_max, std::fabs(row[k]));
      const double bound =
          std::max(std::fabs(row[j]) / 16.0, block_max / 448.0 * std::ldexp(1.0, -10) * 1.01);
      ASSERT_LE(std::fabs(row[j] - fp8_back[r * dim + j]), bound * 1.0001)
          << "row " << r << " value " << j;
    }
  }
}

TEST(VectorCodecTest, EncodingIsDeterministic) {
  const uint32_t dim = 1024;
  std::vector<float> x = UnitNormal(64 * dim, 9);
  for (Tier tier : kAllTiers) {
    auto a = Encode(tier, dim, InputFormat::kF32, x.data(), 64);
    auto b = Encode(tier, dim, InputFormat::kF32, x.data(), 64);
    EXPECT_EQ(a, b) << TierName(tier);
    // Row by row gives the same bytes as one batch: nothing is shared between rows.
    std::vector<uint8_t> rowwise;
    for (size_t r = 0; r < 64; ++r) {
      auto one = Encode(tier, dim, InputFormat::kF32, x.data() + r * dim, 1);
      rowwise.insert(rowwise.end(), one.begin(), one.end());
    }
    EXPECT_EQ(a, rowwise) << TierName(tier);
  }
}

TEST(VectorCodecTest, ZeroBytesDecodeToZerosInEveryTier) {
  const uint32_t dim = 64;
  for (Tier tier : kAllTiers) {
    std::vector<uint8_t> zeros(3 * RowBytes(tier, dim), 0);
    for (float v : Decode(tier, dim, zeros)) ASSERT_EQ(v, 0.0f) << TierName(tier);
    // And zero input encodes to values that decode to zero.
    std::vector<float> z(dim, 0.0f);
    for (float v : Decode(tier, dim, Encode(tier, dim, InputFormat::kF32, z.data(), 1))) {
      ASSERT_EQ(v, 0.0f) << TierName(tier);
    }
  }
}

TEST(VectorCodecTest, RowSizesAndDimRules) {
  EXPECT_EQ(RowBytes(Tier::kFp32, 1024), 4096u);
  EXPECT_EQ(RowBytes(Tier::kFp16, 1024), 2048u);
  EXPECT_EQ(RowBytes(Tier::kBf16, 1024), 2048u);
  EXPECT_EQ(RowBytes(Tier::kInt8, 1024), 1032u);
  EXPECT_EQ(RowBytes(Tier::kFp8, 1024), 1088u);
  EXPECT_EQ(RowBytes(Tier::kMlx4g32, 1024), 640u);  // Pion's figure
  EXPECT_EQ(CheckDim(Tier::kFp8, 100),
            "VQUANT fp8 needs value_dim to be a multiple of 32 (got 100)");
  EXPECT_NE(CheckDim(Tier::kMlx4g32, 48), "");
  for (Tier t : {Tier::kFp32, Tier::kFp16, Tier::kBf16, Tier::kInt8}) EXPECT_EQ(CheckDim(t, 7), "");
  EXPECT_EQ(ParseTier("FP16"), Tier::kFp16);
  EXPECT_EQ(ParseTier("Mlx4G32"), Tier::kMlx4g32);
  EXPECT_EQ(ParseTier("turbo4"), std::nullopt);
  for (Tier t : kAllTiers) EXPECT_EQ(TierFromCode(static_cast<uint32_t>(t)), t);
  EXPECT_EQ(TierFromCode(1), std::nullopt);
}

TEST(VectorCodecTest, QuantizedTiersRefuseNonFiniteValues) {
  const uint32_t dim = 32;
  for (Tier tier : {Tier::kInt8, Tier::kFp8, Tier::kMlx4g32}) {
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
      std::vector<float> x(2 * dim, 1.0f);
      x[dim + 5] = bad;
      std::vector<uint8_t> out(2 * RowBytes(tier, dim));
      std::string err = EncodeRows(tier, dim, InputFormat::kF32, AsBytes(x.data()), 2, out.data());
      EXPECT_NE(err.find("row 1 value 5 is NaN or infinite"), std::string::npos) << err;
    }
  }
  std::vector<float> big(32, 1.0f);
  big[3] = 70000.0f;
  std::vector<uint8_t> out(RowBytes(Tier::kMlx4g32, 32));
  EXPECT_NE(EncodeRows(Tier::kMlx4g32, 32, InputFormat::kF32, AsBytes(big.data()), 1, out.data()),
            "");
  // Lossless tiers keep what fp16/bf16 make of them.
  std::vector<float> inf(4, std::numeric_limits<float>::infinity());
  auto stored = Encode(Tier::kFp16, 4, InputFormat::kF32, inf.data(), 1);
  EXPECT_TRUE(std::isinf(Decode(Tier::kFp16, 4, stored)[0]));
}

TEST(VectorCodecTest, E4m3RoundTripsEveryCodeAndRoundsTiesToEven) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(E4m3ToFp32(static_cast<uint8_t>(c))));
      continue;
    }
    EXPECT_EQ(Fp32ToE4m3(E4m3ToFp32(static_cast<uint8_t>(c))), c) << c;
  }
  EXPECT_EQ(E4m3ToFp32(0x7e), 448.0f);
  EXPECT_EQ(E4m3ToFp32(0x08), 0.015625f);  // smallest normal
  EXPECT_EQ(E4m3ToFp32(0x01), 0.001953125f);
  // Between 1.0 (0x38) and 1.125 (0x39) the tie goes to the even code 0x38; between 1.125 and
  // 1.25 (0x3a) to 0x3a.
  EXPECT_EQ(Fp32ToE4m3(1.0625f), 0x38);
  EXPECT_EQ(Fp32ToE4m3(1.1875f), 0x3a);
  EXPECT_EQ(Fp32ToE4m3(1000.0f), 0x7e);  // saturates
  EXPECT_EQ(Fp32ToE4m3(-1000.0f), 0xfe);
  EXPECT_EQ(Fp32ToE4m3(0.0009765625f), 0x00);  // half the smallest subnormal: tie to even 0
}

TEST(VectorCodecTest, Mlx4g32FollowsPionsLayout) {
  // One group 0..31 scaled so scale (31 - 0) / 15 and bias 0 are exact in fp16... use 0..15
  // twice: min 0, max 15, scale 1, bias 0, codes = the values.
  const uint32_t dim = 64;
  std::vector<float> x(dim);
  for (uint32_t j = 0; j < dim; ++j) x[j] = static_cast<float>(j % 16);
  auto stored = Encode(Tier::kMlx4g32, dim, InputFormat::kF32, x.data(), 1);
  ASSERT_EQ(stored.size(), 40u);  // 32 code bytes, 2 fp16 scales, 2 fp16 biases
  for (uint32_t j = 0; j < dim; ++j) {
    uint32_t word;
    std::memcpy(&word, stored.data() + 4 * (j / 8), 4);
    EXPECT_EQ((word >> (4 * (j % 8))) & 15u, j % 16) << j;
  }
  for (int g = 0; g < 2; ++g) {
    uint16_t scale, bias;
    std::memcpy(&scale, stored.data() + 32 + 2 * g, 2);
    std::memcpy(&bias, stored.data() + 36 + 2 * g, 2);
    EXPECT_EQ(scale, Fp32ToFp16(1.0f));
    EXPECT_EQ(bias, Fp32ToFp16(0.0f));
  }
  EXPECT_EQ(Decode(Tier::kMlx4g32, dim, stored), x);
}

TEST(VectorCodecTest, Int8KeepsItsScaleInTheRow) {
  const uint32_t dim = 4;
  const float row[dim] = {-1.0f, 0.0f, 0.5f, 1.0f};
  auto stored = Encode(Tier::kInt8, dim, InputFormat::kF32, row, 1);
  ASSERT_EQ(stored.size(), 12u);
  float scale, mn;
  std::memcpy(&scale, stored.data(), 4);
  std::memcpy(&mn, stored.data() + 4, 4);
  EXPECT_EQ(scale, static_cast<float>(2.0 / 255.0));
  EXPECT_EQ(mn, -1.0f);
  EXPECT_EQ(stored[8], 0);
  EXPECT_EQ(stored[11], 255);
  // A constant row is exact.
  const float flat[dim] = {3.25f, 3.25f, 3.25f, 3.25f};
  for (float v : Decode(Tier::kInt8, dim, Encode(Tier::kInt8, dim, InputFormat::kF32, flat, 1))) {
    EXPECT_EQ(v, 3.25f);
  }
}

// Pion keeps one int8 scale per layer and rewrites it on every batch, so a later batch changes
// how earlier rows decode. Here every tier keeps its scales inside each row or block.
TEST(VectorCodecTest, ALaterBatchNeverChangesEarlierRows) {
  const uint32_t dim = 128;
  const uint64_t n = 300;
  for (Tier tier : kAllTiers) {
    VectorStore store(4);
    ASSERT_EQ(store.Create("s", dim, tier, store.ReserveIndex(), 0, nullptr),
              VectorStore::CreateResult::kCreated);
    std::vector<float> first = UnitNormal(n * dim, 1);
    std::vector<float> second = UnitNormal(n * dim, 2);
    for (float& v : second) v *= 100.0f;  // a much wider range than batch 1
    auto put = [&](const std::vector<float>& values, uint64_t start) {
      auto encoded = Encode(tier, dim, InputFormat::kF32, values.data(), n);
      Bytes rows = Bytes::CopyOf({reinterpret_cast<const char*>(encoded.data()), encoded.size()});
      ASSERT_EQ(store.Store("s", 0, start, n, rows, dim, tier), VectorStore::StoreResult::kOk);
    };
    auto bytes_of = [&](uint64_t s, uint64_t e) {
      auto read = store.ReadRange("s", 0, s, e);
      std::string out;
      for (const Bytes& p : read->second.rows.pieces) out.append(p.view());
      return out;
    };
    put(first, 0);
    const std::string before = bytes_of(0, n);
    put(second, n);      // appended after
    put(second, 5 * n);  // past a gap
    EXPECT_EQ(bytes_of(0, n), before) << TierName(tier);
    EXPECT_EQ(bytes_of(0, n),
              std::string(reinterpret_cast<const char*>(
                              Encode(tier, dim, InputFormat::kF32, first.data(), n).data()),
                          n * RowBytes(tier, dim)))
        << TierName(tier);
  }
}

}  // namespace
}  // namespace prefixd::store
