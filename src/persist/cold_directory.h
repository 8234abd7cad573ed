// ColdDirectory: the record a snapshot writes before one database's cold SSM puts, listing
// each of them (where its record starts, its sid, its layers and their lengths), so recovery
// places every cold layer without reading the records themselves; VectorColdDirectory: the same
// (type 17) for its cold V-store sessions (where each create record starts, its sid, index, dim
// and tier, and each rows record's layer, first row and row count), so recovery creates every
// session and places its rows (docs/storage-format.md). Pure functions; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "prefixd/status.h"

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
// `file_size` bytes, with sids of at most `max_sid_len` bytes, each named once. A Corruption says
// what is wrong.
Status DecodeColdDirectory(const Bytes& payload, uint64_t region_start, uint64_t file_size,
                           uint64_t max_sid_len, ColdDirectory& out);

// The V-store cold directory (type 17).
struct VectorColdRows {
  uint32_t layer = 0;
  uint64_t start = 0;
  uint64_t rows = 0;
};

struct VectorColdEntry {
  uint64_t record_offset = 0;  // of the session's create record header in the snapshot
  std::string sid;
  uint64_t index = 0;
  uint32_t dim = 0;
  uint32_t tier = 0;                    // store::Tier code
  std::vector<VectorColdRows> records;  // its rows records, in file order after the create
};

struct VectorColdDirectory {
  uint64_t region_end = 0;  // the first byte after the last listed record
  std::vector<VectorColdEntry> entries;
};

// The bytes an entry's records take (create and rows records, headers included); 0 when its
// tier is unknown.
uint64_t VectorColdEntryBytes(const VectorColdEntry& entry);
// Where each rows record's rows start in the file (the order of `entry.records`).
std::vector<uint64_t> VectorColdRowsOffsets(const VectorColdEntry& entry);

// The payload: u64 region_end, u32 count, then per entry u64 record_offset, u32 sid length, the
// sid, u64 index, u32 dim, u32 tier, u32 record count and per record u32 layer, u64 start,
// u64 rows.
Bytes EncodeVectorColdDirectory(const VectorColdDirectory& directory);
// Decodes `payload` and checks that its entries' records follow one another from
// `region_start` (the end of the directory record) to its region_end, inside a file of
// `file_size` bytes; sids of at most `max_sid_len` bytes, each named once; known tiers; dims
// from 1 to `max_dim` that the tier accepts; rows records of at least one row. A Corruption says
// what is wrong.
Status DecodeVectorColdDirectory(const Bytes& payload, uint64_t region_start, uint64_t file_size,
                                 uint64_t max_sid_len, uint64_t max_dim, VectorColdDirectory& out);

}  // namespace prefixd::persist
