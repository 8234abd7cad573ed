// KeyEntry: one keyspace entry in one chunk — the directory's chain link, the key's position
// with its type/encoding/tier bits, its eviction-index handle, the key's bytes and a string
// value: inline when it is below kInlineValueBelow, else the handle of its own shared buffer
// (replied by reference) and the place its bytes sit on disk (the disk tier: a cold string keeps
// only the place). Owned by one Keyspace shard and touched under its lock only; chunks up to
// SmallChunks::kLargest bytes come from the shard's SmallChunks, larger ones from malloc.
//
// Layout: a 23-byte header — next 8 | hash:57 type:4 encoding:2 cold:1 8 | handle 4 | value size
// 2 | key size 1 (255: the size is the 4 bytes that follow) — then the key's bytes, then the
// value's bytes or an 8-aligned Bytes and StringPlace (docs/cache-design.md, "Memory per entry").
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>

#include <memory>

#include "common/bytes.h"
#include "store/cold_file.h"
#include "store/small_chunks.h"

namespace prefixd::store {

// A key's type, as TYPE names it.
enum class KeyType : uint8_t {
  kSsmPrefix = 0,
  kVstore = 1,
  kKvPrefix = 2,
  kString = 3,
  kPrefixIndex = 4,
  kSet = 5,     // members in the entry's value (store/members.h); encoding: SetEncoding
  kList = 6,    // elements in the entry's value, head first
  kHash = 7,    // fields and values in the entry's value, alternating; encoding: HashEncoding
  kZset = 8,    // (score, member) pairs in the entry's value (store/sorted_set.h): ZsetEncoding
  kStream = 9,  // entries and consumer groups in the entry's value (store/stream.h)
};
// Room for every type's counter, the stream's (9) included; a number without a KeyType here
// names "none" (KeyTypeName), counts no key and is skipped where types are listed (KnownKeyType).
inline constexpr size_t kKeyTypeCount = 10;

// The types whose values the keyspace entry holds itself (the others live in their stores).
constexpr bool HoldsValue(KeyType type) {
  return type == KeyType::kString || type == KeyType::kSet || type == KeyType::kList ||
         type == KeyType::kHash || type == KeyType::kZset || type == KeyType::kStream;
}

// How Redis would hold a string value, as OBJECT ENCODING names it (Redis's TCL suite checks it).
enum class StringEncoding : uint8_t { kRaw = 0, kInt = 1, kEmbstr = 2 };
// A set's encoding as Redis 7.0 would hold it, kept in the same two bits (a list has one:
// quicklist).
enum class SetEncoding : uint8_t { kIntset = 0, kHashtable = 1 };
// A hash's encoding as Redis 7.0 would hold it (hash-max-listpack-entries/-value), in the same
// two bits.
enum class HashEncoding : uint8_t { kListpack = 0, kHashtable = 1 };
// A sorted set's, the same way (zset-max-listpack-entries and -value).
enum class ZsetEncoding : uint8_t { kListpack = 0, kSkiplist = 1 };
// Where an SSM session's layers are: in StateStore (the entry holds no value), or in the entry's
// value (store/compact_session.h), in the same two bits.
enum class SsmEncoding : uint8_t { kInStore = 0, kCompact = 1 };

// Where a large string value's bytes sit in a log or snapshot file (no file: not placed yet).
struct StringPlace {
  std::shared_ptr<const ColdFile> file;
  uint64_t offset = 0;
  uint64_t length = 0;
  // The bytes are fsynced: the value may leave memory.
  bool durable() const { return file != nullptr && file->durable_end() >= offset + length; }
};

struct KeyEntry {
  // Values below this are copied into the entry: ReplyWriter copies values below the same size
  // into the reply (kReferenceThreshold), so a handle would buy nothing but its 40 bytes and a
  // second allocation. From it on, the value keeps its buffer and GET replies by reference.
  static constexpr size_t kInlineValueBelow = 16 * 1024;
  static constexpr size_t kHeaderBytes = 23;
  static constexpr int kHashBits = 57;

  // A new entry holding `value`, not linked; its chunk from `chunks` when small.
  static KeyEntry* Make(SmallChunks& chunks, uint64_t hash, std::string_view key, KeyType type,
                        uint32_t handle, Bytes value = Bytes());
  // Frees the entry, under the lock of the shard whose SmallChunks it came from.
  static void Destroy(KeyEntry* entry);
  // `entry` holding `value` from now on. In place when the value fits the entry's chunk without
  // changing its size class: returns `entry`. Otherwise returns a fresh chunk with the same header
  // and key, and the caller replaces `entry` by it and Destroys `entry`. A previous external
  // buffer is moved to `released` (to be freed outside the lock).
  static KeyEntry* WithValue(SmallChunks& chunks, KeyEntry* entry, Bytes value, Bytes& released);
  // Whether WithValue writes a value of `value_size` bytes into this entry as it is: an inline
  // value of the same size class (then only the value's bytes and size change).
  bool FitsInPlace(size_t value_size) const;
  // The same for a value that is on disk only (`place`): the entry takes the external layout
  // with an empty buffer (the caller sets the cold bit).
  static KeyEntry* WithColdPlace(SmallChunks& chunks, KeyEntry* entry, StringPlace place,
                                 Bytes& released);
  // What an entry's chunk of `request` bytes costs (StoreChunkBytes, the struct's size at least).
  static constexpr size_t ChunkBytesFor(size_t request) {
    return StoreChunkBytes(request < sizeof(KeyEntry) ? sizeof(KeyEntry) : request);
  }

  uint64_t Hash() const { return word & kHashMask; }
  std::string_view Key() const { return {KeyStart(), key_size()}; }
  KeyType type() const { return static_cast<KeyType>((word >> kTypeShift) & 15); }
  void set_type(KeyType t) { SetBits(kTypeShift, 15, static_cast<uint64_t>(t)); }
  StringEncoding encoding() const {
    return static_cast<StringEncoding>((word >> kEncodingShift) & 3);
  }
  void set_encoding(StringEncoding e) { SetBits(kEncodingShift, 3, static_cast<uint64_t>(e)); }
  bool cold() const { return (word >> kColdShift) & 1; }
  void set_cold(bool c) { SetBits(kColdShift, 1, c ? 1 : 0); }

  bool value_inline() const { return value_size != kExternal; }
  // A hot value's bytes; empty for a cold string (its bytes are at Place()).
  std::string_view Value() const;
  // The value as a Bytes: an external buffer is shared, an inline value copied (compact).
  Bytes ValueCopy() const;
  // The heap this entry takes: its chunk (ChunkBytesFor), plus an external value's buffer.
  size_t ChunkBytes() const { return ChunkBytesFor(RequestBytes()); }
  size_t ExternalBytes() const { return value_inline() ? 0 : External().capacity(); }
  // The value's own bytes for INFO's string figure: inline size or the buffer's capacity.
  size_t ValueBytes() const { return value_inline() ? value_size : External().capacity(); }

  // The disk tier (large values only; nullptr for an inline one). A new value is not placed;
  // the log reports where its record landed and SetPlace records it if the entry still holds
  // the buffer at `data` (nullptr: whatever it holds, for recovery, which runs alone). TakeValue
  // moves a placed value out of memory (the caller sets the cold bit); RestoreValue puts bytes read
  // back from the place in again.
  const StringPlace* Place() const { return value_inline() ? nullptr : &PlaceSlot(); }
  bool SetPlace(const uint8_t* data, std::shared_ptr<const ColdFile> file, uint64_t offset);
  void Repoint(std::shared_ptr<const ColdFile> file, uint64_t offset) {
    PlaceSlot().file = std::move(file);
    PlaceSlot().offset = offset;
  }
  Bytes TakeValue() { return std::exchange(External(), Bytes()); }
  // An external value's handle, to be written in place while it is Unique (Keyspace::EditValue).
  Bytes& ExternalValue() { return External(); }
  void RestoreValue(Bytes value) { External() = std::move(value); }

  // The chain link HashOrderedMap keeps; the fields below are read through the accessors.
  KeyEntry* next;
  uint64_t word;           // hash, type, encoding, cold
  uint32_t handle;         // the node in the shard's (hot or cold) eviction index
  uint16_t value_size;     // inline size, or kExternal
  uint8_t short_key_size;  // the key's size below kLongKey; kLongKey: the tail opens with it
  char tail[1];            // the key and value start here; the chunk is as long as they need

 private:
  static constexpr uint64_t kHashMask = (uint64_t{1} << kHashBits) - 1;
  static constexpr int kTypeShift = 57;
  static constexpr int kEncodingShift = 61;
  static constexpr int kColdShift = 63;
  static constexpr uint16_t kExternal = 0xffff;
  static_assert(kInlineValueBelow < kExternal);
  // Keys this long and longer keep their size in 4 bytes at the tail's start (a key of up to 254
  // bytes, Redis's and LMCache's alike, pays one byte for it).
  static constexpr uint8_t kLongKey = 0xff;

  static size_t KeyOffset(size_t key_size) {
    return kHeaderBytes + (key_size < kLongKey ? 0 : sizeof(uint32_t));
  }
  static size_t ExternalOffset(size_t key_size) {
    return (KeyOffset(key_size) + key_size + 7) / 8 * 8;
  }
  static size_t RequestFor(size_t key_size, size_t value_size, bool inline_value) {
    return inline_value ? KeyOffset(key_size) + key_size + value_size
                        : ExternalOffset(key_size) + sizeof(Bytes) + sizeof(StringPlace);
  }
  size_t RequestBytes() const { return RequestFor(key_size(), value_size, value_inline()); }
  // A fresh chunk for `request` bytes, and the way back.
  static KeyEntry* Allocate(SmallChunks& chunks, size_t request);
  static void Free(KeyEntry* entry, size_t request);
  // Writes `value` into a fresh chunk whose header and key are set and whose request made room
  // for it (inline below kInlineValueBelow, else its handle and an empty place).
  void FillValue(Bytes value);
  void SetBits(int shift, uint64_t mask, uint64_t v) {
    word = (word & ~(mask << shift)) | (v << shift);
  }
  size_t key_size() const {
    if (short_key_size != kLongKey) [[likely]]
      return short_key_size;
    uint32_t size;
    std::memcpy(&size, Base() + kHeaderBytes, sizeof size);
    return size;
  }
  const char* Base() const { return reinterpret_cast<const char*>(this); }
  char* Base() { return reinterpret_cast<char*>(this); }
  const char* KeyStart() const { return Base() + KeyOffset(short_key_size); }
  // The value's bytes (inline) or handle (external) start here.
  const char* ValueStart() const { return KeyStart() + key_size(); }
  char* ValueStart() { return Base() + KeyOffset(short_key_size) + key_size(); }
  Bytes& External() { return *reinterpret_cast<Bytes*>(Base() + ExternalOffset(key_size())); }
  const Bytes& External() const {
    return *reinterpret_cast<const Bytes*>(Base() + ExternalOffset(key_size()));
  }
  StringPlace& PlaceSlot() {
    return *reinterpret_cast<StringPlace*>(Base() + ExternalOffset(key_size()) + sizeof(Bytes));
  }
  const StringPlace& PlaceSlot() const {
    return *reinterpret_cast<const StringPlace*>(Base() + ExternalOffset(key_size()) +
                                                 sizeof(Bytes));
  }
};

}  // namespace prefixd::store
