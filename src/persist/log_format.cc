#include "persist/log_format.h"

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

uint64_t RecordChecksum(uint64_t seed, const uint8_t header[kRecordHeaderSize],
                        std::span<const std::string_view> payload) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset_withSeed(state, seed);
  XXH3_64bits_update(state, header + 8, kRecordHeaderSize - 8);
  for (std::string_view piece : payload) XXH3_64bits_update(state, piece.data(), piece.size());
  uint64_t digest = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return digest;
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

}  // namespace prefixd::persist
