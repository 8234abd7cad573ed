#include "persist/rdb.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <map>

#include "common/numbers.h"
#include "store/members.h"
#include "store/sorted_set.h"
#include "store/stream.h"

namespace prefixd::persist {
namespace {

// RDB opcodes and value types (Redis's rdb.h).
constexpr uint8_t kOpAux = 250, kOpResizeDb = 251, kOpExpireTimeMs = 252, kOpSelectDb = 254,
                  kOpEof = 255;
constexpr uint8_t kTypeString = 0, kTypeList = 1, kTypeSet = 2, kTypeHash = 4, kTypeZset2 = 5,
                  kTypeStreamListpacks2 = 19;
constexpr std::string_view kMagic = "REDIS0010";
constexpr uint8_t kRdbVersion = 10;

// The reflected form of the Jones polynomial 0xad93d23594c935a9, by table eight bytes at a time
// (slicing-by-8): tables[0] is the bytewise table, tables[k] a byte followed by k zero bytes.
using CrcTables = std::array<std::array<uint64_t, 256>, 8>;
const CrcTables& CrcTable() {
  static const CrcTables tables = [] {
    CrcTables t{};
    for (uint64_t i = 0; i < 256; ++i) {
      uint64_t crc = i;
      for (int bit = 0; bit < 8; ++bit)
        crc = (crc & 1) ? (crc >> 1) ^ 0x95ac9329ac4bc9b5ull : crc >> 1;
      t[0][i] = crc;
    }
    for (size_t k = 1; k < 8; ++k) {
      for (size_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
    }
    return t;
  }();
  return tables;
}

void LittleEndian(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void LittleEndian64(std::string& out, uint64_t v) { LittleEndian(out, v, 8); }

// A stream ID as Redis's radix tree keys it: ms then seq, each 64 bits big-endian.
std::string RaxKey(store::StreamId id) {
  std::string key;
  for (uint64_t part : {id.ms, id.seq}) {
    for (int i = 7; i >= 0; --i) key.push_back(static_cast<char>((part >> (8 * i)) & 0xff));
  }
  return key;
}

// A listpack as Redis's listpack.c lays it out: total bytes (32 bits) and element count (16 bits,
// 65535 for "count them") little-endian, the elements, each its encoding and data then their
// length written backwards in 7-bit groups (the backlen), and the 0xff terminator.
class Listpack {
 public:
  void Int(int64_t v) {
    const size_t start = body_.size();
    const auto u = static_cast<uint64_t>(v);
    if (v >= 0 && v <= 127) {
      body_.push_back(static_cast<char>(v));  // 0xxxxxxx
    } else if (v >= -4096 && v <= 4095) {
      const uint64_t bits = u & 0x1fff;  // 110xxxxx xxxxxxxx, 13-bit two's complement
      body_.push_back(static_cast<char>(0xc0 | (bits >> 8)));
      body_.push_back(static_cast<char>(bits & 0xff));
    } else if (v >= INT16_MIN && v <= INT16_MAX) {
      body_.push_back(static_cast<char>(0xf1)), LittleEndian(body_, u, 2);
    } else if (v >= -(1 << 23) && v < (1 << 23)) {
      body_.push_back(static_cast<char>(0xf2)), LittleEndian(body_, u, 3);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      body_.push_back(static_cast<char>(0xf3)), LittleEndian(body_, u, 4);
    } else {
      body_.push_back(static_cast<char>(0xf4)), LittleEndian(body_, u, 8);
    }
    Backlen(start);
  }
  // A string that is a canonical 64-bit integer is stored as that integer, as Redis's lpAppend
  // does (it reads back as the same bytes), so a node's size is the size Redis gives it.
  void Str(std::string_view s) {
    if (const auto v = ParseInt64(s)) return Int(*v);
    const size_t start = body_.size();
    if (s.size() < 64) {
      body_.push_back(static_cast<char>(0x80 | s.size()));  // 10xxxxxx
    } else if (s.size() < 4096) {
      body_.push_back(static_cast<char>(0xe0 | (s.size() >> 8)));  // 1110xxxx xxxxxxxx
      body_.push_back(static_cast<char>(s.size() & 0xff));
    } else {
      body_.push_back(static_cast<char>(0xf0)), LittleEndian(body_, s.size(), 4);
    }
    body_.append(s);
    Backlen(start);
  }
  size_t Bytes() const { return kHeader + body_.size() + 1; }
  std::string Finish() const {
    std::string out;
    LittleEndian(out, Bytes(), 4);
    LittleEndian(out, std::min<uint64_t>(elements_, 65535), 2);
    out.append(body_);
    out.push_back(static_cast<char>(0xff));
    return out;
  }

 private:
  static constexpr size_t kHeader = 6;
  // The element's length (from `start`), most significant group first; every byte but the
  // first has the high bit set, so a reader walking back stops at the first.
  void Backlen(size_t start) {
    const uint64_t length = body_.size() - start;
    // listpack.c's thresholds: each a step below the next power of 128 from two bytes on.
    const int groups = length <= 127        ? 1
                       : length < 16383     ? 2
                       : length < 2097151   ? 3
                       : length < 268435455 ? 4
                                            : 5;
    for (int g = groups - 1; g >= 0; --g) {
      const auto bits = static_cast<uint8_t>((length >> (7 * g)) & 127);
      body_.push_back(static_cast<char>(g == groups - 1 ? bits : bits | 128));
    }
    ++elements_;
  }
  std::string body_;
  uint64_t elements_ = 0;
};

}  // namespace

uint64_t Crc64Jones(uint64_t crc, std::string_view bytes) {
  // An RDB of gigabytes is checksummed while every command waits (docs/replication.md): eight
  // bytes a step, three to four times the bytewise speed (60 MB: 61-84 ms against 218-285).
  const auto& t = CrcTable();
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size();
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word = 0;
    for (int i = 7; i >= 0; --i) word = (word << 8) | p[i];  // little-endian
    crc ^= word;
    crc = t[7][crc & 0xff] ^ t[6][(crc >> 8) & 0xff] ^ t[5][(crc >> 16) & 0xff] ^
          t[4][(crc >> 24) & 0xff] ^ t[3][(crc >> 32) & 0xff] ^ t[2][(crc >> 40) & 0xff] ^
          t[1][(crc >> 48) & 0xff] ^ t[0][crc >> 56];
  }
  for (; n > 0; ++p, --n) crc = t[0][(crc ^ *p) & 0xff] ^ (crc >> 8);
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
  // The types whose values the keyspace holds are Redis's own, each with an RDB type; prefixd's
  // own types live in their stores and have none.
  return store::HoldsValue(type);
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
    case store::KeyType::kHash:
      return kTypeHash;
    case store::KeyType::kZset:
      return kTypeZset2;
    case store::KeyType::kStream:
      return kTypeStreamListpacks2;
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
    case store::KeyType::kHash:
      return HashValue(info);
    case store::KeyType::kZset:
      return ZsetValue(info);
    case store::KeyType::kStream:
      return StreamValue(info);
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

void RdbWriter::HashValue(const store::KeyInfo& info) {
  // The pair count, then each field and its value (the type Redis writes for a hashtable; it
  // loads it into a listpack when small enough).
  const std::string_view value = info.value.view();
  Length(store::CountMembers(value) / 2);
  store::ForEachMember(value, [&](std::string_view item) { String(item); });
}

void RdbWriter::ZsetValue(const store::KeyInfo& info) {
  // ZSET_2: the count, then each member and its score as the 8 bytes of the double,
  // little-endian (infinities and -0.0 exactly), greatest first as Redis walks its skiplist.
  const std::vector<store::ScoredView> pairs = store::ZsetViews(info.value.view());
  Length(pairs.size());
  for (auto pair = pairs.rbegin(); pair != pairs.rend(); ++pair) {
    String(pair->member);
    uint64_t bits = 0;
    std::memcpy(&bits, &pair->score, sizeof bits);
    LittleEndian64(out_, bits);
  }
}

namespace {

// A stream's entries as Redis's listpack nodes (t_stream.c's layout), each keyed by its first
// entry's ID (the master ID). A node's master entry: live count, deleted count (0), the first
// entry's field count and names, 0. Each entry: flags, ms and seq as differences from the master
// ID, then (unless its fields are the master's: SAMEFIELDS, values only) the field count and the
// fields with their values, then how many elements the entry took after the flags (XREVRANGE
// walks back by it).
class StreamNodes {
 public:
  void Add(const store::StreamEntryView& entry) {
    items_.clear();
    size_t payload = 0;
    store::ForEachMember(entry.body, [&](std::string_view item) {
      items_.push_back(item);
      payload += item.size();
    });
    // As Redis's XADD: a node takes another entry while it holds fewer than kStreamNodeEntries
    // and its bytes plus the entry's fields and values stay under kStreamNodeBytes.
    if (count_ == 0 || count_ == kStreamNodeEntries || lp_.Bytes() + payload >= kStreamNodeBytes) {
      Open(entry.id);
    }
    const size_t pairs = items_.size() / 2;
    bool same = pairs == master_fields_.size();
    for (size_t i = 0; same && i < pairs; ++i) same = items_[2 * i] == master_fields_[i];
    lp_.Int(same ? kSameFields : 0);
    // Differences in 64-bit two's complement: a later ms may have a smaller seq.
    lp_.Int(static_cast<int64_t>(entry.id.ms - master_.ms));
    lp_.Int(static_cast<int64_t>(entry.id.seq - master_.seq));
    if (same) {
      for (size_t i = 0; i < pairs; ++i) lp_.Str(items_[2 * i + 1]);
    } else {
      lp_.Int(static_cast<int64_t>(pairs));
      for (size_t i = 0; i < 2 * pairs; ++i) lp_.Str(items_[i]);
    }
    lp_.Int(static_cast<int64_t>(3 + pairs + (same ? 0 : pairs + 1)));
    ++count_;
  }
  // (master ID as the radix tree's key, listpack) per node, oldest first.
  std::vector<std::pair<std::string, std::string>> Finish() {
    Close();
    return std::move(nodes_);
  }

 private:
  static constexpr int64_t kSameFields = 2;  // STREAM_ITEM_FLAG_SAMEFIELDS
  // Redis's defaults, stream-node-max-entries and stream-node-max-bytes.
  static constexpr size_t kStreamNodeEntries = 100, kStreamNodeBytes = 4096;
  // The live count leads the listpack as a one-byte element, patched when the node closes.
  static_assert(kStreamNodeEntries <= 127);

  void Open(store::StreamId master) {
    Close();
    master_ = master;
    master_fields_.clear();
    for (size_t i = 0; i < items_.size(); i += 2) master_fields_.push_back(items_[i]);
    lp_ = Listpack();
    lp_.Int(0);  // the live count, patched in Close
    lp_.Int(0);
    lp_.Int(static_cast<int64_t>(master_fields_.size()));
    for (std::string_view f : master_fields_) lp_.Str(f);
    lp_.Int(0);
  }
  void Close() {
    if (count_ == 0) return;
    std::string bytes = lp_.Finish();
    bytes[6] = static_cast<char>(count_);  // after the 6-byte header
    nodes_.emplace_back(RaxKey(master_), std::move(bytes));
    count_ = 0;
  }

  Listpack lp_;
  store::StreamId master_;
  std::vector<std::string_view> master_fields_, items_;
  size_t count_ = 0;
  std::vector<std::pair<std::string, std::string>> nodes_;
};

}  // namespace

void RdbWriter::StreamValue(const store::KeyInfo& info) {
  // STREAM_LISTPACKS_2 (Redis 7.0): the listpack nodes keyed by their master ID, the length, the
  // last, first and max deleted IDs, entries added, then each consumer group with its pending
  // entries (ID, delivery time, delivery count) and its consumers (name, seen time, the IDs of
  // their pending entries).
  const auto reader = store::StreamReader::Open(info.value.view());
  if (!reader) {
    // Checked when its record was; a damaged value is not expected. An empty stream keeps the
    // file loadable.
    for (int i = 0; i < 10; ++i) Length(0);
    return;
  }
  StreamNodes nodes;
  for (const store::StreamEntryView& entry : reader->entries()) nodes.Add(entry);
  const auto listpacks = nodes.Finish();
  Length(listpacks.size());
  for (const auto& [master_id, listpack] : listpacks) String(master_id), String(listpack);
  const store::StreamMeta& meta = reader->meta();
  Length(meta.length);
  for (store::StreamId id : {meta.last, meta.first, meta.max_deleted}) {
    Length(id.ms), Length(id.seq);
  }
  Length(meta.entries_added);
  const store::StreamGroups groups = reader->Groups();
  Length(groups.size());
  for (const auto& [name, group] : groups) {
    String(name);
    Length(group.last_delivered.ms), Length(group.last_delivered.seq);
    // -1 (unknown) as Redis writes it: the 64-bit length of its two's complement.
    Length(static_cast<uint64_t>(group.entries_read));
    Length(group.pending.size());
    for (const auto& [id, pending] : group.pending) {
      out_.append(RaxKey(id));
      LittleEndian64(out_, pending.delivery_ms);
      Length(pending.deliveries);
    }
    // Every owner of a pending entry is a consumer (Redis refuses an entry without one); one
    // missing from the consumers would be written with seen time 0.
    struct Consumer {
      uint64_t seen_ms = 0;
      std::vector<store::StreamId> pending;  // ascending, as the group's
    };
    std::map<std::string_view, Consumer> consumers;
    for (const auto& [consumer, c] : group.consumers) consumers[consumer].seen_ms = c.seen_ms;
    for (const auto& [id, pending] : group.pending) {
      consumers[pending.consumer].pending.push_back(id);
    }
    Length(consumers.size());
    for (const auto& [consumer, c] : consumers) {
      String(consumer);
      LittleEndian64(out_, c.seen_ms);
      Length(c.pending.size());
      for (store::StreamId id : c.pending) out_.append(RaxKey(id));
    }
  }
}

std::string RdbWriter::Finish() {
  Byte(kOpEof);
  LittleEndian64(out_, Crc64Jones(0, out_));
  return std::move(out_);
}

}  // namespace prefixd::persist
