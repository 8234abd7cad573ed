#include "store/key_entry.h"

#include <malloc.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

namespace prefixd::store {

static_assert(offsetof(KeyEntry, tail) == KeyEntry::kHeaderBytes, "the header is packed");
static_assert(sizeof(KeyEntry) == 24, "the struct ends with the tail's first byte");

// At least the struct's own size, so the header's fields never lie past the chunk (a key and
// value under 1 byte).
KeyEntry* KeyEntry::Allocate(SmallChunks& chunks, size_t request) {
  return static_cast<KeyEntry*>(AllocateStoreChunk(chunks, std::max(request, sizeof(KeyEntry))));
}

void KeyEntry::Free(KeyEntry* entry, size_t request) {
  FreeStoreChunk(entry, std::max(request, sizeof(KeyEntry)));
}

KeyEntry* KeyEntry::Make(SmallChunks& chunks, uint64_t hash, std::string_view key, KeyType type,
                         uint32_t handle, Bytes value) {
  const bool inline_value = value.size() < kInlineValueBelow;
  KeyEntry* e = Allocate(chunks, RequestFor(key.size(), value.size(), inline_value));
  e->next = nullptr;
  e->word = hash & kHashMask;
  e->set_type(type);
  e->handle = handle;
  if (key.size() < kLongKey) {
    e->short_key_size = static_cast<uint8_t>(key.size());
  } else {
    e->short_key_size = kLongKey;
    const auto size = static_cast<uint32_t>(key.size());
    std::memcpy(e->Base() + kHeaderBytes, &size, sizeof size);
  }
  if (!key.empty()) std::memcpy(e->Base() + KeyOffset(key.size()), key.data(), key.size());
  e->FillValue(std::move(value));
  return e;
}

void KeyEntry::Destroy(KeyEntry* entry) {
  if (!entry->value_inline()) {
    entry->External().~Bytes();
    entry->PlaceSlot().~StringPlace();
  }
  Free(entry, entry->RequestBytes());
}

void KeyEntry::FillValue(Bytes value) {
  if (value.size() < kInlineValueBelow) {
    value_size = static_cast<uint16_t>(value.size());
    if (!value.empty()) std::memcpy(ValueStart(), value.data(), value.size());
  } else {
    value_size = kExternal;
    new (&External()) Bytes(std::move(value));
    new (&PlaceSlot()) StringPlace();
  }
}

std::string_view KeyEntry::Value() const {
  if (!value_inline()) return External().view();
  return {ValueStart(), value_size};
}

Bytes KeyEntry::ValueCopy() const {
  return value_inline() ? Bytes::CopyCompact(Value()) : External();
}

bool KeyEntry::FitsInPlace(size_t value_size) const {
  if (!value_inline() || value_size >= kInlineValueBelow) return false;
  const size_t request = RequestFor(key_size(), value_size, true);
  // The size class stays; a malloc chunk must also really hold the request (glibc's usable size,
  // ASan's exact one).
  return ChunkBytesFor(request) == ChunkBytes() &&
         (request <= SmallChunks::kLargest ||
          malloc_usable_size(const_cast<KeyEntry*>(this)) >= request);
}

KeyEntry* KeyEntry::WithValue(SmallChunks& chunks, KeyEntry* entry, Bytes value, Bytes& released) {
  const bool inline_value = value.size() < kInlineValueBelow;
  if (!inline_value && !entry->value_inline()) {
    released = std::exchange(entry->External(), std::move(value));
    entry->PlaceSlot() = StringPlace{};  // the new value is not on disk yet
    return entry;
  }
  if (entry->FitsInPlace(value.size())) {
    if (!value.empty()) std::memcpy(entry->ValueStart(), value.data(), value.size());
    entry->value_size = static_cast<uint16_t>(value.size());
    return entry;
  }
  const size_t key_size = entry->key_size();
  const size_t request = RequestFor(key_size, value.size(), inline_value);
  KeyEntry* fresh = Allocate(chunks, request);
  std::memcpy(fresh, entry, KeyOffset(key_size) + key_size);
  fresh->next = nullptr;
  fresh->FillValue(std::move(value));
  if (!entry->value_inline()) released = std::move(entry->External());
  return fresh;
}

KeyEntry* KeyEntry::WithColdPlace(SmallChunks& chunks, KeyEntry* entry, StringPlace place,
                                  Bytes& released) {
  if (!entry->value_inline()) {
    released = std::exchange(entry->External(), Bytes());
    entry->PlaceSlot() = std::move(place);
    return entry;
  }
  const size_t key_size = entry->key_size();
  KeyEntry* fresh = Allocate(chunks, RequestFor(key_size, 0, false));
  std::memcpy(fresh, entry, KeyOffset(key_size) + key_size);
  fresh->next = nullptr;
  fresh->value_size = kExternal;
  new (&fresh->External()) Bytes();
  new (&fresh->PlaceSlot()) StringPlace(std::move(place));
  return fresh;
}

bool KeyEntry::SetPlace(const uint8_t* data, std::shared_ptr<const ColdFile> file,
                        uint64_t offset) {
  if (value_inline() || cold() || (data != nullptr && External().data() != data)) return false;
  PlaceSlot() = StringPlace{std::move(file), offset, External().size()};
  return true;
}

}  // namespace prefixd::store
