#include "persist/rdb.h"

#include <array>
#include <chrono>

#include "store/members.h"

namespace prefixd::persist {
namespace {

// RDB opcodes and value types (Redis's rdb.h).
constexpr uint8_t kOpAux = 250, kOpResizeDb = 251, kOpExpireTimeMs = 252, kOpSelectDb = 254,
                  kOpEof = 255;
constexpr uint8_t kTypeString = 0, kTypeList = 1, kTypeSet = 2;
constexpr std::string_view kMagic = "REDIS0010";
constexpr uint8_t kRdbVersion = 10;

// The reflected form of the Jones polynomial 0xad93d23594c935a9, bytewise by table.
const std::array<uint64_t, 256>& CrcTable() {
  static const std::array<uint64_t, 256> table = [] {
    std::array<uint64_t, 256> t{};
    for (uint64_t i = 0; i < 256; ++i) {
      uint64_t crc = i;
      for (int bit = 0; bit < 8; ++bit)
        crc = (crc & 1) ? (crc >> 1) ^ 0x95ac9329ac4bc9b5ull : crc >> 1;
      t[i] = crc;
    }
    return t;
  }();
  return table;
}

void LittleEndian64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

uint64_t Crc64Jones(uint64_t crc, std::string_view bytes) {
  const auto& table = CrcTable();
  for (unsigned char b : bytes) crc = table[(crc ^ b) & 0xff] ^ (crc >> 8);
  return crc;
}

RdbWriter::RdbWriter(std::string_view redis_version, uint64_t used_memory, std::string_view replid,
                     uint64_t repl_offset) {
  out_.append(kMagic);
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  Aux("redis-ver", redis_version);
  Aux("redis-bits", "64");
  Aux("ctime", std::to_string(now));
  Aux("used-mem", std::to_string(used_memory));
  Aux("repl-stream-db", "0");
  Aux("repl-id", replid);
  Aux("repl-offset", std::to_string(repl_offset));
  Aux("aof-base", "0");
}

void RdbWriter::Length(uint64_t n) {
  // 6, 14, 32 or 64 bits, the longer ones big-endian (Redis's rdbSaveLen).
  if (n < (1u << 6)) {
    Byte(static_cast<uint8_t>(n));
  } else if (n < (1u << 14)) {
    Byte(static_cast<uint8_t>(0x40 | (n >> 8))), Byte(static_cast<uint8_t>(n & 0xff));
  } else if (n <= 0xffffffffull) {
    Byte(0x80);
    for (int i = 3; i >= 0; --i) Byte(static_cast<uint8_t>((n >> (8 * i)) & 0xff));
  } else {
    Byte(0x81);
    for (int i = 7; i >= 0; --i) Byte(static_cast<uint8_t>((n >> (8 * i)) & 0xff));
  }
}

void RdbWriter::String(std::string_view s) {
  Length(s.size());
  out_.append(s);
}

void RdbWriter::Aux(std::string_view key, std::string_view value) {
  Byte(kOpAux);
  String(key);
  String(value);
}

void RdbWriter::SelectDb(uint64_t db, uint64_t keys, uint64_t volatile_keys) {
  Byte(kOpSelectDb);
  Length(db);
  Byte(kOpResizeDb);
  Length(keys);
  Length(volatile_keys);
}

bool RdbWriter::Encodable(store::KeyType type) {
  return type == store::KeyType::kString || type == store::KeyType::kSet ||
         type == store::KeyType::kList;
}

bool RdbWriter::Key(std::string_view key, const store::KeyInfo& info) {
  if (!Encodable(info.type)) return false;
  if (info.expire_at_ms != 0) {
    Byte(kOpExpireTimeMs);
    LittleEndian64(out_, static_cast<uint64_t>(info.expire_at_ms));
  }
  Byte(TypeByte(info.type));
  String(key);
  Value(info);
  return true;
}

uint8_t RdbWriter::TypeByte(store::KeyType type) {
  switch (type) {
    case store::KeyType::kSet:
      return kTypeSet;
    case store::KeyType::kList:
      // The plain list type (a count, then the elements head first): Redis 7.0 still loads it,
      // into its quicklist.
      return kTypeList;
    default:
      return kTypeString;
  }
}

void RdbWriter::Value(const store::KeyInfo& info) {
  switch (info.type) {
    case store::KeyType::kString:
      return StringValue(info);
    case store::KeyType::kSet:
      return SetValue(info);
    case store::KeyType::kList:
      return ListValue(info);
    default:
      return;
  }
}

std::string RdbWriter::DumpPayload(const store::KeyInfo& info) {
  if (!Encodable(info.type)) return {};
  RdbWriter dump;
  dump.Byte(TypeByte(info.type));
  dump.Value(info);
  dump.Byte(kRdbVersion), dump.Byte(0);  // 16 bits, little-endian
  LittleEndian64(dump.out_, Crc64Jones(0, dump.out_));
  return std::move(dump.out_);
}

void RdbWriter::StringValue(const store::KeyInfo& info) { String(info.value.view()); }

void RdbWriter::SetValue(const store::KeyInfo& info) {
  const auto members = store::DecodeMembers(info.value.view()).value_or(std::vector<std::string>{});
  Length(members.size());
  for (const std::string& m : members) String(m);
}

void RdbWriter::ListValue(const store::KeyInfo& info) {
  const auto elements =
      store::DecodeMembers(info.value.view()).value_or(std::vector<std::string>{});
  Length(elements.size());
  for (const std::string& e : elements) String(e);
}

std::string RdbWriter::Finish() {
  Byte(kOpEof);
  LittleEndian64(out_, Crc64Jones(0, out_));
  return std::move(out_);
}

}  // namespace prefixd::persist
