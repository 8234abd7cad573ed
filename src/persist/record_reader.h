// RecordReader: reads the records of one log segment or snapshot file in order, checking each
// record's framing and checksum, and tells a clean end from a torn or corrupt record (with its
// offset). Used by recovery and tests on one thread at a time.
#pragma once

#include <cstdint>
#include <string>

#include "common/bytes.h"
#include "persist/log_format.h"

namespace prefixd::persist {

struct Record {
  RecordHeader header;
  Bytes payload;
  uint64_t offset = 0;  // of the record header in its file
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

  // Opens `path` and checks its file header against `magic`. Returns an error text or empty.
  std::string Open(const std::string& path, const char (&magic)[8]);

  const FileHeader& file_header() const { return file_header_; }
  uint64_t file_size() const { return file_size_; }

  ReadStatus Next(Record& out);
  uint64_t bad_offset() const { return bad_offset_; }
  const std::string& problem() const { return problem_; }

  // The offset of the first whole valid record after `offset`, or 0 when there is none: then a
  // bad record at `offset` is a torn tail, otherwise corruption inside the file.
  uint64_t NextValidRecord(uint64_t offset);
  // Continues reading at `offset` (a record start found by NextValidRecord).
  void Seek(uint64_t offset) { position_ = offset; }

  // Reads `length` bytes at `offset` (a stored value located by segment and offset).
  std::string ReadAt(uint64_t offset, uint64_t length, Bytes& out);

 private:
  ReadStatus Bad(uint64_t offset, std::string problem);
  // Checks the record at `offset` without consuming it; fills `out` when valid.
  bool ReadRecordAt(uint64_t offset, Record& out, std::string& problem);

  int fd_ = -1;
  std::string path_;
  FileHeader file_header_;
  uint64_t file_size_ = 0;
  uint64_t position_ = 0;
  uint64_t bad_offset_ = 0;
  std::string problem_;
};

}  // namespace prefixd::persist
