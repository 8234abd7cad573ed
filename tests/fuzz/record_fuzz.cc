// libFuzzer target for the on-disk record framing and the change-record codec.
// Byte 0 picks the mode:
// - even: the payload decoder. Byte 1 is the record type, the rest its payload. A payload that
//   decodes must encode back to exactly the same bytes (and the same type), and Check and
//   Describe must not crash.
// - odd: a whole file through RecordReader (bit 1: a log segment, else a snapshot; bit 2: the
//   records' checksums are fixed up first, so mutations reach the decoder). Every record read is
//   decoded as above; after a bad record the reader must resume strictly later, or stop. A
//   transaction group (type 11) is read as recovery reads it: whole, with exactly the records
//   and bytes it announced, or cut off, or damaged with a resume point strictly after it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz/mem_env.h"
#include "persist/mutation.h"
#include "persist/record_reader.h"

namespace {

using namespace prefixd;
using namespace prefixd::persist;

// The payload `m` encodes to as a record of `type`: the log's compact string records come from
// EncodeRecord, every other type from EncodePayload.
std::string Reencoded(RecordType type, const Mutation& m) {
  std::string out;
  if (type == RecordType::kStringSetCompact || type == RecordType::kStringMultiSetCompact) {
    const EncodedRecord record = EncodeRecord(m);
    if (record.type != type) return {};
    out = record.head.view().substr(kRecordHeaderSize);
    for (const Bytes& piece : record.rest) out.append(piece.view());
    return out;
  }
  for (const Bytes& piece : EncodePayload(m)) out.append(piece.view());
  return out;
}

void DecodeAndCheck(RecordType type, const Bytes& payload) {
  Mutation m;
  if (!DecodePayload(type, payload, m).ok()) return;
  const std::string again = Reencoded(type, m);
  if (again != payload.view()) {
    std::fprintf(stderr, "a decoded %s encodes to other bytes\n", Describe(m).c_str());
    std::abort();
  }
  Limits limits = Limits::Hard();
  limits.memory_budget = uint64_t{256} << 20;
  (void)Check(m, limits);
  (void)Describe(m);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t mode = data[0];
  std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if ((mode & 1) == 0) {
    DecodeAndCheck(static_cast<RecordType>(rest[0]),
                   Bytes::CopyOf(std::string_view(rest).substr(1)));
    return 0;
  }
  if (mode & 4) SealRecordsInPlace(rest);
  MemEnv env;
  env.Put("/d/file", rest);
  RecordReader reader;
  if (!reader.Open("/d/file", (mode & 2) ? kLogFileMagic : kSnapshotFileMagic, &env).ok()) {
    return 0;
  }
  Record record;
  for (int i = 0; i < 10000; ++i) {
    const ReadStatus status = reader.Next(record);
    if (status == ReadStatus::kEnd) break;
    if (status == ReadStatus::kBad) {
      const uint64_t bad = reader.bad_offset();
      const uint64_t next = reader.NextValidRecord(bad);
      if (next == 0) break;
      if (next <= bad) std::abort();
      reader.Seek(next);
      continue;
    }
    if (record.header.type == RecordType::kExecGroup) {
      ExecGroupRead group = ReadExecGroup(reader, record, /*is_last=*/true);
      ExecGroup announced;
      if (group.outcome == ExecGroupRead::kWhole) {
        uint64_t bytes = 0;
        for (const Record& r : group.records) {
          bytes += kRecordHeaderSize + r.payload.size();
          if (r.header.type == RecordType::kExecGroup) std::abort();
          DecodeAndCheck(r.header.type, r.payload);
        }
        if (!DecodeExecGroup(record.payload.view(), announced) ||
            announced.records != group.records.size() || announced.bytes != bytes) {
          std::abort();
        }
        continue;
      }
      if (group.problem.empty()) std::abort();
      if (group.outcome == ExecGroupRead::kTorn) break;
      if (group.resume == 0) break;
      if (group.resume <= record.offset) std::abort();
      reader.Seek(group.resume);
      continue;
    }
    DecodeAndCheck(record.header.type, record.payload);
  }
  return 0;
}
