// ColdDirectory: the record a snapshot writes before one database's cold SSM puts, listing
// each of them (where its record starts, its sid, its layers and their lengths), so recovery
// places every cold layer without reading the records themselves (docs/storage-format.md).
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/bytes.h"

namespace prefixd::persist {

struct ColdEntry {
  uint64_t record_offset = 0;  // of the SSM put's record header in the snapshot
  std::string sid;
  std::vector<std::pair<uint32_t, uint64_t>> layers;  // (layer, value length), in record order
};

struct ColdDirectory {
  uint64_t region_end = 0;  // the first byte after the last cold record
  std::vector<ColdEntry> entries;
};

// The payload length of the SSM put holding `entry`'s layers (mutation.h's layout).
uint64_t SsmPutPayloadLength(const ColdEntry& entry);
// Where each of `entry`'s values starts in the file (the order of `entry.layers`).
std::vector<uint64_t> ColdValueOffsets(const ColdEntry& entry);

// The payload: u64 region_end, u32 count, then per entry u64 record_offset, u32 sid length,
// the sid, u32 layer count and per layer u32 layer, u64 length.
Bytes EncodeColdDirectory(const ColdDirectory& directory);
// Decodes `payload` and checks that its entries are SSM put records one after another from
// `region_start` (the end of the directory record) to its region_end, inside a file of
// `file_size` bytes, with sids of at most `max_sid_len` bytes, each named once. An error text
// or empty.
std::string DecodeColdDirectory(const Bytes& payload, uint64_t region_start, uint64_t file_size,
                                uint64_t max_sid_len, ColdDirectory& out);

}  // namespace prefixd::persist
