#include "persist/log_format.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t, to keep it on the stack
#include <xxhash.h>

#include <random>

namespace prefixd::persist {

void EncodeRecordHeader(const RecordHeader& h, uint8_t out[kRecordHeaderSize]) {
  PutU64(out, h.checksum);
  PutU32(out + 8, h.magic);
  out[12] = static_cast<uint8_t>(h.type);
  out[13] = h.flags;
  PutU16(out + 14, h.db);
  PutU64(out + 16, h.lsn);
  PutU64(out + 24, h.payload_length);
}

RecordHeader DecodeRecordHeader(const uint8_t in[kRecordHeaderSize]) {
  RecordHeader h;
  h.checksum = GetU64(in);
  h.magic = GetU32(in + 8);
  h.type = static_cast<RecordType>(in[12]);
  h.flags = in[13];
  h.db = GetU16(in + 14);
  h.lsn = GetU64(in + 16);
  h.payload_length = GetU64(in + 24);
  return h;
}

static_assert(sizeof(XXH3_state_t) <= 640 && alignof(XXH3_state_t) <= 64);

RecordHash::RecordHash(uint64_t seed, const uint8_t header[kRecordHeaderSize]) {
  auto* state = reinterpret_cast<XXH3_state_t*>(state_);
  XXH3_INITSTATE(state);
  XXH3_64bits_reset_withSeed(state, seed);
  XXH3_64bits_update(state, header + 8, kRecordHeaderSize - 8);
}

void RecordHash::Update(std::string_view piece) {
  XXH3_64bits_update(reinterpret_cast<XXH3_state_t*>(state_), piece.data(), piece.size());
}

uint64_t RecordHash::Digest() const {
  return XXH3_64bits_digest(reinterpret_cast<const XXH3_state_t*>(state_));
}

uint64_t RecordChecksum(uint64_t seed, const uint8_t header[kRecordHeaderSize],
                        std::span<const std::string_view> payload) {
  RecordHash hash(seed, header);
  for (std::string_view piece : payload) hash.Update(piece);
  return hash.Digest();
}

uint64_t ContiguousRecordChecksum(uint64_t seed, const uint8_t* record, uint64_t payload_length) {
  return XXH3_64bits_withSeed(record + 8, kRecordHeaderSize - 8 + payload_length, seed);
}

uint64_t EncodedRecord::payload_length() const {
  uint64_t length = head.size() - kRecordHeaderSize;
  for (const Bytes& piece : rest) length += piece.size();
  return length;
}

Bytes StagingBytes(size_t size) {
  // Small enough to come from malloc, large enough for a few hundred small records.
  constexpr size_t kSlabBytes = size_t{16} << 10;
  if (size > kSlabBytes / 4) return Bytes::Allocate(size);
  thread_local Bytes slab;
  thread_local size_t used = 0;
  if (slab.size() - used < size) {
    slab = Bytes::Allocate(kSlabBytes);
    used = 0;
  }
  Bytes out = slab.Slice(used, size);
  used += size;
  return out;
}

EncodedRecord StagePieces(RecordType type, std::vector<Bytes> payload) {
  return EncodedRecord{type, StagingBytes(kRecordHeaderSize), std::move(payload)};
}

void EncodeFileHeader(const FileHeader& h, uint8_t out[kFileHeaderSize]) {
  std::memcpy(out, h.magic, 8);
  PutU32(out + 8, h.version);
  PutU32(out + 12, h.salt);
  PutU64(out + 16, h.sequence);
  PutU64(out + 24, h.base_lsn);
}

FileHeader DecodeFileHeader(const uint8_t in[kFileHeaderSize]) {
  FileHeader h;
  std::memcpy(h.magic, in, 8);
  h.version = GetU32(in + 8);
  h.salt = GetU32(in + 12);
  h.sequence = GetU64(in + 16);
  h.base_lsn = GetU64(in + 24);
  return h;
}

uint64_t FileSeed(const FileHeader& h) {
  if (h.version == 1) return 0;
  uint8_t bytes[kFileHeaderSize];
  EncodeFileHeader(h, bytes);
  return XXH3_64bits(bytes, kFileHeaderSize);
}

FileHeader NewFileHeader(const char (&magic)[8], uint64_t sequence, uint64_t base_lsn) {
  static thread_local std::mt19937 rng{std::random_device{}()};
  FileHeader h;
  std::memcpy(h.magic, magic, 8);
  h.salt = static_cast<uint32_t>(rng());
  h.sequence = sequence;
  h.base_lsn = base_lsn;
  return h;
}

EncodedRecord StageExecGroup(const ExecGroup& group) {
  EncodedRecord record;
  record.type = RecordType::kExecGroup;
  record.head = StagingBytes(kRecordHeaderSize + kExecGroupPayloadSize);
  PutU64(record.head.mutable_data() + kRecordHeaderSize, group.records);
  PutU64(record.head.mutable_data() + kRecordHeaderSize + 8, group.bytes);
  return record;
}

bool DecodeExecGroup(std::string_view payload, ExecGroup& out) {
  if (payload.size() != kExecGroupPayloadSize) return false;
  const auto* p = reinterpret_cast<const uint8_t*>(payload.data());
  out.records = GetU64(p);
  out.bytes = GetU64(p + 8);
  return true;
}

}  // namespace prefixd::persist
