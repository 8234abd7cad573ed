// Tests for persist/record_layout.h: the sizes and offsets it derives from each record's
// declaration are those of the payload the codec writes, for every kind of change, and a cold
// record's head decodes to the fields before its values.
#include "persist/record_layout.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "common/bytes.h"

namespace prefixd::persist {
namespace {

Bytes Joined(const std::vector<Bytes>& pieces) {
  std::string out;
  for (const Bytes& piece : pieces) out.append(piece.view());
  return Bytes::CopyOf(out);
}

Blob BlobOf(std::string_view bytes) { return Blob{{Bytes::CopyOf(bytes)}}; }

// Every kind of change, default-constructed (its names and blobs empty).
template <typename... Kinds>
std::vector<Mutation> EveryKind(std::variant<Kinds...>*) {
  return {Mutation(Kinds{})...};
}

TEST(RecordLayout, PayloadSizeIsTheEncodedLengthOfEveryKind) {
  for (const Mutation& m : EveryKind(static_cast<Mutation*>(nullptr))) {
    const uint64_t encoded = Joined(EncodePayload(m)).size();
    std::visit([&](const auto& r) { EXPECT_EQ(PayloadSize(r), encoded) << Describe(m); }, m);
  }
}

TEST(RecordLayout, ValueOffsetsPointAtTheValuesInTheEncodedPayload) {
  VStore rows{"session", 3, 5, 1, 4, 0, BlobOf("0123456789abcdef")};
  const Bytes payload = Joined(EncodePayload(rows));
  const uint64_t at = VStoreRowsOffset(rows.sid);
  ASSERT_EQ(at, ValueOffset<FieldIndex<VStore>("data")>(rows));
  EXPECT_EQ(payload.view().substr(at), "0123456789abcdef");

  SsmPut put{"sid", {{0, Bytes::CopyOf("first")}, {7, Bytes::CopyOf("second")}}};
  const Bytes put_payload = Joined(EncodePayload(put));
  const std::vector<uint64_t> offsets = SsmPutValueOffsets(put);
  ASSERT_EQ(offsets.size(), 2u);
  EXPECT_EQ(put_payload.view().substr(offsets[0], 5), "first");
  EXPECT_EQ(put_payload.view().substr(offsets[1], 6), "second");

  StringMultiSet multi;
  multi.entries.push_back(StringSet{RecordKey("a"), 0, 0, BlobOf(std::string(40, 'x'))});
  multi.entries.push_back(StringSet{RecordKey("bb"), 0, 9, BlobOf(std::string(50, 'y'))});
  const Bytes multi_payload = Joined(EncodePayload(multi));
  const std::vector<StringValueAt> values = StringValueOffsets(multi, 32);
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(multi_payload.view().substr(values[0].offset, 40), std::string(40, 'x'));
  EXPECT_EQ(multi_payload.view().substr(values[1].offset, 50), std::string(50, 'y'));
}

TEST(RecordLayout, AColdRecordsHeadDecodesToItsFieldsBeforeItsValues) {
  const VStore rows{"session", 3, 5, 2, 4, 0, BlobOf("0123456789abcdef")};
  const Bytes payload = Joined(EncodePayload(rows));
  const uint64_t head_bytes = HeadBytes<VStore>(rows.sid.size());
  EXPECT_EQ(head_bytes, VStoreRowsOffset(rows.sid));
  Mutation m;
  uint64_t values = 0;
  ASSERT_TRUE(DecodeHead(RecordType::kVStore, payload.Slice(0, head_bytes), m, values).ok());
  const VStore& back = std::get<VStore>(m);
  EXPECT_EQ(back.sid, "session");
  EXPECT_EQ(back.layer, 3u);
  EXPECT_EQ(back.start, 5u);
  EXPECT_EQ(back.rows, 2u);
  EXPECT_EQ(values, 16u);
  EXPECT_FALSE(DecodeHead(RecordType::kVStore, payload.Slice(0, head_bytes - 1), m, values).ok());

  const SsmPut put{"sid", {{0, Bytes::CopyOf("first")}, {7, Bytes::CopyOf("second")}}};
  const Bytes put_payload = Joined(EncodePayload(put));
  ASSERT_TRUE(
      DecodeHead(RecordType::kSsmPut, put_payload.Slice(0, HeadBytes<SsmPut>(3)), m, values).ok());
  EXPECT_EQ(std::get<SsmPut>(m).sid, "sid");
  EXPECT_EQ(values, 2u);  // the layer count
  const LayerHead second = DecodeLayerHead(put_payload.data() + SsmPutValueOffsets(put)[1] -
                                           FieldWire<LayerBlobs>::kItemHead);
  EXPECT_EQ(second.layer, 7u);
  EXPECT_EQ(second.length, 6u);
}

}  // namespace
}  // namespace prefixd::persist
