// Tests for a snapshot's cold directory (persist/cold_directory.h): a round trip whose offsets
// are those of the SSM puts it lists (as SsmPutValueOffsets places their values); every cut of
// the payload, trailing bytes, an entry that does not start where the one before ends, a
// region past the file or short of its records, a duplicate sid and a sid past the limit are
// refused. A snapshot built byte by byte to docs/storage-format.md (a hot put, a directory, the
// cold puts it lists, the end record) loads through Durability on an in-memory Env with the cold
// layers placed, not read, and served bit-exact; without its directory (the older format) it
// loads the same; with its region end moved it is refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/bytes.h"
#include "fuzz/mem_env.h"
#include "persist/cold_directory.h"
#include "persist/durability.h"
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
  return DecodeColdDirectory(payload, kStart, file_size, kMaxSid, out).message();
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

// Records appended to a snapshot file under construction, sealed at the end.
class SnapshotBuilder {
 public:
  SnapshotBuilder() {
    uint8_t header[kFileHeaderSize];
    EncodeFileHeader(NewFileHeader(kSnapshotFileMagic, 0, 1), header);
    file_.assign(reinterpret_cast<const char*>(header), kFileHeaderSize);
  }
  uint64_t size() const { return file_.size(); }
  void Add(RecordType type, const std::vector<Bytes>& payload, uint8_t flags = 0) {
    RecordHeader h;
    h.type = type;
    h.flags = flags;
    for (const Bytes& piece : payload) h.payload_length += piece.size();
    uint8_t header[kRecordHeaderSize];
    EncodeRecordHeader(h, header);
    file_.append(reinterpret_cast<const char*>(header), kRecordHeaderSize);
    for (const Bytes& piece : payload) file_.append(piece.view());
  }
  std::string Sealed() const {
    std::string out = file_;
    SealRecordsInPlace(out);
    return out;
  }

 private:
  std::string file_;
};

// Opens a data directory on `env` holding `snapshot` alone; returns Open's error text. `env`
// serves the cold layers afterwards, so it must outlive `state`.
std::string Load(MemEnv& env, const std::string& snapshot, store::StateStore& state) {
  env.Put("/d/snapshot.pds", snapshot);
  DurabilityOptions options;
  options.dir = "/d";
  options.env = &env;
  options.policy = FsyncPolicy::kNo;
  options.auto_rewrite_percentage = 0;
  Durability durability(options, StoreSet(Stores{state}));
  return durability.Open().message();
}

TEST(ColdDirectory, ASnapshotBuiltToTheFormatLoadsItsColdLayersFromTheDirectory) {
  const std::vector<SsmPut> cold = {
      {"c1", {{0, Bytes::CopyOf("cold")}, {3, Bytes::CopyOf("")}}},
      {"c2", {{1, Bytes::CopyOf(std::string(40, 'x'))}}},
  };
  SnapshotBuilder with, without;
  const SsmPut hot{"hot", {{5, Bytes::CopyOf("hot value")}}};
  with.Add(RecordType::kSsmPut, EncodePayload(Mutation(hot)));
  without.Add(RecordType::kSsmPut, EncodePayload(Mutation(hot)));
  ColdDirectory directory;
  for (const SsmPut& put : cold) {
    ColdEntry& e = directory.entries.emplace_back();
    e.sid = put.sid;
    for (const auto& [layer, value] : put.layers) e.layers.emplace_back(layer, value.size());
  }
  uint64_t at = with.size() + kRecordHeaderSize + EncodeColdDirectory(directory).size();
  for (ColdEntry& e : directory.entries) {
    e.record_offset = at;
    at += kRecordHeaderSize + SsmPutPayloadLength(e);
  }
  directory.region_end = at;
  const uint64_t directory_at = with.size();
  with.Add(RecordType::kColdDirectory, {EncodeColdDirectory(directory)});
  for (const SsmPut& put : cold) {
    with.Add(RecordType::kSsmPut, EncodePayload(Mutation(put)), kRecordFlagCold);
    without.Add(RecordType::kSsmPut, EncodePayload(Mutation(put)), kRecordFlagCold);
  }
  ASSERT_EQ(with.size(), directory.region_end);
  with.Add(RecordType::kSnapshotEnd, EncodePayload(Mutation(SnapshotEnd{3})));
  without.Add(RecordType::kSnapshotEnd, EncodePayload(Mutation(SnapshotEnd{3})));

  for (const std::string& file : {with.Sealed(), without.Sealed()}) {
    MemEnv env;
    store::StateStore state(4);
    ASSERT_EQ(Load(env, file, state), "");
    const store::StoreStats stats = state.Stats();
    EXPECT_EQ(stats.cold_layers, 3u) << "placed, not loaded";
    EXPECT_EQ(stats.payload_bytes, hot.layers[0].second.size());
    for (const SsmPut& put : cold) {
      const auto layers = state.ReadSession(put.sid);
      ASSERT_TRUE(layers.has_value()) << put.sid;
      ASSERT_EQ(layers->size(), put.layers.size());
      for (size_t i = 0; i < put.layers.size(); ++i) {
        EXPECT_EQ((*layers)[i].first, put.layers[i].first);
        EXPECT_EQ((*layers)[i].second.view(), put.layers[i].second.view()) << put.sid;
      }
    }
  }
  // The directory sealed again with its region end one record short: corruption at its offset.
  std::string moved = with.Sealed();
  PutU64(reinterpret_cast<uint8_t*>(moved.data()) + directory_at + kRecordHeaderSize,
         directory.entries[1].record_offset);
  SealRecordsInPlace(moved);
  MemEnv env;
  store::StateStore state(4);
  const std::string err = Load(env, moved, state);
  EXPECT_NE(err.find("bad record at offset " + std::to_string(directory_at)), std::string::npos)
      << err;
  EXPECT_NE(err.find("cold directory is damaged"), std::string::npos) << err;
}

}  // namespace
}  // namespace prefixd::persist
