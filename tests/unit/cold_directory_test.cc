// Tests for a snapshot's cold directory (persist/cold_directory.h): a round trip whose offsets
// are those of the SSM puts it lists (as SsmPutValueOffsets places their values); every cut of
// the payload, trailing bytes, an entry that does not start where the one before ends, a
// region past the file or short of its records, a duplicate sid and a sid past the limit are
// refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/bytes.h"
#include "persist/cold_directory.h"
#include "persist/log_format.h"
#include "persist/mutation.h"

namespace prefixd::persist {
namespace {

constexpr uint64_t kStart = 1000, kFileSize = uint64_t{1} << 40, kMaxSid = 64;

// Two sessions listed from kStart, their records one after another.
ColdDirectory TwoSessions() {
  ColdDirectory d;
  d.entries.push_back({0, "a", {{0, 4 << 20}, {7, 3}}});
  d.entries.push_back({0, std::string(kMaxSid, 'b'), {{2, 0}}});
  uint64_t at = kStart;
  for (ColdEntry& e : d.entries) {
    e.record_offset = at;
    at += kRecordHeaderSize + SsmPutPayloadLength(e);
  }
  d.region_end = at;
  return d;
}

std::string Decode(const Bytes& payload, ColdDirectory& out, uint64_t file_size = kFileSize) {
  return DecodeColdDirectory(payload, kStart, file_size, kMaxSid, out);
}

TEST(ColdDirectory, RoundTripsWithTheOffsetsOfThePutsItLists) {
  const ColdDirectory d = TwoSessions();
  ColdDirectory back;
  ASSERT_EQ(Decode(EncodeColdDirectory(d), back), "");
  ASSERT_EQ(back.entries.size(), 2u);
  EXPECT_EQ(back.region_end, d.region_end);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.entries[i].record_offset, d.entries[i].record_offset);
    EXPECT_EQ(back.entries[i].sid, d.entries[i].sid);
    EXPECT_EQ(back.entries[i].layers, d.entries[i].layers);
  }
  // The values sit where an SSM put of the same layers puts them.
  SsmPut put{"a", {}};
  put.layers.emplace_back(0, Bytes::Allocate(4 << 20));
  put.layers.emplace_back(7, Bytes::CopyOf("xyz"));
  const std::vector<uint64_t> in_payload = SsmPutValueOffsets(put);
  const std::vector<uint64_t> in_file = ColdValueOffsets(back.entries[0]);
  ASSERT_EQ(in_file.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(in_file[i], kStart + kRecordHeaderSize + in_payload[i]);
  uint64_t encoded = 0;
  for (const Bytes& piece : EncodePayload(Mutation(put))) encoded += piece.size();
  EXPECT_EQ(SsmPutPayloadLength(back.entries[0]), encoded);
}

TEST(ColdDirectory, EveryCutAndTrailingBytesAreRefused) {
  const Bytes whole = EncodeColdDirectory(TwoSessions());
  ColdDirectory out;
  for (size_t n = 0; n < whole.size(); ++n) {
    EXPECT_NE(Decode(whole.Slice(0, n), out), "") << "cut at " << n;
  }
  const Bytes longer = Bytes::CopyOf(std::string(whole.view()) + "!");
  EXPECT_NE(Decode(longer, out).find("trailing"), std::string::npos);
}

TEST(ColdDirectory, EntriesMustTileTheRegionInsideTheFile) {
  ColdDirectory out;
  ColdDirectory d = TwoSessions();
  d.entries[1].record_offset += 1;  // overlaps nothing, but leaves a gap
  EXPECT_NE(Decode(EncodeColdDirectory(d), out).find("not where the record before it ends"),
            std::string::npos);
  d = TwoSessions();
  d.entries[1].record_offset -= 1;  // overlaps the first
  EXPECT_NE(Decode(EncodeColdDirectory(d), out), "");
  d = TwoSessions();
  d.region_end += 1;  // the records end short of it
  EXPECT_NE(Decode(EncodeColdDirectory(d), out).find("its records end at"), std::string::npos);
  d = TwoSessions();
  d.entries[0].layers[0].second = ~uint64_t{0} - 5;  // sums would wrap
  EXPECT_NE(Decode(EncodeColdDirectory(d), out).find("runs past"), std::string::npos);
  d = TwoSessions();
  EXPECT_NE(Decode(EncodeColdDirectory(d), out, d.region_end - 1).find("outside"),
            std::string::npos);
  EXPECT_EQ(Decode(EncodeColdDirectory(d), out, d.region_end), "") << "ending at the file's end";
  d = TwoSessions();
  d.entries[1].sid = "a";
  d.region_end = d.entries[1].record_offset + kRecordHeaderSize + SsmPutPayloadLength(d.entries[1]);
  EXPECT_NE(Decode(EncodeColdDirectory(d), out).find("already listed"), std::string::npos);
  d = TwoSessions();
  d.entries[1].sid += 'b';
  d.region_end += 1;
  EXPECT_NE(Decode(EncodeColdDirectory(d), out).find("max-sid-len"), std::string::npos);
}

}  // namespace
}  // namespace prefixd::persist
