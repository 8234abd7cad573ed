// RdbWriter: a Redis RDB file (version 10, as Redis 7.0 writes it) of the keys Redis has types
// for (strings, lists, sets, hashes, sorted sets, streams), with their expiry, for a Redis
// replica's full resynchronisation (engine/replication.h). Each type is one encoder function;
// prefixd's own types (SSM prefix, V-store, KV.PREFIX, prefix index) have no RDB type and are left
// out. Pure, single-owner object; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "store/keyspace.h"

namespace prefixd::persist {

// CRC-64-Jones (reflected, as Redis's crc64): the RDB's checksum. Feed it in pieces with the
// running value (0 to start).
uint64_t Crc64Jones(uint64_t crc, std::string_view bytes);

class RdbWriter {
 public:
  // Starts the file: magic, version and the auxiliary fields Redis writes (redis-ver,
  // redis-bits, ctime, used-mem, repl-stream-db, repl-id, repl-offset, aof-base).
  RdbWriter(std::string_view redis_version, uint64_t used_memory, std::string_view replid,
            uint64_t repl_offset);

  // Opens database `db` with the sizes Redis's RESIZEDB carries (hints for the loader).
  void SelectDb(uint64_t db, uint64_t keys, uint64_t volatile_keys);
  // Appends one key; false (nothing written) for a type without an RDB encoding.
  bool Key(std::string_view key, const store::KeyInfo& info);
  static bool Encodable(store::KeyType type);

  // Ends the file with its EOF opcode and CRC-64 and returns it.
  std::string Finish();

  // The value as Redis's DUMP serialises it (type byte, value, RDB version, CRC-64), what a
  // Redis RESTORE takes; empty for a type without an RDB encoding.
  static std::string DumpPayload(const store::KeyInfo& info);

 private:
  RdbWriter() = default;
  // The RDB type byte of an encodable type, and its value's encoding (one function per type).
  static uint8_t TypeByte(store::KeyType type);
  void Value(const store::KeyInfo& info);
  void Byte(uint8_t b) { out_.push_back(static_cast<char>(b)); }
  void Length(uint64_t n);
  void String(std::string_view s);
  void Aux(std::string_view key, std::string_view value);
  // The value encoders, one per type (the type byte is written before).
  void StringValue(const store::KeyInfo& info);
  void SetValue(const store::KeyInfo& info);
  void ListValue(const store::KeyInfo& info);
  void HashValue(const store::KeyInfo& info);
  void ZsetValue(const store::KeyInfo& info);
  void StreamValue(const store::KeyInfo& info);

  std::string out_;
};

}  // namespace prefixd::persist
