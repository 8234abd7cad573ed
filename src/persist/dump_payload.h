// The DUMP payload: the records that recreate one key (persist/key_records.h), each framed as in
// the log (docs/storage-format.md: 32-byte header, checksum seed 0, lsn 0, database 0), then a
// 10-byte footer — u16 format version, u64 XXH3-64 (seed 0) of every byte before the checksum —
// as Redis ends its payload with a 2-byte RDB version and a CRC64. RESTORE decodes it under
// another key name if asked. Pure functions; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "persist/mutation.h"
#include "store/keyspace.h"

namespace prefixd::persist {

inline constexpr uint16_t kDumpVersion = 1;
inline constexpr size_t kDumpFooterSize = 10;

// The payload as pieces in order: small headers and the footer, and the records' values by
// reference, so a large value is sent or replied without a second copy.
std::vector<Bytes> EncodeDump(const std::vector<Mutation>& records);

enum class DumpStatus {
  kOk,
  kBadFooter,  // too short, another version or a wrong checksum
  kBadFormat,  // the records do not decode, or do not recreate one key
};

struct DecodedDump {
  store::KeyType type = store::KeyType::kString;
  std::string original_key;  // the name the payload was dumped under
  // The records, renamed to the key given to DecodeDump (a KV.PREFIX registration's sessions
  // follow it: `<key>_pk`, `<key>_pv`). Values are slices of the payload.
  std::vector<Mutation> records;
  // Every key the records create: the key itself, and a registration's sessions.
  std::vector<std::string> keys;
  std::string why;  // what is wrong, when the status is not kOk
};

// Checks the footer, then decodes and checks the shape of the records (one key of one type, in
// the order KeyRecords writes them). Limits and memory are the caller's to check (Check()).
DumpStatus DecodeDump(const Bytes& payload, std::string_view key, DecodedDump& out);

}  // namespace prefixd::persist
