// Tests for the log framing (persist/log_format.h), RecordReader and the mutation payload codec
// (persist/mutation.h): a segment written by the real LogWriter matches the documented bytes;
// every truncation point reads as whole records then a torn tail; a flipped bit anywhere in a
// middle record, junk between records and bad length fields read as corruption that
// NextValidRecord steps over; zero-filled tails; file-header checks; and payload round trips and
// rejections for every record type.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <xxhash.h>

#include "common/bytes.h"
#include "common/settings.h"
#include "persist/log_format.h"
#include "persist/log_writer.h"
#include "persist/mutation.h"
#include "persist/record_reader.h"

namespace prefixd::persist {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Helpers

std::string RandomBytes(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out(size, '\0');
  for (auto& c : out) c = static_cast<char>(rng());
  return out;
}

Mutation Put(std::string sid, std::vector<std::pair<uint32_t, std::string>> layers) {
  SsmPut m{std::move(sid), {}};
  for (auto& [layer, blob] : layers) m.layers.emplace_back(layer, Bytes::CopyOf(blob));
  return m;
}

Mutation DropLayer(std::string sid, uint32_t layer) { return SsmDropLayer{std::move(sid), layer}; }
Mutation DropSession(std::string sid) { return SsmDropSession{std::move(sid)}; }
Mutation Flush() { return FlushAll{}; }
Mutation End(uint64_t count) { return SnapshotEnd{count}; }

std::string Concat(const std::vector<Bytes>& pieces) {
  std::string out;
  for (const Bytes& p : pieces) out.append(p.view());
  return out;
}

// Same type and the same payload bytes.
void ExpectSameMutation(const Mutation& expected, const Mutation& actual) {
  EXPECT_EQ(TypeOf(actual), TypeOf(expected));
  EXPECT_TRUE(Concat(EncodePayload(actual)) == Concat(EncodePayload(expected)))
      << Describe(actual) << " differs from " << Describe(expected);
}

// The six records every segment test uses: mixed types and sizes, with a ~2.4 KB record in the
// middle (index 2) for the bit-flip test and an empty payload (FLUSHALL) near the end.
std::vector<Mutation> SampleMutations() {
  return {
      Put("s0", {{0, "x"}}),
      DropLayer("s0", 7),
      Put("session-2", {{0, ""}, {1, RandomBytes(300, 2)}, {5, RandomBytes(2000, 3)}}),
      Put("s3", {{9, RandomBytes(9000, 4)}}),
      Flush(),
      DropSession("s5"),
  };
}

// A segment image built by hand from the format description, with where each record starts and
// ends.
struct Image {
  std::string bytes;
  std::vector<uint64_t> starts;
  std::vector<uint64_t> ends;
};

constexpr uint32_t kSalt = 0x5a17f00d;

FileHeader MakeFileHeader(const char (&magic)[8], uint64_t sequence, uint64_t base_lsn,
                          uint32_t version = kFormatVersion, uint32_t salt = kSalt) {
  FileHeader h;
  std::memcpy(h.magic, magic, 8);
  h.version = version;
  h.salt = salt;
  h.sequence = sequence;
  h.base_lsn = base_lsn;
  return h;
}

std::string FileHeaderBytes(const char (&magic)[8], uint64_t sequence, uint64_t base_lsn,
                            uint32_t version = kFormatVersion, uint32_t salt = kSalt) {
  FileHeader h;
  std::memcpy(h.magic, magic, 8);
  h.version = version;
  h.salt = salt;
  h.sequence = sequence;
  h.base_lsn = base_lsn;
  uint8_t out[kFileHeaderSize];
  EncodeFileHeader(h, out);
  return std::string(reinterpret_cast<char*>(out), kFileHeaderSize);
}

std::string RecordBytes(const Mutation& m, uint64_t lsn, uint64_t seed) {
  std::vector<Bytes> payload = EncodePayload(m);
  uint8_t header[kRecordHeaderSize];
  SealRecord(seed, TypeOf(m), lsn, payload, header);
  return std::string(reinterpret_cast<char*>(header), kRecordHeaderSize) + Concat(payload);
}

Image BuildImage(const std::vector<Mutation>& ms, uint64_t first_lsn = 1, uint32_t salt = kSalt) {
  Image image;
  image.bytes = FileHeaderBytes(kLogFileMagic, 1, first_lsn, kFormatVersion, salt);
  const uint64_t seed = FileSeed(MakeFileHeader(kLogFileMagic, 1, first_lsn, kFormatVersion, salt));
  uint64_t lsn = first_lsn;
  for (const Mutation& m : ms) {
    image.starts.push_back(image.bytes.size());
    image.bytes += RecordBytes(m, lsn++, seed);
    image.ends.push_back(image.bytes.size());
  }
  return image;
}

void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "can't write " << path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// How recovery (Durability::ReplaySegments) classifies what a reader finds in a segment.
enum class Verdict { kClean, kTornTail, kCorrupt };

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kClean:
      return "clean";
    case Verdict::kTornTail:
      return "torn tail";
    case Verdict::kCorrupt:
      return "corrupt";
  }
  return "?";
}

struct Scan {
  std::string open_error;
  std::vector<Record> records;
  Verdict verdict = Verdict::kClean;
  uint64_t bad_offset = 0;
  uint64_t next_valid = 0;
  std::string problem;
  // With `resume`: the records read after NextValidRecord, up to the next problem or the end.
  std::vector<Record> resumed;
};

// Reads `path` as recovery does: records until the first bad one, then asks NextValidRecord
// whether anything valid follows (corruption) or not (a torn tail); optionally resumes there.
Scan ScanFile(const std::string& path, bool resume = false) {
  Scan s;
  RecordReader reader;
  s.open_error = reader.Open(path, kLogFileMagic).message();
  if (!s.open_error.empty()) return s;
  Record r;
  while (true) {
    ReadStatus status = reader.Next(r);
    if (status == ReadStatus::kEnd) return s;
    if (status == ReadStatus::kBad) break;
    s.records.push_back(std::move(r));
  }
  s.bad_offset = reader.bad_offset();
  s.problem = reader.problem();
  s.next_valid = reader.NextValidRecord(s.bad_offset);
  s.verdict = s.next_valid == 0 ? Verdict::kTornTail : Verdict::kCorrupt;
  if (resume && s.next_valid != 0) {
    reader.Seek(s.next_valid);
    while (reader.Next(r) == ReadStatus::kRecord) s.resumed.push_back(std::move(r));
  }
  return s;
}

class RecordReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string base = (fs::temp_directory_path() / "prefixd-rr-XXXXXX").string();
    std::vector<char> tmpl(base.begin(), base.end());
    tmpl.push_back('\0');
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl.data();
    path_ = dir_ + "/log-00000000000000000001.seg";
    mutations_ = SampleMutations();
    image_ = BuildImage(mutations_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Checks that `records` are sample records [first, first + count) at their image offsets.
  void ExpectSampleRecords(const std::vector<Record>& records, size_t first, size_t count,
                           uint64_t shift = 0) {
    ASSERT_EQ(records.size(), count);
    for (size_t i = 0; i < count; ++i) {
      const Record& r = records[i];
      size_t k = first + i;
      EXPECT_EQ(r.offset, image_.starts[k] + shift) << "record " << k;
      EXPECT_EQ(r.header.lsn, k + 1) << "record " << k;
      EXPECT_EQ(r.header.type, TypeOf(mutations_[k])) << "record " << k;
      Mutation decoded;
      ASSERT_EQ(DecodePayload(r.header.type, r.payload, decoded).ToString(), "OK")
          << "record " << k;
      ExpectSameMutation(mutations_[k], decoded);
    }
  }

  std::string dir_;
  std::string path_;
  std::vector<Mutation> mutations_;
  Image image_;
};

// ---------------------------------------------------------------------------------------------
// Format

TEST_F(RecordReaderTest, HeaderLayoutIsLittleEndianAsDocumented) {
  RecordHeader h;
  h.type = RecordType::kSsmDropSession;
  h.lsn = 0x0102030405060708;
  h.payload_length = 0x1122334455667788;
  h.checksum = 0xA1A2A3A4A5A6A7A8;
  uint8_t out[kRecordHeaderSize];
  EncodeRecordHeader(h, out);
  const uint8_t expected[kRecordHeaderSize] = {
      0xA8, 0xA7, 0xA6, 0xA5, 0xA4, 0xA3, 0xA2, 0xA1,  // checksum
      'P',  'F',  'X',  'R',                           // magic
      3,    0,    0,    0,                             // type, flags, reserved
      0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  // lsn
      0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,  // payload length
  };
  EXPECT_EQ(std::memcmp(out, expected, kRecordHeaderSize), 0);
  RecordHeader back = DecodeRecordHeader(out);
  EXPECT_EQ(back.checksum, h.checksum);
  EXPECT_EQ(back.magic, kRecordMagic);
  EXPECT_EQ(back.type, h.type);
  EXPECT_EQ(back.lsn, h.lsn);
  EXPECT_EQ(back.payload_length, h.payload_length);

  FileHeader f;
  std::memcpy(f.magic, kSnapshotFileMagic, 8);
  f.sequence = 0x0A0B;
  f.base_lsn = 77;
  uint8_t fout[kFileHeaderSize];
  EncodeFileHeader(f, fout);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(fout), 8), std::string("PFXDSNP\0", 8));
  EXPECT_EQ(GetU32(fout + 8), kFormatVersion);
  EXPECT_EQ(GetU64(fout + 16), 0x0A0Bu);
  EXPECT_EQ(DecodeFileHeader(fout).base_lsn, 77u);
}

TEST_F(RecordReaderTest, ChecksumCoversHeaderTailAndPayloadWhateverThePieces) {
  std::vector<Bytes> one = {Bytes::CopyOf("hello world")};
  std::vector<Bytes> three = {Bytes::CopyOf("hel"), Bytes::CopyOf(""), Bytes::CopyOf("lo world")};
  uint8_t a[kRecordHeaderSize], b[kRecordHeaderSize], c[kRecordHeaderSize];
  SealRecord(9, RecordType::kSsmPut, 5, one, a);
  SealRecord(9, RecordType::kSsmPut, 5, three, b);
  EXPECT_EQ(std::memcmp(a, b, kRecordHeaderSize), 0) << "checksum depends on piece boundaries";
  SealRecord(9, RecordType::kSsmPut, 6, one, c);
  EXPECT_NE(GetU64(a), GetU64(c)) << "the lsn is not covered by the checksum";
  SealRecord(10, RecordType::kSsmPut, 5, one, c);
  EXPECT_NE(GetU64(a), GetU64(c)) << "the seed does not change the checksum";
  EXPECT_EQ(GetU64(a + 24), 11u);
}

TEST_F(RecordReaderTest, LogWriterWritesTheDocumentedBytes) {
  {
    LogWriter writer(dir_, FsyncPolicy::kAlways, uint64_t{1} << 20, 1, 1, {});
    ASSERT_EQ(writer.Start().ToString(), "OK");
    for (const Mutation& m : mutations_) writer.Append(TypeOf(m), EncodePayload(m));
    writer.Sync();
    LogStats stats = writer.Stats();
    EXPECT_EQ(stats.written_lsn, mutations_.size());
    EXPECT_EQ(stats.synced_lsn, mutations_.size());
    EXPECT_EQ(stats.bytes, image_.bytes.size());
  }
  ASSERT_TRUE(fs::exists(path_)) << "segment name is not log-<20 digits>.seg";
  std::string written = ReadFile(path_);
  ASSERT_GE(written.size(), kFileHeaderSize);
  // The salt is random per file; the rest follows from it.
  image_ = BuildImage(mutations_, 1, GetU32(reinterpret_cast<const uint8_t*>(written.data()) + 12));
  ASSERT_EQ(written.size(), image_.bytes.size());
  EXPECT_TRUE(written == image_.bytes) << "LogWriter and the format description disagree";

  Scan s = ScanFile(path_);
  ASSERT_EQ(s.open_error, "");
  EXPECT_EQ(s.verdict, Verdict::kClean);
  ExpectSampleRecords(s.records, 0, mutations_.size());
}

// ---------------------------------------------------------------------------------------------
// Truncation, corruption, junk

TEST_F(RecordReaderTest, EveryTruncationPointIsWholeRecordsThenATornTail) {
  ASSERT_NO_FATAL_FAILURE(WriteFile(path_, image_.bytes));
  // Cut from the end downwards, so one file is shortened in place.
  for (uint64_t cut = image_.bytes.size(); cut-- > 0;) {
    ASSERT_EQ(::truncate(path_.c_str(), static_cast<off_t>(cut)), 0);
    SCOPED_TRACE("file cut to " + std::to_string(cut) + " bytes");
    Scan s = ScanFile(path_);
    if (cut < kFileHeaderSize) {
      EXPECT_NE(s.open_error, "") << "a file without a whole header opened";
      continue;
    }
    ASSERT_EQ(s.open_error, "");
    size_t whole = 0;
    while (whole < image_.ends.size() && image_.ends[whole] <= cut) ++whole;
    ASSERT_NO_FATAL_FAILURE(ExpectSampleRecords(s.records, 0, whole));
    bool at_boundary = cut == kFileHeaderSize || (whole > 0 && image_.ends[whole - 1] == cut);
    if (at_boundary) {
      EXPECT_EQ(s.verdict, Verdict::kClean) << s.problem;
    } else {
      EXPECT_EQ(s.verdict, Verdict::kTornTail)
          << "problem '" << s.problem << "', next valid " << s.next_valid;
      EXPECT_EQ(s.bad_offset, image_.starts[whole]);
      EXPECT_EQ(s.next_valid, 0u);
      EXPECT_NE(s.problem, "");
    }
  }
}

TEST_F(RecordReaderTest, AFlippedBitAnywhereInAMiddleRecordIsCorruption) {
  const size_t k = 2;
  const uint64_t begin = image_.starts[k], end = image_.ends[k];
  ASSERT_GT(end - begin, 2000u);
  ASSERT_NO_FATAL_FAILURE(WriteFile(path_, image_.bytes));
  int fd = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  for (uint64_t pos = begin; pos < end; ++pos) {
    // Damage one byte in place and put it back after (rewriting whole files is slow on ext4).
    char original = image_.bytes[pos];
    char flipped = static_cast<char>(original ^ (1u << (pos % 8)));
    ASSERT_EQ(::pwrite(fd, &flipped, 1, static_cast<off_t>(pos)), 1);
    SCOPED_TRACE("bit " + std::to_string(pos % 8) + " of byte " + std::to_string(pos) +
                 " (record offset " + std::to_string(pos - begin) + ")");
    Scan s = ScanFile(path_, /*resume=*/true);
    ASSERT_EQ(::pwrite(fd, &original, 1, static_cast<off_t>(pos)), 1);
    ASSERT_EQ(s.open_error, "");
    ASSERT_NO_FATAL_FAILURE(ExpectSampleRecords(s.records, 0, k));
    EXPECT_EQ(s.bad_offset, begin) << s.problem;
    EXPECT_EQ(s.verdict, Verdict::kCorrupt) << VerdictName(s.verdict) << ": " << s.problem;
    EXPECT_EQ(s.next_valid, image_.starts[k + 1]);
    ASSERT_NO_FATAL_FAILURE(ExpectSampleRecords(s.resumed, k + 1, mutations_.size() - k - 1));
  }
  ::close(fd);
}

TEST_F(RecordReaderTest, AFlippedBitInTheLastRecordIsATornTail) {
  const size_t k = mutations_.size() - 1;
  for (uint64_t pos = image_.starts[k]; pos < image_.ends[k]; ++pos) {
    std::string damaged = image_.bytes;
    damaged[pos] = static_cast<char>(damaged[pos] ^ 0x10);
    ASSERT_NO_FATAL_FAILURE(WriteFile(path_, damaged));
    SCOPED_TRACE("byte " + std::to_string(pos));
    Scan s = ScanFile(path_);
    ASSERT_NO_FATAL_FAILURE(ExpectSampleRecords(s.records, 0, k));
    EXPECT_EQ(s.bad_offset, image_.starts[k]);
    EXPECT_EQ(s.verdict, Verdict::kTornTail) << s.problem;
  }
}

TEST_F(RecordReaderTest, ZeroFilledTailAfterTheLastRecordIsATornTail) {
  ASSERT_NO_FATAL_FAILURE(WriteFile(path_, image_.bytes + std::string(4096, '\0')));
  Scan s = ScanFile(path_);
  ASSERT_EQ(s.open_error, "");
  ExpectSampleRecords(s.records, 0, mutations_.size());
  EXPECT_EQ(s.verdict, Verdict::kTornTail);
  EXPECT_EQ(s.bad_offset, image_.bytes.size());
  EXPECT_EQ(s.next_valid, 0u);
  EXPECT_NE(s.problem.find("magic"), std::string::npos) << s.problem;

  // A zero-filled tail shorter than a record header.
  ASSERT_NO_FATAL_FAILURE(WriteFile(path_, image_.bytes + std::string(17, '\0')));
  s = ScanFile(path_);
  ExpectSampleRecords(s.records, 0, mutations_.size());
  EXPECT_EQ(s.verdict, Verdict::kTornTail);
  EXPECT_EQ(s.bad_offset, image_.bytes.size());
}

TEST_F(RecordReaderTest, ZeroFilledHoleBeforeValidRecordsIsCorruption) {
  // A page that never reached the disk in the middle of the file, records after it.
  std::string damaged = image_.bytes;
  const size_t k = 3;
  std::fill(damaged.begin() + static_cast<long>(image_.starts[k]),
            damaged.begin() + static_cast<long>(image_.ends[k]), '\0');
  ASSERT_NO_FATAL_FAILURE(WriteFile(path_, damaged));
  Scan s = ScanFile(path_, true);
  ExpectSampleRecords(s.records, 0, k);
  EXPECT_EQ(s.verdict, Verdict::kCorrupt);
  EXPECT_EQ(s.bad_offset, image_.starts[k]);
  EXPECT_EQ(s.next_valid, image_.starts[k + 1]);
  ExpectSampleRecords(s.resumed, k + 1, mutations_.size() - k - 1);
}

TEST_F(RecordReaderTest, LengthFieldPastTheEnd) {
  // Sets the payload length field of record k to `length` (the length is checked before the
  // checksum, so the reader must report it as running past the end).
  auto with_length = [&](size_t k, uint64_t length) {
    std::string damaged = image_.bytes;
    auto* header = reinterpret_cast<uint8_t*>(damaged.data() + image_.starts[k]);
    PutU64(header + 24, length);
    return damaged;
  };
  const size_t last = mutations_.size() - 1;
  for (uint64_t length : {image_.ends[last] - image_.starts[last] - kRecordHeaderSize + 1,
                          uint64_t{1} << 40, std::numeric_limits<uint64_t>::max()}) {
    SCOPED_TRACE("payload length " + std::to_string(length));
    // The last record: nothing valid follows, so recovery treats it as a torn tail.
    ASSERT_NO_FATAL_FAILURE(WriteFile(path_, with_length(last, length)));
    Scan s = ScanFile(path_);
    ExpectSampleRecords(s.records, 0, last);
    EXPECT_EQ(s.verdict, Verdict::kTornTail);
    EXPECT_EQ(s.bad_offset, image_.starts[last]);
    EXPECT_NE(s.problem.find("past the end"), std::string::npos) << s.problem;

    // A middle record: the records after it are valid, so this is corruption.
    ASSERT_NO_FATAL_FAILURE(WriteFile(path_, with_length(1, length)));
    s = ScanFile(path_, true);
    ExpectSampleRecords(s.records, 0, 1);
    EXPECT_EQ(s.verdict, Verdict::kCorrupt);
    EXPECT_EQ(s.bad_offset, image_.starts[1]);
    EXPECT_EQ(s.next_valid, image_.starts[2]);
    ExpectSampleRecords(s.resumed, 2, mutations_.size() - 2);
  }
  // A length that stays inside the file but is wrong fails the checksum.
  ASSERT_NO_FATAL_FAILURE(WriteFile(path_, with_length(2, 100)));
  Scan s = ScanFile(path_, true);
  ExpectSampleRecords(s.records, 0, 2);
  EXPECT_EQ(s.verdict, Verdict::kCorrupt);
  EXPECT_EQ(s.next_valid, image_.starts[3]);
}

TEST_F(RecordReaderTest, JunkBetweenRecordsIsCorruptionAndReadingResumesAfterIt) {
  std::string junk = RandomBytes(777, 99);
  // A stray magic inside the junk must not be taken for a record.
  junk.replace(100, 4, "PFXR");
  std::string damaged = image_.bytes;
  damaged.insert(image_.ends[2], junk);
  ASSERT_NO_FATAL_FAILURE(WriteFile(path_, damaged));
  Scan s = ScanFile(path_, true);
  ExpectSampleRecords(s.records, 0, 3);
  EXPECT_EQ(s.verdict, Verdict::kCorrupt);
  EXPECT_EQ(s.bad_offset, image_.ends[2]);
  EXPECT_EQ(s.next_valid, image_.starts[3] + junk.size());
  ExpectSampleRecords(s.resumed, 3, mutations_.size() - 3, junk.size());
}

// Issue 9, item 3: a value may hold bytes that look like records (a backup of the data
// directory stored as a value). Cut inside such a value's record, the file must still read as a
// torn tail: records copied from this file have lsns already read, and records copied from any
// other file (another segment, a snapshot) fail this file's seeded checksum.
TEST_F(RecordReaderTest, RecordsStoredInsideAValueNeverPassForRecordsOfTheLog) {
  const Image other_segment = BuildImage(mutations_, 1, kSalt + 1);
  std::string snapshot = FileHeaderBytes(kSnapshotFileMagic, 0, 7, kFormatVersion, 77);
  const uint64_t snapshot_seed =
      FileSeed(MakeFileHeader(kSnapshotFileMagic, 0, 7, kFormatVersion, 77));
  for (const Mutation& m : mutations_) snapshot += RecordBytes(m, 0, snapshot_seed);
  // The same file as it was before the value, twice, then another segment and a snapshot.
  const std::string copies = image_.bytes + image_.bytes + other_segment.bytes + snapshot;
  std::vector<Mutation> with_value = mutations_;
  with_value.push_back(Put("backup", {{0, copies}}));
  const Image image = BuildImage(with_value);
  const uint64_t begin = image.starts.back(), end = image.ends.back();
  ASSERT_NO_FATAL_FAILURE(WriteFile(path_, image.bytes));
  for (uint64_t cut = end - 1; cut > begin; cut -= 97) {
    ASSERT_EQ(::truncate(path_.c_str(), static_cast<off_t>(cut)), 0);
    SCOPED_TRACE("cut at " + std::to_string(cut));
    Scan s = ScanFile(path_);
    ASSERT_EQ(s.records.size(), mutations_.size());
    EXPECT_EQ(s.bad_offset, begin);
    EXPECT_EQ(s.verdict, Verdict::kTornTail) << "a copy at " << s.next_valid << " passed";
  }
}

TEST_F(RecordReaderTest, AnLsnThatDoesNotContinueTheSequenceIsBad) {
  // Records 1, 2, 4: the third is whole and checksummed, but not the next record of this log.
  std::string bytes = image_.bytes.substr(0, image_.ends[1]);
  const uint64_t seed = FileSeed(MakeFileHeader(kLogFileMagic, 1, 1));
  bytes += RecordBytes(mutations_[2], 4, seed);
  ASSERT_NO_FATAL_FAILURE(WriteFile(path_, bytes));
  Scan s = ScanFile(path_);
  ASSERT_EQ(s.records.size(), 2u);
  EXPECT_EQ(s.bad_offset, image_.ends[1]);
  EXPECT_NE(s.problem.find("expected 3"), std::string::npos) << s.problem;
  // A segment whose first record is not its base lsn.
  ASSERT_NO_FATAL_FAILURE(WriteFile(path_, BuildImage(mutations_, 1).bytes));
  std::string shifted = FileHeaderBytes(kLogFileMagic, 1, 2) +
                        BuildImage(mutations_, 1).bytes.substr(kFileHeaderSize);
  ASSERT_NO_FATAL_FAILURE(WriteFile(path_, shifted));
  s = ScanFile(path_);
  EXPECT_TRUE(s.records.empty());
  EXPECT_EQ(s.bad_offset, kFileHeaderSize);
}

TEST_F(RecordReaderTest, VersionOneFilesStillReadWithSeedZero) {
  std::string bytes = FileHeaderBytes(kLogFileMagic, 1, 1, 1, 0);
  for (size_t k = 0; k < mutations_.size(); ++k) bytes += RecordBytes(mutations_[k], k + 1, 0);
  ASSERT_NO_FATAL_FAILURE(WriteFile(path_, bytes));
  Scan s = ScanFile(path_);
  ASSERT_EQ(s.open_error, "");
  EXPECT_EQ(s.verdict, Verdict::kClean) << s.problem;
  EXPECT_EQ(s.records.size(), mutations_.size());
}

TEST_F(RecordReaderTest, FileHeaderChecks) {
  ASSERT_NO_FATAL_FAILURE(WriteFile(path_, image_.bytes));
  {
    RecordReader reader;
    EXPECT_FALSE(reader.Open(path_, kSnapshotFileMagic).ok()) << "a log opened as a snapshot";
  }
  {
    RecordReader reader;
    EXPECT_FALSE(reader.Open(dir_ + "/missing.seg", kLogFileMagic).ok());
  }
  for (uint32_t version : {0u, kFormatVersion + 1}) {
    std::string other =
        FileHeaderBytes(kLogFileMagic, 1, 1, version) + image_.bytes.substr(kFileHeaderSize);
    ASSERT_NO_FATAL_FAILURE(WriteFile(path_, other));
    RecordReader reader;
    const std::string err = reader.Open(path_, kLogFileMagic).message();
    EXPECT_NE(err.find("version " + std::to_string(version)), std::string::npos) << err;
  }
  ASSERT_NO_FATAL_FAILURE(WriteFile(path_, image_.bytes.substr(0, kFileHeaderSize)));
  {
    RecordReader reader;
    ASSERT_EQ(reader.Open(path_, kLogFileMagic).ToString(), "OK");
    EXPECT_EQ(reader.file_header().sequence, 1u);
    EXPECT_EQ(reader.file_header().base_lsn, 1u);
    Record r;
    EXPECT_EQ(reader.Next(r), ReadStatus::kEnd);
    EXPECT_EQ(reader.NextValidRecord(kFileHeaderSize), 0u);
  }
}

TEST_F(RecordReaderTest, ReadAtReturnsStoredBytesAndRefusesRangesPastTheEnd) {
  ASSERT_NO_FATAL_FAILURE(WriteFile(path_, image_.bytes));
  RecordReader reader;
  ASSERT_EQ(reader.Open(path_, kLogFileMagic).ToString(), "OK");
  Bytes out;
  ASSERT_EQ(reader.ReadAt(image_.starts[3], 100, out).ToString(), "OK");
  EXPECT_EQ(out.view(), std::string_view(image_.bytes).substr(image_.starts[3], 100));
  EXPECT_FALSE(reader.ReadAt(image_.bytes.size() - 10, 11, out).ok());
  EXPECT_FALSE(reader.ReadAt(image_.bytes.size() + 1, 0, out).ok());
  EXPECT_FALSE(reader.ReadAt(10, std::numeric_limits<uint64_t>::max(), out).ok());
}

// ---------------------------------------------------------------------------------------------
// Mutation payload codec

std::vector<Mutation> CodecSamples() {
  std::vector<Mutation> out = {
      Put("sess", {{0, "a"}}),
      Put("", {{0, ""}}),
      Put("multi", {{3, RandomBytes(17, 1)}, {0, ""}, {0x7FFFFFFF, RandomBytes(64, 2)}}),
      Put(std::string("bin\0\xff\r\nsid", 10), {{1, std::string("\0\0\0", 3)}}),
      Put("nolayers", {}),
      DropLayer("sess", 0),
      DropLayer("sess", 0x7FFFFFFF),
      DropLayer("", 12),
      DropSession("sess"),
      DropSession(""),
      Flush(),
      End(0),
      End(uint64_t{1} << 40),
      StringMultiSet{{StringSet{"a", 2, 0, Blob{{Bytes::CopyOf("1")}}},
                      StringSet{"big", 0, 0, Blob{{Bytes::CopyOf(RandomBytes(3000, 3))}}},
                      StringSet{"", 1, 1700000000123, Blob{}},
                      StringSet{"a", 0, 0, Blob{{Bytes::CopyOf(RandomBytes(511, 4))}}}}},
  };
  return out;
}

Bytes Encoded(const Mutation& m) { return Bytes::CopyOf(Concat(EncodePayload(m))); }

TEST(MutationCodecTest, RoundTripsEveryRecordType) {
  for (const Mutation& m : CodecSamples()) {
    SCOPED_TRACE(Describe(m));
    Bytes payload = Encoded(m);
    Mutation back;
    ASSERT_EQ(DecodePayload(TypeOf(m), payload, back).ToString(), "OK");
    ExpectSameMutation(m, back);
  }
}

TEST(MutationCodecTest, LargeBlobRoundTripsAsASliceWithoutACopy) {
  Mutation m = Put("big", {{1, RandomBytes(3 << 20, 7)}, {2, RandomBytes(1, 8)}});
  std::vector<Bytes> pieces = EncodePayload(m);
  // The blobs themselves are pieces, not copied into a metadata buffer.
  bool found = false;
  for (const Bytes& p : pieces) found |= p.data() == std::get<SsmPut>(m).layers[0].second.data();
  EXPECT_TRUE(found) << "the 3 MB blob was copied into the payload pieces";
  Bytes payload = Bytes::CopyOf(Concat(pieces));
  Mutation back;
  ASSERT_EQ(DecodePayload(TypeOf(m), payload, back).ToString(), "OK");
  ExpectSameMutation(m, back);
  const uint8_t* blob = std::get<SsmPut>(back).layers[0].second.data();
  EXPECT_TRUE(blob >= payload.data() && blob < payload.data() + payload.size())
      << "decoded blob is not a slice of the payload";
}

// A record for the log: small blobs share the staging buffer with the fields (one contiguous
// buffer behind the header's room), large ones are written from the stored buffer itself, and
// the pieces are the payload EncodePayload gives.
TEST(MutationCodecTest, SmallRecordsAreOneBufferAndLargeBlobsAreReferenced) {
  const Mutation small =
      StringMultiSet{{StringSet{"k1", 0, 0, Blob{{Bytes::CopyOf("v1")}}},
                      StringSet{"k2", 0, 0, Blob{{Bytes::CopyOf(std::string(511, 'x'))}}}}};
  EncodedRecord record = EncodeRecord(small);
  EXPECT_EQ(record.type, RecordType::kStringMultiSetCompact) << "every value is below 512 bytes";
  EXPECT_TRUE(record.rest.empty());
  ASSERT_GT(record.head.size(), kRecordHeaderSize);
  EXPECT_EQ(record.payload_length(), record.head.size() - kRecordHeaderSize);
  Mutation back;
  ASSERT_EQ(DecodePayload(record.type,
                          record.head.Slice(kRecordHeaderSize, record.payload_length()), back)
                .ToString(),
            "OK");
  ExpectSameMutation(small, back);

  const Bytes large = Bytes::CopyOf(RandomBytes(512, 9));
  const Mutation mixed = StringMultiSet{
      {StringSet{"k1", 0, 0, Blob{{large}}}, StringSet{"k2", 0, 0, Blob{{Bytes::CopyOf("v2")}}}}};
  record = EncodeRecord(mixed);
  EXPECT_EQ(record.type, RecordType::kStringMultiSet) << "one value is 512 bytes";
  ASSERT_EQ(record.rest.size(), 2u);  // the large value, then the second entry's fields
  EXPECT_EQ(record.rest[0].data(), large.data()) << "the 512-byte value was copied";
  std::string joined(record.head.view().substr(kRecordHeaderSize));
  for (const Bytes& piece : record.rest) joined.append(piece.view());
  EXPECT_TRUE(joined == Concat(EncodePayload(mixed)));
  EXPECT_EQ(record.payload_length(), joined.size());
}

// A multi set's entry count is bounded by the payload before anything is reserved, and an entry
// is checked as a string set record is.
TEST(MutationCodecTest, MultiSetCountsAndEntriesAreChecked) {
  std::string payload(4, '\0');
  PutU32(reinterpret_cast<uint8_t*>(payload.data()), 0xFFFFFFFF);
  payload += std::string(40, '\0');
  Mutation back;
  EXPECT_FALSE(DecodePayload(RecordType::kStringMultiSet, Bytes::CopyOf(payload), back).ok());
  const Limits limits = Limits::Hard();
  EXPECT_FALSE(Check(StringMultiSet{}, limits).ok) << "a multi set of no keys";
  EXPECT_FALSE(Check(StringMultiSet{{StringSet{"a", 3 << 1, 0, Blob{}}}}, limits).ok)
      << "an entry naming no encoding";
  Limits small = limits;
  small.memory_budget = 5;
  const persist::Verdict verdict =
      Check(StringMultiSet{{StringSet{"a", 0, 0, Blob{{Bytes::CopyOf("123")}}},
                            StringSet{"b", 0, 0, Blob{{Bytes::CopyOf("456")}}}}},
            small);
  EXPECT_FALSE(verdict.ok);
  EXPECT_TRUE(verdict.out_of_memory) << verdict.why;
  EXPECT_TRUE(Check(StringMultiSet{{StringSet{"a", 0, 0, Blob{}}}}, limits).ok);
}

TEST(MutationCodecTest, RejectsEveryTruncation) {
  for (const Mutation& m : CodecSamples()) {
    SCOPED_TRACE(Describe(m));
    std::string full = Concat(EncodePayload(m));
    for (size_t length = 0; length < full.size(); ++length) {
      Bytes cut = Bytes::CopyOf(std::string_view(full).substr(0, length));
      Mutation back;
      EXPECT_FALSE(DecodePayload(TypeOf(m), cut, back).ok())
          << "accepted a payload cut to " << length << " of " << full.size() << " bytes";
    }
  }
}

TEST(MutationCodecTest, RejectsTrailingBytes) {
  for (const Mutation& m : CodecSamples()) {
    SCOPED_TRACE(Describe(m));
    Bytes longer = Bytes::CopyOf(Concat(EncodePayload(m)) + "Z");
    Mutation back;
    const std::string err = DecodePayload(TypeOf(m), longer, back).message();
    EXPECT_NE(err.find("trailing"), std::string::npos) << err;
  }
}

TEST(MutationCodecTest, RejectsUnknownTypesAndAbsurdLayerCounts) {
  Mutation back;
  EXPECT_FALSE(DecodePayload(static_cast<RecordType>(0), Bytes(), back).ok());
  EXPECT_FALSE(DecodePayload(static_cast<RecordType>(99), Bytes::CopyOf("abc"), back).ok());
  // sid "s", then a layer count of 2^32-1 with almost nothing behind it: rejected before any
  // allocation sized by the count.
  std::string payload;
  uint8_t b[4];
  PutU32(b, 1);
  payload.append(reinterpret_cast<char*>(b), 4);
  payload += "s";
  PutU32(b, 0xFFFFFFFF);
  payload.append(reinterpret_cast<char*>(b), 4);
  payload += std::string(24, '\0');
  EXPECT_FALSE(DecodePayload(RecordType::kSsmPut, Bytes::CopyOf(payload), back).ok());
  // A blob length far past the payload.
  std::string put = Concat(EncodePayload(Put("s", {{1, "abcd"}})));
  PutU64(reinterpret_cast<uint8_t*>(put.data()) + 4 + 1 + 4 + 4, uint64_t{1} << 62);
  EXPECT_FALSE(DecodePayload(RecordType::kSsmPut, Bytes::CopyOf(put), back).ok());
}

// Replay checks against limits no setting can pass: a record accepted live under any value the
// settings allow must replay after a restart with the defaults.
TEST(MutationLimitsTest, ReplayLimitsAreAtLeastTheLargestSettings) {
  const Limits hard = Limits::Hard();
  auto max = [](Setting id) {
    return static_cast<uint64_t>(Settings::Specs()[static_cast<size_t>(id)].max);
  };
  EXPECT_GE(hard.max_sid_len, max(Setting::kMaxSidLen));
  EXPECT_GE(hard.max_layers, max(Setting::kVstoreMaxLayers));
  EXPECT_GE(hard.max_tokens, max(Setting::kVstoreMaxTokens));
  EXPECT_GE(hard.max_tokens, uint64_t{1} << 40) << "logs of builds that allowed 2^40 tokens";
  EXPECT_EQ(hard.max_dim, max(Setting::kVstoreMaxDim));
}

// ---------------------------------------------------------------------------------------------
// Golden bytes: each payload layout of docs/storage-format.md written out by hand from the
// document's tables (little-endian; `str` is a u32 length and the bytes), not produced by the
// encoder under test.

std::string Hex(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == ' ') {
      ++i;
      continue;
    }
    out += static_cast<char>(std::stoi(std::string(text.substr(i, 2)), nullptr, 16));
    i += 2;
  }
  return out;
}

TEST(GoldenBytesTest, EveryPayloadLayoutIsTheDocumentedOne) {
  const std::string row(16, '\x11'), hashes = Hex("0102030405060708");
  KvRegister reg;
  reg.ns = "ns", reg.key_index = 5, reg.value_index = 6, reg.kv_dim = 32, reg.tier = 2;
  reg.block_size = 16, reg.prefill_us = 1000, reg.block_hashes.pieces = {Bytes::CopyOf(hashes)};
  KvPrefix prefix;
  static_cast<PrefixFields&>(prefix) = reg;
  prefix.key_index = prefix.value_index = 0;
  prefix.prefill_us = PrefixFields::kNoPrefill;
  const std::string register_tail = "20000000 02000000 10000000";
  const std::string h22(16, '\x22'), h33(16, '\x33');  // 16-byte hashes
  const std::vector<std::pair<Mutation, std::string>> cases = {
      {Put("ab", {{7, "xyz"}}), Hex("02000000 6162 01000000 07000000 0300000000000000") + "xyz"},
      {DropLayer("ab", 9), Hex("02000000 6162 09000000")},
      {DropSession("ab"), Hex("02000000 6162")},
      {Flush(), ""},
      {KeyExpire{"ab", 1700000000123}, Hex("02000000 6162 7b68e5cf8b010000")},
      {StringSet{"ab", 5, 1700000000123, Blob{{Bytes::CopyOf("xyz")}}},
       Hex("02000000 6162 05000000 7b68e5cf8b010000 0300000000000000") + "xyz"},
      {StringDel{"ab"}, Hex("02000000 6162")},
      {StringMultiSet{{StringSet{"ab", 4, 0, Blob{{Bytes::CopyOf("xyz")}}},
                       StringSet{"c", 0, 1700000000123, Blob{}}}},
       Hex("02000000 02000000 6162 04000000 0000000000000000 0300000000000000") + "xyz" +
           Hex("01000000 63 00000000 7b68e5cf8b010000 0000000000000000")},
      {FlushDb{}, ""},
      {SwapDb{2, 5}, Hex("02000000 05000000")},
      // A set's and a list's members: each `u32 length` + bytes, inside the u64-length blob.
      {SetValue{"ab", 1, 2, Blob{{Bytes::CopyOf(Hex("01000000") + "x" + Hex("00000000"))}}},
       Hex("02000000 6162 01000000 02000000 0900000000000000 01000000") + "x" + Hex("00000000")},
      {ListValue{"ab", 4, 3, Blob{}},
       Hex("02000000 6162 04000000 0300000000000000 0000000000000000")},
      {HashValue{"h", 0, HashValue::kSet,
                 Blob{{Bytes::CopyOf(Hex("01000000") + "f" + Hex("02000000") + "vv")}}},
       Hex("01000000 68 00000000 01000000 0b00000000000000 01000000") + "f" + Hex("02000000") +
           "vv"},
      // A sorted set's pairs: the score's 8 IEEE-754 bytes (1.5, little-endian), then the member.
      {ZsetValue{"z", 1, ZsetValue::kScores,
                 Blob{{Bytes::CopyOf(Hex("08000000 000000000000f83f 01000000") + "a")}}},
       Hex("01000000 7a 01000000 01000000 1100000000000000 08000000 000000000000f83f 01000000") +
           "a"},
      // A stream append: the entry's id (ms 5, seq 1), then its body as type 12's members, and
      // the count of entries its trim removes (2).
      {StreamValue{"x", StreamValue::kAppend, 2,
                   Blob{{Bytes::CopyOf(Hex("0500000000000000 0100000000000000 01000000") + "f" +
                                       Hex("01000000") + "v")}}},
       Hex("01000000 78 01000000 0200000000000000 1a00000000000000 0500000000000000 "
           "0100000000000000 01000000") +
           "f" + Hex("01000000") + "v"},
      {End(5), Hex("0500000000000000")},
      {VCreate{"v", 3, 64, 2}, Hex("01000000 76 0300000000000000 40000000 02000000")},
      {VStore{"v", 1, 2, 1, 4, 8, Blob{{Bytes::CopyOf(row)}}},
       Hex("01000000 76 01000000 0200000000000000 0100000000000000 04000000 08000000 "
           "1000000000000000") +
           row},
      {VDrop{"v"}, Hex("01000000 76")},
      {reg, Hex("02000000 6e73 0500000000000000 0600000000000000 " + register_tail +
                " e803000000000000 0800000000000000") +
                hashes},
      {KvDrop{"ns"}, Hex("02000000 6e73")},
      {prefix, Hex("02000000 6e73 0000000000000000 0000000000000000 " + register_tail +
                   " ffffffffffffffff 0800000000000000") +
                   hashes},
      {PrefixNamespace{"ns", 16, 1, 8, 2, 8, 4096},
       Hex("02000000 6e73 10000000 01000000 08000000 02000000 08000000 0010000000000000")},
      {PrefixBlocks{"ns", h22, Blob{{Bytes::CopyOf(h33)}}, {{0, Bytes::CopyOf(row)}}},
       Hex("02000000 6e73 10000000") + h22 + Hex("1000000000000000") + h33 +
           Hex("01000000 00000000 1000000000000000") + row},
      {PrefixCheckpoints{"ns",
                         h22,
                         21,
                         Blob{{Bytes::CopyOf(h33)}},
                         {{1, Bytes::CopyOf("xyz")}},
                         {{0, Bytes::CopyOf(row)}}},
       Hex("02000000 6e73 10000000") + h22 + Hex("1500000000000000 1000000000000000") + h33 +
           Hex("01000000 01000000 0300000000000000") + "xyz" +
           Hex("01000000 00000000 1000000000000000") + row},
      {PrefixDrop{"ns", Blob{{Bytes::CopyOf(h33)}}, Blob{}, 1},
       Hex("02000000 6e73 1000000000000000") + h33 + Hex("0000000000000000 01000000")},
      {PrefixNamespaceDrop{"ns"}, Hex("02000000 6e73")},
  };
  std::vector<bool> seen(64);
  for (const auto& [m, golden] : cases) {
    SCOPED_TRACE(Describe(m));
    seen[static_cast<size_t>(TypeOf(m))] = true;
    EXPECT_TRUE(Concat(EncodePayload(m)) == golden) << "the encoder disagrees with the document";
    Mutation back;
    ASSERT_EQ(DecodePayload(TypeOf(m), Bytes::CopyOf(golden), back).ToString(), "OK");
    EXPECT_TRUE(Concat(EncodePayload(back)) == golden);
  }
  // The log's compact string records (types 20 and 21): `varint key length, key, varint flags,
  // varint at_ms, varint value length, value`, after a varint count in 21. 1700000000123 is the
  // varint fb d0 95 ff bc 31.
  const std::vector<std::tuple<Mutation, RecordType, std::string>> compact = {
      {StringSet{"ab", 5, 1700000000123, Blob{{Bytes::CopyOf("xyz")}}},
       RecordType::kStringSetCompact, Hex("02 6162 05 fbd095ffbc31 03") + "xyz"},
      {StringSet{"", 0, 0, Blob{}}, RecordType::kStringSetCompact, Hex("00 00 00 00")},
      {StringMultiSet{{StringSet{"ab", 4, 0, Blob{{Bytes::CopyOf("xyz")}}},
                       StringSet{"c", 0, 1700000000123, Blob{}}}},
       RecordType::kStringMultiSetCompact,
       Hex("02 02 6162 04 00 03") + "xyz" + Hex("01 63 00 fbd095ffbc31 00")},
  };
  for (const auto& [m, type, golden] : compact) {
    SCOPED_TRACE(Describe(m));
    seen[static_cast<size_t>(type)] = true;
    const EncodedRecord record = EncodeRecord(m);
    EXPECT_EQ(record.type, type);
    EXPECT_TRUE(record.head.view().substr(kRecordHeaderSize) == golden)
        << "the encoder disagrees with the document";
    Mutation back;
    ASSERT_EQ(DecodePayload(type, Bytes::CopyOf(golden), back).ToString(), "OK");
    ExpectSameMutation(m, back);
  }
  // Every record type the decoder knows has a golden case.
  for (size_t type = 0; type < 64; ++type) {
    Mutation m;
    if (DecodePayload(static_cast<RecordType>(type), Bytes(), m).message().starts_with("unknown"))
      continue;
    EXPECT_TRUE(seen[type]) << "no golden bytes for record type " << type;
  }
}

// A string record's key lent from a request (SET, INCR, MSET) encodes to the bytes an owned key
// does, and one decoded from a payload is a slice of it, not a copy.
TEST(GoldenBytesTest, ABorrowedKeyEncodesAsAnOwnedOneAndADecodedKeyIsASlice) {
  const std::string request_arg = "key:__rand_int__";
  const StringSet owned{request_arg, 0, 0, Blob{{Bytes::CopyOf("xyz")}}};
  const StringSet lent{RecordKey::Borrow(request_arg), 0, 0, Blob{{Bytes::CopyOf("xyz")}}};
  EXPECT_EQ(lent.key.view().data(), request_arg.data()) << "the borrowed key was copied";
  EXPECT_NE(owned.key.view().data(), request_arg.data()) << "the owned key was not copied";
  const std::string golden = Concat(EncodePayload(owned));
  EXPECT_TRUE(Concat(EncodePayload(lent)) == golden);
  EXPECT_TRUE(Concat(EncodePayload(StringMultiSet{{lent, lent}})) ==
              Concat(EncodePayload(StringMultiSet{{owned, owned}})));

  const Bytes payload = Bytes::CopyOf(golden);
  Mutation back;
  ASSERT_EQ(DecodePayload(RecordType::kStringSet, payload, back).ToString(), "OK");
  const RecordKey& key = std::get<StringSet>(back).key;
  EXPECT_EQ(key, request_arg);
  const auto* start = reinterpret_cast<const char*>(payload.data());
  EXPECT_TRUE(key.view().data() >= start && key.view().data() < start + payload.size())
      << "the decoded key is not a slice of its payload";
  // One past a key's length: the decoder fails, naming the field, as for any string.
  const std::string cut = golden.substr(0, 4 + request_arg.size() - 1);
  EXPECT_NE(
      DecodePayload(RecordType::kStringSet, Bytes::CopyOf(cut), back).message().find("string"),
      std::string::npos);
}

// A string record is staged in one pass while its value is copied in (below 512 bytes) and by the
// general encoder from there: both give the documented layout, at the limit and one past it, for
// an empty value and for a value in two pieces.
TEST(GoldenBytesTest, AStringRecordHasOneLayoutAtEveryValueSize) {
  const auto expected = [](const std::string& key, uint32_t flags, uint64_t at,
                           const std::string& value) {
    std::string out(4, '\0');
    PutU32(reinterpret_cast<uint8_t*>(out.data()), static_cast<uint32_t>(key.size()));
    out += key;
    std::string fields(20, '\0');
    auto* f = reinterpret_cast<uint8_t*>(fields.data());
    PutU32(f, flags), PutU64(f + 4, at), PutU64(f + 12, value.size());
    return out + fields + value;
  };
  for (size_t size : {size_t{0}, size_t{1}, size_t{511}, size_t{512}, size_t{5000}}) {
    SCOPED_TRACE("value of " + std::to_string(size) + " bytes");
    const std::string value = RandomBytes(size, static_cast<uint32_t>(size));
    const StringSet one{"k", 3 << 1, 1700000000123, Blob{{Bytes::CopyOf(value)}}};
    EXPECT_TRUE(Concat(EncodePayload(one)) == expected("k", 3 << 1, 1700000000123, value));
    const StringSet none{"k", 0, 0, size == 0 ? Blob{} : one.value};
    EXPECT_TRUE(Concat(EncodePayload(none)) == expected("k", 0, 0, value));
    if (size < 2) continue;
    const StringSet two{
        "key", 1, 0,
        Blob{{Bytes::CopyOf(value.substr(0, size / 2)), Bytes::CopyOf(value.substr(size / 2))}}};
    EXPECT_TRUE(Concat(EncodePayload(two)) == expected("key", 1, 0, value));
  }
}

// The compact string records the log writes for values below 512 bytes: every cut and every
// malformed varint is refused, values round-trip at the limit, and 512 bytes takes the
// fieldwise record.
TEST(MutationCodecTest, CompactStringRecordsRoundTripAndRefuseMalformedPayloads) {
  const auto payload_of = [](const EncodedRecord& r) {
    return std::string(r.head.view().substr(kRecordHeaderSize));
  };
  const std::vector<Mutation> samples = {
      StringSet{"k", 3 << 1, std::numeric_limits<uint64_t>::max(),
                Blob{{Bytes::CopyOf(RandomBytes(511, 1))}}},
      StringSet{std::string(300, 'k'), StringSet::kKeepTtl, 0, Blob{}},
      StringMultiSet{
          {StringSet{"a", 0, 0, Blob{{Bytes::CopyOf("1")}}},
           StringSet{"b", 2, 1700000000123, Blob{{Bytes::CopyOf(RandomBytes(200, 2))}}}}},
  };
  for (const Mutation& m : samples) {
    SCOPED_TRACE(Describe(m));
    const EncodedRecord record = EncodeRecord(m);
    ASSERT_TRUE(record.type == RecordType::kStringSetCompact ||
                record.type == RecordType::kStringMultiSetCompact);
    const std::string full = payload_of(record);
    Mutation back;
    ASSERT_EQ(DecodePayload(record.type, Bytes::CopyOf(full), back).ToString(), "OK");
    ExpectSameMutation(m, back);
    for (size_t length = 0; length < full.size(); ++length) {
      EXPECT_FALSE(DecodePayload(record.type, Bytes::CopyOf(full.substr(0, length)), back).ok())
          << "accepted a payload cut to " << length << " of " << full.size() << " bytes";
    }
    EXPECT_NE(
        DecodePayload(record.type, Bytes::CopyOf(full + "Z"), back).message().find("trailing"),
        std::string::npos);
  }
  EXPECT_EQ(EncodeRecord(StringSet{"k", 0, 0, Blob{{Bytes::CopyOf(RandomBytes(512, 3))}}}).type,
            RecordType::kStringSet);

  Mutation back;
  const auto refused = [&](RecordType type, const std::string& payload) {
    return DecodePayload(type, Bytes::CopyOf(payload), back).message();
  };
  constexpr RecordType kOne = RecordType::kStringSetCompact;
  EXPECT_NE(refused(kOne, Hex("8000 00 00 00")), "") << "a key length not in its shortest form";
  EXPECT_NE(refused(kOne, Hex("00 00 ffffffffffffffffff02 00")), "") << "an at_ms past 64 bits";
  EXPECT_NE(refused(kOne, Hex("00 00 ffffffffffffffffff8001 00")), "") << "an 11-byte varint";
  EXPECT_EQ(refused(kOne, Hex("00 00 ffffffffffffffffff01 00")), "") << "at_ms 2^64 - 1";
  EXPECT_NE(refused(kOne, Hex("00 8080808010 00 00")), "") << "flags of 2^32";
  EXPECT_EQ(refused(kOne, Hex("00 ffffffff0f 00 00")), "") << "flags of 2^32 - 1";
  EXPECT_NE(refused(kOne, Hex("00 00 00 8004") + std::string(512, 'v')), "") << "a 512-byte value";
  EXPECT_NE(refused(kOne, Hex("05") + "abc"), "") << "a key past the end";
  EXPECT_NE(refused(RecordType::kStringMultiSetCompact, Hex("ffffffff0f 00000000")), "")
      << "an entry count past the payload";
  EXPECT_EQ(refused(RecordType::kStringMultiSetCompact, Hex("00")), "") << "no entries";
}

TEST(GoldenBytesTest, FileHeaderSeedAndRecordChecksumAreTheDocumentedOnes) {
  // A segment header with salt 0x01020304, sequence 3, base lsn 10.
  const std::string header = std::string("PFXDLOG\0", 8) + Hex("02000000 04030201") +
                             Hex("0300000000000000 0a00000000000000");
  const FileHeader decoded = DecodeFileHeader(reinterpret_cast<const uint8_t*>(header.data()));
  EXPECT_EQ(decoded.salt, 0x01020304u);
  EXPECT_EQ(decoded.sequence, 3u);
  const uint64_t seed = XXH3_64bits(header.data(), header.size());
  EXPECT_EQ(FileSeed(decoded), seed);
  // A drop-session record of sid "ab" at lsn 10: header bytes [8, 32) then the payload, hashed
  // with the file's seed.
  const std::string tail = Hex("50465852 03 00 0000 0a00000000000000 0600000000000000");
  const std::string payload = Hex("02000000 6162");
  const std::string hashed = tail + payload;
  const uint64_t checksum = XXH3_64bits_withSeed(hashed.data(), hashed.size(), seed);
  uint8_t sealed[kRecordHeaderSize];
  SealRecord(seed, RecordType::kSsmDropSession, 10, EncodePayload(DropSession("ab")), sealed);
  std::string expected(8, '\0');
  PutU64(reinterpret_cast<uint8_t*>(expected.data()), checksum);
  expected += tail;
  EXPECT_TRUE(std::string(reinterpret_cast<char*>(sealed), kRecordHeaderSize) == expected);
  // The same record for database 7: bytes 14-15 name it, and the checksum covers them.
  const std::string tail7 = Hex("50465852 03 00 0700 0a00000000000000 0600000000000000");
  SealRecord(seed, RecordType::kSsmDropSession, 10, EncodePayload(DropSession("ab")), sealed, 7);
  EXPECT_TRUE(std::string(reinterpret_cast<char*>(sealed) + 8, kRecordHeaderSize - 8) == tail7);
  EXPECT_EQ(DecodeRecordHeader(sealed).db, 7);
  const std::string hashed7 = tail7 + payload;
  EXPECT_EQ(GetU64(sealed), XXH3_64bits_withSeed(hashed7.data(), hashed7.size(), seed));
  // Version 1 files: seed 0.
  FileHeader v1 = decoded;
  v1.version = 1;
  EXPECT_EQ(FileSeed(v1), 0u);
}

}  // namespace
}  // namespace prefixd::persist
