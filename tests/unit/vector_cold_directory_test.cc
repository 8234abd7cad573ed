// The V-store cold directory (record type 17): a round trip, and every damage the decoder must
// refuse (docs/storage-format.md): each cut, a gap or an overlap between records, a region past
// the file, a sid listed twice or too long, an unknown tier, a dim the tier refuses, a rows
// record of no rows, trailing bytes.
#include "persist/cold_directory.h"

#include <gtest/gtest.h>

#include <string>

#include "persist/log_format.h"
#include "store/vector_codec.h"

namespace prefixd::persist {
namespace {

constexpr uint64_t kStart = 1000;  // where the directory record ends

VectorColdDirectory Sample() {
  VectorColdDirectory d;
  const uint32_t fp16 = static_cast<uint32_t>(store::Tier::kFp16);
  d.entries.push_back(VectorColdEntry{0, "a_pk", 3, 8, fp16, {{0, 0, 4}, {1, 2, 1}}});
  d.entries.push_back(
      VectorColdEntry{0, "b", 9, 32, static_cast<uint32_t>(store::Tier::kInt8), {{5, 100, 2}}});
  uint64_t at = kStart;
  for (VectorColdEntry& e : d.entries) {
    e.record_offset = at;
    at += VectorColdEntryBytes(e);
  }
  d.region_end = at;
  return d;
}

std::string Decode(const Bytes& payload, uint64_t file_size = 1 << 20) {
  VectorColdDirectory out;
  return DecodeVectorColdDirectory(payload, kStart, file_size, 64, 65536, out).message();
}

TEST(VectorColdDirectoryTest, RoundTripsAndPlacesRows) {
  const VectorColdDirectory d = Sample();
  VectorColdDirectory out;
  ASSERT_EQ(DecodeVectorColdDirectory(EncodeVectorColdDirectory(d), kStart, 1 << 20, 64, 65536, out)
                .ToString(),
            "OK");
  ASSERT_EQ(out.entries.size(), 2u);
  EXPECT_EQ(out.entries[1].sid, "b");
  EXPECT_EQ(out.entries[1].records[0].start, 100u);
  EXPECT_EQ(out.region_end, d.region_end);
  // a_pk: a create of 32 + 20 + 4 bytes, then rows records of 32 + 40 + 4 + rows × 16 bytes.
  const auto offsets = VectorColdRowsOffsets(out.entries[0]);
  ASSERT_EQ(offsets.size(), 2u);
  EXPECT_EQ(offsets[0], kStart + 56 + 76);
  EXPECT_EQ(offsets[1], kStart + 56 + 76 + 4 * 16 + 76);
}

TEST(VectorColdDirectoryTest, RefusesEveryDamage) {
  const Bytes good = EncodeVectorColdDirectory(Sample());
  for (size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_NE(Decode(Bytes::CopyOf(good.view().substr(0, cut))), "") << cut;
  }
  EXPECT_NE(Decode(Bytes::CopyOf(std::string(good.view()) + "x")), "");
  EXPECT_NE(Decode(good, Sample().region_end - 1), "") << "region past the file";
  const auto damaged = [](auto change) {
    VectorColdDirectory d = Sample();
    change(d);
    return Decode(EncodeVectorColdDirectory(d));
  };
  EXPECT_NE(damaged([](VectorColdDirectory& d) { d.entries[1].record_offset += 1; }), "");
  EXPECT_NE(damaged([](VectorColdDirectory& d) { d.entries[0].records[0].rows += 1; }), "");
  EXPECT_NE(damaged([](VectorColdDirectory& d) { d.region_end += 1; }), "");
  EXPECT_NE(damaged([](VectorColdDirectory& d) { d.entries[1].sid = "a_pk"; }), "")
      << "a sid listed twice (same length: the offsets still tile)";
  EXPECT_NE(damaged([](VectorColdDirectory& d) { d.entries[0].tier = 77; }), "");
  EXPECT_NE(damaged([](VectorColdDirectory& d) { d.entries[1].dim = 33; }), "")
      << "int8 takes 33, but the rows then fill another length";
  EXPECT_NE(damaged([](VectorColdDirectory& d) {
              d.entries[0].tier = static_cast<uint32_t>(store::Tier::kFp8);
              d.entries[0].dim = 8;
            }),
            "")
      << "fp8 needs a multiple of 32";
  EXPECT_NE(damaged([](VectorColdDirectory& d) { d.entries[0].dim = 0; }), "");
  EXPECT_NE(damaged([](VectorColdDirectory& d) { d.entries[1].records[0].rows = 0; }), "");
  EXPECT_NE(damaged([](VectorColdDirectory& d) { d.entries[0].sid = std::string(65, 's'); }), "");
}

}  // namespace
}  // namespace prefixd::persist
