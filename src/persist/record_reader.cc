#include "persist/record_reader.h"

#include <array>
#include <cstring>
#include <vector>

namespace prefixd::persist {

RecordReader::~RecordReader() = default;

Status RecordReader::Open(const std::string& path, const char (&magic)[8], Env* env) {
  path_ = path;
  auto file = env->Open(path, OpenMode::kRead);
  if (!file.ok()) return Status::IoError("can't open " + path + ": " + file.status().message());
  file_ = std::move(file).value();
  auto size = file_->Size();
  if (!size.ok()) return Status::IoError("can't stat " + path + ": " + size.status().message());
  file_size_ = *size;
  uint8_t header[kFileHeaderSize];
  if (file_size_ < kFileHeaderSize || !file_->ReadAt(0, header, kFileHeaderSize).ok()) {
    return Status::Corruption(path + ": file header is missing or short (" +
                              std::to_string(file_size_) + " bytes)");
  }
  file_header_ = DecodeFileHeader(header);
  if (std::memcmp(file_header_.magic, magic, 8) != 0) {
    return Status::Corruption(path + ": not a prefixd file");
  }
  if (file_header_.version < kOldestReadableVersion || file_header_.version > kFormatVersion) {
    return Status::Corruption(path + ": format version " + std::to_string(file_header_.version) +
                              " is not supported (this build reads versions " +
                              std::to_string(kOldestReadableVersion) + " to " +
                              std::to_string(kFormatVersion) + ")");
  }
  seed_ = FileSeed(file_header_);
  is_log_ = std::memcmp(magic, kLogFileMagic, 8) == 0;
  expected_lsn_ = is_log_ ? file_header_.base_lsn : 0;
  position_ = kFileHeaderSize;
  return {};
}

ReadStatus RecordReader::Bad(uint64_t offset, std::string problem) {
  bad_offset_ = offset;
  problem_ = std::move(problem);
  return ReadStatus::kBad;
}

Status RecordReader::ReadRecordAt(uint64_t offset, LsnRule rule, Record& out) {
  if (file_size_ - offset < kRecordHeaderSize) {
    return Status::Corruption("record header cut short (" + std::to_string(file_size_ - offset) +
                              " bytes left)");
  }
  uint8_t header[kRecordHeaderSize];
  if (Status read = file_->ReadAt(offset, header, kRecordHeaderSize); !read.ok()) {
    return Status::IoError("read error: " + read.message());
  }
  RecordHeader h = DecodeRecordHeader(header);
  if (h.magic != kRecordMagic) {
    return Status::Corruption("no record magic");
  }
  uint64_t left = file_size_ - offset - kRecordHeaderSize;
  if (h.payload_length > left) {
    return Status::Corruption("payload length " + std::to_string(h.payload_length) +
                              " runs past the end (" + std::to_string(left) + " bytes left)");
  }
  if (skip_cold_ && !is_log_ && (h.flags & kRecordFlagCold) != 0 && h.lsn == 0) {
    out.header = h;
    out.payload = Bytes();
    out.offset = offset;
    out.payload_skipped = true;
    return {};
  }
  Bytes payload = Bytes::Allocate(h.payload_length);
  if (Status read =
          file_->ReadAt(offset + kRecordHeaderSize, payload.mutable_data(), h.payload_length);
      !read.ok()) {
    return Status::IoError("read error: " + read.message());
  }
  std::array<std::string_view, 1> pieces{payload.view()};
  if (RecordChecksum(seed_, header, pieces) != h.checksum) {
    return Status::Corruption("checksum mismatch");
  }
  // Only now is the lsn the writer's: a log's records continue its sequence, one by one.
  const bool lsn_ok = !is_log_                  ? h.lsn == 0
                      : rule == LsnRule::kExact ? h.lsn == expected_lsn_
                                                : h.lsn >= expected_lsn_;
  if (!lsn_ok) {
    return Status::Corruption(
        "lsn " + std::to_string(h.lsn) + " does not continue the sequence (expected " +
        (is_log_ ? std::to_string(expected_lsn_) : std::string("0 in a snapshot")) + ")");
  }
  out.header = h;
  out.payload = std::move(payload);
  out.offset = offset;
  out.payload_skipped = false;
  return {};
}

ReadStatus RecordReader::Next(Record& out) {
  if (position_ == file_size_) return ReadStatus::kEnd;
  if (Status read = ReadRecordAt(position_, resync_ ? LsnRule::kAtLeast : LsnRule::kExact, out);
      !read.ok()) {
    return Bad(position_, read.message());
  }
  resync_ = false;
  position_ += kRecordHeaderSize + out.header.payload_length;
  if (is_log_) expected_lsn_ = out.header.lsn + 1;
  return ReadStatus::kRecord;
}

uint64_t RecordReader::NextValidRecord(uint64_t offset) {
  // Scan in chunks for the magic, then check each candidate fully.
  constexpr size_t kChunk = 1 << 20;
  std::vector<uint8_t> buf(kChunk + 3);
  uint8_t magic[4];
  PutU32(magic, kRecordMagic);
  for (uint64_t base = offset + 1; base + kRecordHeaderSize <= file_size_; base += kChunk) {
    uint64_t n = std::min<uint64_t>(kChunk + 3, file_size_ - base);
    if (!file_->ReadAt(base, buf.data(), n).ok()) return 0;
    for (uint64_t i = 0; i + 4 <= n && i < kChunk; ++i) {
      if (std::memcmp(buf.data() + i, magic, 4) != 0) continue;
      uint64_t candidate = base + i;
      if (candidate < 8 + offset + 1) continue;  // the magic sits 8 bytes into a header
      // A record of this file (its seed) that continues the sequence: a copy of an earlier
      // record, or of another file's, stored inside a value, is neither.
      Record r;
      if (ReadRecordAt(candidate - 8, LsnRule::kAtLeast, r).ok()) return candidate - 8;
    }
  }
  return 0;
}

Status RecordReader::ReadAt(uint64_t offset, uint64_t length, Bytes& out) {
  if (offset > file_size_ || length > file_size_ - offset) {
    return Status::Corruption("range past the end of " + path_);
  }
  out = Bytes::Allocate(length);
  if (Status read = file_->ReadAt(offset, out.mutable_data(), length); !read.ok()) {
    return Status::IoError("read error in " + path_ + ": " + read.message());
  }
  return {};
}

ExecGroupRead ReadExecGroup(RecordReader& reader, const Record& begin, bool is_last) {
  ExecGroupRead out;
  ExecGroup group;
  if (!DecodeExecGroup(begin.payload.view(), group)) {
    out.outcome = ExecGroupRead::kCorrupt;
    out.problem = "its header record holds " + std::to_string(begin.payload.size()) + " bytes";
    out.resume = begin.offset + kRecordHeaderSize + begin.payload.size();
    return out;
  }
  uint64_t bytes = 0;
  while (out.records.size() < group.records) {
    Record member;
    const ReadStatus status = reader.Next(member);
    if (status == ReadStatus::kRecord) {
      bytes += kRecordHeaderSize + member.header.payload_length;
      if (member.header.type == RecordType::kExecGroup) {
        out.outcome = ExecGroupRead::kCorrupt;
        out.problem = "a group starts inside it at offset " + std::to_string(member.offset);
        out.resume = member.offset;
        return out;
      }
      out.records.push_back(std::move(member));
      continue;
    }
    const std::string what = std::to_string(out.records.size()) + " of its " +
                             std::to_string(group.records) + " records are whole";
    const uint64_t offset = status == ReadStatus::kEnd ? reader.file_size() : reader.bad_offset();
    const uint64_t next_valid = status == ReadStatus::kEnd ? 0 : reader.NextValidRecord(offset);
    if (is_last && next_valid == 0) {
      out.outcome = ExecGroupRead::kTorn;
      out.problem = "a transaction cut off: " + what;
    } else {
      out.outcome = ExecGroupRead::kCorrupt;
      out.problem =
          (status == ReadStatus::kEnd ? "its segment ends after " : reader.problem() + " after ") +
          what;
      out.resume = next_valid;
    }
    return out;
  }
  if (bytes != group.bytes) {
    out.outcome = ExecGroupRead::kCorrupt;
    out.problem =
        "its records hold " + std::to_string(bytes) + " bytes, not " + std::to_string(group.bytes);
    const Record& last = out.records.empty() ? begin : out.records.back();
    out.resume = last.offset + kRecordHeaderSize + last.header.payload_length;
  }
  return out;
}

}  // namespace prefixd::persist
