// The on-disk record framing shared by the log writer, the snapshot writer and their reader:
// constants, the record header and the checksum. docs/storage-format.md specifies every byte.
// Pure functions and constants; any thread.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "common/varint.h"  // the compact string records

namespace prefixd::persist {

// Every record starts with this 32-byte header, little-endian:
//   u64 checksum        XXH3-64, seeded with its file's seed, of header bytes [8, 32) followed
//                       by the payload
//   u32 magic           kRecordMagic, to find record starts and reject zero-filled tails
//   u8  type            RecordType
//   u8  flags           0, or kRecordFlagCold on a snapshot's SSM put of a cold session
//   u16 db              the database (SELECT index) the record changes; 0 in older files
//   u64 lsn             log sequence number: a segment's records are base_lsn, base_lsn + 1, ...
//                       (snapshot records: 0)
//   u64 payload_length
inline constexpr size_t kRecordHeaderSize = 32;
inline constexpr uint32_t kRecordMagic = 0x52584650;  // "PFXR" read as little-endian bytes
// A snapshot's SSM put of a session that was in the disk tier when it was saved: recovery
// records where its values sit and does not read them (docs/storage-format.md).
inline constexpr uint8_t kRecordFlagCold = 1;

// Every file (log segment or snapshot) starts with a 32-byte file header:
//   char[8] magic ("PFXDLOG\0" or "PFXDSNP\0"), u32 version, u32 salt (random per file; 0 in
//   version 1), u64 sequence (segment number; snapshot: 0), u64 base_lsn (segment: first lsn it
//   may hold; snapshot: the lsn replay starts from).
// The file's checksum seed is XXH3-64 of these 32 bytes (version 1: 0), so a copy of a record
// of another file, stored inside a value, never passes for a record of this one.
inline constexpr size_t kFileHeaderSize = 32;
inline constexpr char kLogFileMagic[8] = {'P', 'F', 'X', 'D', 'L', 'O', 'G', '\0'};
inline constexpr char kSnapshotFileMagic[8] = {'P', 'F', 'X', 'D', 'S', 'N', 'P', '\0'};
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr uint32_t kOldestReadableVersion = 1;

enum class RecordType : uint8_t {
  kSsmPut = 1,           // one session, one or more (layer, blob) pairs, applied atomically
  kSsmDropLayer = 2,     // one session, one layer
  kSsmDropSession = 3,   // one session, every layer
  kFlushAll = 4,         // every stored entry of every family
  kKeyExpire = 5,        // one key of any type: its absolute expiry (Unix ms), 0 for none
  kStringSet = 6,        // one string key: its whole value, encoding and expiry (or keep it)
  kStringDel = 7,        // one string key deleted
  kFlushDb = 8,          // every stored entry of the record's database (FLUSHDB)
  kSwapDb = 9,           // two databases exchange their contents (SWAPDB)
  kStringMultiSet = 10,  // several string keys, each as kStringSet, applied together (MSET)
  kExecGroup = 11,       // one EXEC's records follow (count, bytes): recovery applies all or none
  kSetValue = 12,        // one set key: its whole value and encoding (no members: deleted)
  kListValue = 13,       // one list key: its whole value (no elements: deleted)
  kHashValue = 14,       // one hash key: its whole value, or fields set or deleted
  kSnapshotEnd = 15,     // last record of a snapshot: entry count, so a cut file is detected
  kColdDirectory = 16,   // a snapshot's list of the cold SSM puts that follow it (not counted)
  kVectorColdDirectory = 17,  // the same for its cold V-store sessions' records (not counted)
  kZsetValue = 18,            // one sorted-set key: scores put or members removed (none: deleted)
  kStreamValue = 19,  // one stream key: its whole value or one operation (no value: deleted)
  // The log's compact forms of kStringSet and kStringMultiSet, for values below 512 bytes: the
  // same fields as varints (the common small write takes 25-45 % fewer bytes).
  kStringSetCompact = 20,
  kStringMultiSetCompact = 21,
  // 32 and up: the attention-layer V-store and KV.PREFIX families.
  kVCreate = 32,     // a V-store session: sid, index, dim, tier
  kVStore = 33,      // encoded rows [start, start + count) of one layer of one session
  kVDrop = 34,       // one V-store session
  kKvRegister = 35,  // a KV.PREFIX registration, creating its `_pk` / `_pv` sessions
  kKvDrop = 36,      // a KV.PREFIX registration and both of its sessions
  kKvPrefix = 37,    // a KV.PREFIX registration alone (snapshots: its sessions are their own)
  // The prefix index (docs/prefix-index.md).
  kPrefixNamespace = 40,      // a namespace: its shape and budget
  kPrefixBlocks = 41,         // consecutive full blocks of one namespace
  kPrefixCheckpoints = 42,    // a window of checkpoints with one anchor
  kPrefixDrop = 43,           // blocks (with subtrees) and checkpoints removed
  kPrefixNamespaceDrop = 44,  // a whole namespace
};

struct RecordHeader {
  uint64_t checksum = 0;
  uint32_t magic = kRecordMagic;
  RecordType type = RecordType::kSsmPut;
  uint8_t flags = 0;
  uint16_t db = 0;  // the database (SELECT index) the record changes; 0 in older files
  uint64_t lsn = 0;
  uint64_t payload_length = 0;
};

struct FileHeader {
  char magic[8] = {};
  uint32_t version = kFormatVersion;
  uint32_t salt = 0;
  uint64_t sequence = 0;
  uint64_t base_lsn = 0;
};

// A record staged for the log writer: `head` is kRecordHeaderSize bytes of room for the header
// (the writer seals it there) followed by the payload's start, `rest` the payload's further
// pieces in order (large values by reference, the fields between them). A small record is its
// head alone, one contiguous buffer the writer checksums in one pass and writes with its
// neighbours in one iovec.
struct EncodedRecord {
  RecordType type = RecordType::kSsmPut;
  Bytes head;
  std::vector<Bytes> rest;

  uint64_t payload_length() const;
};

// `size` writable bytes carved from this thread's staging slab (a fresh slab when it is used up;
// a size past a quarter of a slab gets its own buffer). Consecutive carves of one thread lie back
// to back, and a slab is freed with the last record staged in it.
Bytes StagingBytes(size_t size);

// A record of `type` whose payload is `payload`, with room for its header.
EncodedRecord StagePieces(RecordType type, std::vector<Bytes> payload);

// A kExecGroup record's payload: how many records follow as the group, and their whole size
// (headers and payloads). Recovery applies them only once all of them are read.
inline constexpr size_t kExecGroupPayloadSize = 16;
struct ExecGroup {
  uint64_t records = 0;
  uint64_t bytes = 0;
};
EncodedRecord StageExecGroup(const ExecGroup& group);
// False when `payload` is not a group's payload (its size).
bool DecodeExecGroup(std::string_view payload, ExecGroup& out);

// Little-endian field access; the formats are defined little-endian whatever the host. On a
// little-endian host a field is one unaligned load or store (a byte loop costs a header ~150
// instructions more on every record written).
template <typename T>
inline void PutLittle(uint8_t* p, T v) {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(p, &v, sizeof v);
  } else {
    for (size_t i = 0; i < sizeof v; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
  }
}
template <typename T>
inline T GetLittle(const uint8_t* p) {
  T v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&v, p, sizeof v);
  } else {
    for (size_t i = sizeof v; i-- > 0;) v = static_cast<T>((v << 8) | p[i]);
  }
  return v;
}
inline void PutU16(uint8_t* p, uint16_t v) { PutLittle(p, v); }
inline void PutU32(uint8_t* p, uint32_t v) { PutLittle(p, v); }
inline void PutU64(uint8_t* p, uint64_t v) { PutLittle(p, v); }
inline uint16_t GetU16(const uint8_t* p) { return GetLittle<uint16_t>(p); }
inline uint32_t GetU32(const uint8_t* p) { return GetLittle<uint32_t>(p); }
inline uint64_t GetU64(const uint8_t* p) { return GetLittle<uint64_t>(p); }

// Encodes the header with checksum 0; SealHeader fills the checksum in.
void EncodeRecordHeader(const RecordHeader& h, uint8_t out[kRecordHeaderSize]);
RecordHeader DecodeRecordHeader(const uint8_t in[kRecordHeaderSize]);

// The checksum of a record, fed piece by piece: header bytes [8, 32), then the payload in order.
// Seeded with the file's seed. Holds its hash state inline (no allocation).
class RecordHash {
 public:
  RecordHash(uint64_t seed, const uint8_t header[kRecordHeaderSize]);
  void Update(std::string_view piece);
  uint64_t Digest() const;

 private:
  alignas(64) unsigned char state_[640];  // an XXH3_state_t (log_format.cc checks the size)
};

// Checksum, seeded with the file's seed, of header bytes [8, 32) followed by the payload pieces
// in order.
uint64_t RecordChecksum(uint64_t seed, const uint8_t header[kRecordHeaderSize],
                        std::span<const std::string_view> payload);
// The same for a record whose payload follows its header in memory: one pass over
// `record[8, 32 + payload_length)`.
uint64_t ContiguousRecordChecksum(uint64_t seed, const uint8_t* record, uint64_t payload_length);

// Fills `header` for a record of `type` and `lsn` whose payload is `payload`, checksum included.
template <typename Pieces>
void SealRecord(uint64_t seed, RecordType type, uint64_t lsn, const Pieces& payload,
                uint8_t header[kRecordHeaderSize], uint16_t db = 0, uint8_t flags = 0);

void EncodeFileHeader(const FileHeader& h, uint8_t out[kFileHeaderSize]);
FileHeader DecodeFileHeader(const uint8_t in[kFileHeaderSize]);
// The checksum seed of the records of a file with this header.
uint64_t FileSeed(const FileHeader& h);
// A header for a new file: this version and a fresh random salt.
FileHeader NewFileHeader(const char (&magic)[8], uint64_t sequence, uint64_t base_lsn);

template <typename Pieces>
void SealRecord(uint64_t seed, RecordType type, uint64_t lsn, const Pieces& payload,
                uint8_t header[kRecordHeaderSize], uint16_t db, uint8_t flags) {
  RecordHeader h;
  h.type = type;
  h.flags = flags;
  h.db = db;
  h.lsn = lsn;
  for (const auto& piece : payload) h.payload_length += piece.size();
  EncodeRecordHeader(h, header);
  RecordHash hash(seed, header);
  for (const auto& piece : payload) hash.Update(piece.view());
  PutU64(header, hash.Digest());
}

}  // namespace prefixd::persist
