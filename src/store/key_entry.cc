#include "store/key_entry.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace prefixd::store {

static_assert(offsetof(KeyEntry, tail) == KeyEntry::kHeaderBytes, "the header is packed");

namespace {

// At least the struct's own size, so the header's fields never lie past the allocation (a key
// and value under 6 bytes; glibc gives those a 48-byte chunk either way).
KeyEntry* AllocateEntry(size_t request) {
  void* raw = std::malloc(std::max(request, sizeof(KeyEntry)));
  if (raw == nullptr) throw std::bad_alloc();
  return static_cast<KeyEntry*>(raw);
}

}  // namespace

KeyEntry* KeyEntry::Make(uint64_t hash, std::string_view key, KeyType type, uint32_t handle) {
  KeyEntry* e = AllocateEntry(RequestFor(key.size(), 0, true));
  e->next = nullptr;
  e->word = hash & kHashMask;
  e->set_type(type);
  e->handle = handle;
  e->key_size = static_cast<uint32_t>(key.size());
  e->value_size = 0;
  if (!key.empty()) std::memcpy(e->Tail(), key.data(), key.size());
  return e;
}

void KeyEntry::Destroy(KeyEntry* entry) {
  if (!entry->value_inline()) {
    entry->External().~Bytes();
    entry->PlaceSlot().~StringPlace();
  }
  std::free(entry);
}

std::string_view KeyEntry::Value() const {
  if (!value_inline()) return External().view();
  return {Tail() + key_size, value_size};
}

Bytes KeyEntry::ValueCopy() const {
  return value_inline() ? Bytes::CopyCompact(Value()) : External();
}

KeyEntry* KeyEntry::WithValue(KeyEntry* entry, Bytes value, Bytes& released) {
  const bool inline_value = value.size() < kInlineValueBelow;
  if (!inline_value && !entry->value_inline()) {
    released = std::exchange(entry->External(), std::move(value));
    entry->PlaceSlot() = StringPlace{};  // the new value is not on disk yet
    return entry;
  }
  const size_t request = RequestFor(entry->key_size, value.size(), inline_value);
  if (inline_value && entry->value_inline() && MallocChunkBytes(request) == entry->ChunkBytes() &&
      malloc_usable_size(entry) >= request) {
    if (!value.empty()) std::memcpy(entry->Tail() + entry->key_size, value.data(), value.size());
    entry->value_size = static_cast<uint16_t>(value.size());
    return entry;
  }
  KeyEntry* fresh = AllocateEntry(request);
  std::memcpy(fresh, entry, kHeaderBytes + entry->key_size);
  fresh->next = nullptr;
  if (inline_value) {
    fresh->value_size = static_cast<uint16_t>(value.size());
    if (!value.empty()) std::memcpy(fresh->Tail() + fresh->key_size, value.data(), value.size());
  } else {
    fresh->value_size = kExternal;
    new (&fresh->External()) Bytes(std::move(value));
    new (&fresh->PlaceSlot()) StringPlace();
  }
  if (!entry->value_inline()) released = std::move(entry->External());
  return fresh;
}

KeyEntry* KeyEntry::WithColdPlace(KeyEntry* entry, StringPlace place, Bytes& released) {
  if (!entry->value_inline()) {
    released = std::exchange(entry->External(), Bytes());
    entry->PlaceSlot() = std::move(place);
    return entry;
  }
  KeyEntry* fresh = AllocateEntry(RequestFor(entry->key_size, 0, false));
  std::memcpy(fresh, entry, kHeaderBytes + entry->key_size);
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
