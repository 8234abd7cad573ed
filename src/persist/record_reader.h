// RecordReader: reads the records of one log segment or snapshot file in order, checking each
// record's framing, its checksum (seeded per file) and its lsn (a segment's records continue its
// sequence one by one), and tells a clean end from a torn or corrupt record (with its offset).
// Used by recovery and tests on one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "persist/env.h"
#include "persist/log_format.h"

namespace prefixd::persist {

struct Record {
  RecordHeader header;
  Bytes payload;
  uint64_t offset = 0;  // of the record header in its file
  // The payload was not read (a cold record, see set_skip_cold): its checksum is unchecked.
  bool payload_skipped = false;
};

enum class ReadStatus {
  kRecord,  // `out` holds the next record
  kEnd,     // clean end of file
  kBad,     // a bad record starts at bad_offset(); see problem()
};

class RecordReader {
 public:
  RecordReader() = default;
  ~RecordReader();
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;

  // Opens `path` and checks its file header against `magic`: an IoError when it cannot be read,
  // a Corruption when its header is short, of another kind or of an unsupported version.
  Status Open(const std::string& path, const char (&magic)[8], Env* env = Env::Posix());

  const FileHeader& file_header() const { return file_header_; }
  uint64_t file_size() const { return file_size_; }

  ReadStatus Next(Record& out);
  // Records flagged kRecordFlagCold are returned with their header only (the disk tier's
  // entries are not read at start); the caller reads what it needs with ReadAt.
  void set_skip_cold(bool skip) { skip_cold_ = skip; }
  uint64_t bad_offset() const { return bad_offset_; }
  const std::string& problem() const { return problem_; }

  // The offset of the first whole valid record of this file after `offset` whose lsn is at
  // least the one expected next, or 0 when there is none: then a bad record at `offset` is a
  // torn tail, otherwise corruption inside the file. Records stored inside a value (copies of
  // this or any other file) never qualify: another file's fail the seeded checksum, this one's
  // have lsns already read.
  uint64_t NextValidRecord(uint64_t offset);
  // Continues reading at `offset` (a record start found by NextValidRecord); the sequence
  // resumes from the lsn found there.
  void Seek(uint64_t offset) { position_ = offset, resync_ = true; }

  // Reads `length` bytes at `offset` (a stored value located by segment and offset): a
  // Corruption when the range runs past the file, an IoError when the read fails.
  Status ReadAt(uint64_t offset, uint64_t length, Bytes& out);

 private:
  enum class LsnRule { kExact, kAtLeast };
  ReadStatus Bad(uint64_t offset, std::string problem);
  // Checks the record at `offset` without consuming it; fills `out` when valid, else a Corruption
  // (or an IoError for a failed read) says what is wrong with it.
  Status ReadRecordAt(uint64_t offset, LsnRule rule, Record& out);

  std::unique_ptr<File> file_;
  std::string path_;
  FileHeader file_header_;
  uint64_t file_size_ = 0;
  uint64_t position_ = 0;
  uint64_t seed_ = 0;
  bool is_log_ = false;
  uint64_t expected_lsn_ = 0;  // of the next record (a log); 0 in a snapshot
  bool resync_ = false;        // after Seek: the next lsn may skip ahead
  bool skip_cold_ = false;
  uint64_t bad_offset_ = 0;
  std::string problem_;
};

// The records of the EXEC group that `begin` (a kExecGroup record just read from `reader`)
// announces, read whole, or why not: cut off at the end of the log (`is_last`: its newest
// segment, with nothing valid after), or damaged.
struct ExecGroupRead {
  enum Outcome { kWhole, kTorn, kCorrupt } outcome = kWhole;
  std::vector<Record> records;
  std::string problem;
  uint64_t resume = 0;  // kCorrupt: where reading may go on (--log-skip-corrupt); 0: nowhere
};
ExecGroupRead ReadExecGroup(RecordReader& reader, const Record& begin, bool is_last);

}  // namespace prefixd::persist
