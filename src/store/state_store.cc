// StateStore's methods. Over 900 lines by choice: the session table, its compact sessions in the
// keyspace, the disk tier and the by-reference reads share one shard lock discipline and the
// private slot helpers (a slot's cost, file and place); split, they would share them through a
// private header.
#include "store/state_store.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <utility>

#include "store/compact_session.h"
#include "store/key_entry.h"
#include "store/keyspace.h"

namespace prefixd::store {

// A layer's slot in its session's chunk. `place` is where its bytes sit on disk: the file's
// index in the shard's table (plus one) in the top 16 bits, the offset in the low 48. A hot
// small value not placed yet keeps there instead (file index 0) the address of the buffer it
// was copied from, which names it for Place as a large value's own buffer does.
struct StateStore::Slot {
  uint32_t layer;
  uint32_t data;  // offset in the chunk of the value's bytes or buffer handle; 0: cold
  uint64_t length;
  uint64_t place;
};

// Layout: next 8 | sid size 4 | layer count 4 | the sid, padded to 8 | Slot[count] | a Bytes
// handle per large hot value | the small hot values' bytes. Rebuilt whole when a layer comes,
// goes, changes kind or size; written in place otherwise.
struct StateStore::Session {
  Session* next;
  uint32_t sid_size;
  uint32_t count;

  static size_t SlotsAt(size_t sid_size) { return 16 + (sid_size + 7) / 8 * 8; }
  char* base() { return reinterpret_cast<char*>(this); }
  const char* base() const { return reinterpret_cast<const char*>(this); }
  std::string_view sid() const { return {base() + 16, sid_size}; }
  Slot* slots() { return reinterpret_cast<Slot*>(base() + SlotsAt(sid_size)); }
  const Slot* slots() const { return reinterpret_cast<const Slot*>(base() + SlotsAt(sid_size)); }
  Slot* begin() { return slots(); }
  Slot* end() { return slots() + count; }
  const Slot* begin() const { return slots(); }
  const Slot* end() const { return slots() + count; }
  Slot* Find(uint32_t layer) {
    Slot* it = std::lower_bound(begin(), end(), layer,
                                [](const Slot& s, uint32_t l) { return s.layer < l; });
    return it != end() && it->layer == layer ? it : nullptr;
  }
  const Slot* Find(uint32_t layer) const { return const_cast<Session*>(this)->Find(layer); }

  static bool Hot(const Slot& s) { return s.data != 0; }
  static bool Small(const Slot& s) { return Hot(s) && s.length <= kInlineValueMax; }
  static bool Large(const Slot& s) { return Hot(s) && s.length > kInlineValueMax; }
  Bytes& Buffer(const Slot& s) { return *std::launder(reinterpret_cast<Bytes*>(base() + s.data)); }
  const Bytes& Buffer(const Slot& s) const {
    return *std::launder(reinterpret_cast<const Bytes*>(base() + s.data));
  }
  uint8_t* Inline(const Slot& s) { return reinterpret_cast<uint8_t*>(base() + s.data); }
  const uint8_t* Inline(const Slot& s) const {
    return reinterpret_cast<const uint8_t*>(base() + s.data);
  }
  // A hot value as a handle: the large one's buffer shared, a small one copied out.
  Bytes Value(const Slot& s) const {
    if (Large(s)) return Buffer(s);
    return Bytes::CopyCompact({reinterpret_cast<const char*>(Inline(s)), s.length});
  }
  size_t RequestBytes() const {
    size_t bytes = SlotsAt(sid_size) + sizeof(Slot) * count;
    for (const Slot& s : *this) bytes += Large(s) ? sizeof(Bytes) : Small(s) ? s.length : 0;
    return bytes;
  }
  size_t ChunkBytes() const { return StoreChunkBytes(RequestBytes()); }
};

struct StateStore::Draft {
  enum class Kind : uint8_t { kCold, kSmall, kLarge };
  uint32_t layer = 0;
  Kind kind = Kind::kCold;
  uint64_t length = 0;
  uint64_t place = 0;
  const uint8_t* bytes = nullptr;  // a small value's bytes, wherever they are until Build
  Bytes buffer;                    // a large value's

  // A hot value, stored as its size has it, named (when small) by the buffer it came from.
  static Draft Of(uint32_t layer, const Bytes& value);
};

namespace {

// The bucket array's share of a session: one pointer per bucket, at most one bucket per session.
constexpr int64_t kBucketBytes = sizeof(void*);
constexpr int kOffsetBits = 48;
constexpr uint64_t kOffsetMask = (uint64_t{1} << kOffsetBits) - 1;
constexpr uint32_t kMaxFiles = (1u << (64 - kOffsetBits)) - 1;
constexpr size_t kMinBuckets = 8;

uint32_t FileIndexOf(uint64_t place) { return static_cast<uint32_t>(place >> kOffsetBits); }
uint64_t OffsetOf(uint64_t place) { return place & kOffsetMask; }
bool Placed(uint64_t place) { return FileIndexOf(place) != 0; }
// A small value's source buffer as its place word (0, naming nothing, past 48 address bits).
uint64_t TagOf(const uint8_t* data) {
  const auto address = reinterpret_cast<uintptr_t>(data);
  return address <= kOffsetMask ? address : 0;
}

}  // namespace

StateStore::Draft StateStore::Draft::Of(uint32_t layer, const Bytes& value) {
  Draft d;
  d.layer = layer;
  d.length = value.size();
  if (value.size() <= kInlineValueMax) {
    d.kind = Kind::kSmall;
    d.bytes = value.data();
    d.place = TagOf(value.data());
  } else {
    d.kind = Kind::kLarge;
    d.buffer = value;
  }
  return d;
}

StateStore::StateStore(size_t shard_count)
    : shards_(std::make_unique<Shard[]>(shard_count)), shard_count_(shard_count) {}

StateStore::~StateStore() { Clear(); }

StateStore::Located StateStore::Locate(std::string_view sid) const {
  // The upper bits pick the shard so they stay independent of the table's bucket bits.
  const uint64_t h = XXH3_64bits(sid.data(), sid.size());
  return {shards_[(h >> 32) % shard_count_], h};
}

StateStore::Session* StateStore::FindSession(const Shard& shard, uint64_t hash,
                                             std::string_view sid) {
  if (shard.buckets.empty()) return nullptr;
  Session* s = shard.buckets[hash & (shard.buckets.size() - 1)];
  while (s != nullptr && s->sid() != sid) s = s->next;
  return s;
}

StateStore::Session** StateStore::LinkOf(Shard& shard, uint64_t hash, std::string_view sid) {
  if (shard.buckets.empty()) shard.buckets.assign(kMinBuckets, nullptr);
  Session** link = &shard.buckets[hash & (shard.buckets.size() - 1)];
  while (*link != nullptr && (*link)->sid() != sid) link = &(*link)->next;
  return link;
}

void StateStore::Rehash(Shard& shard, size_t buckets) {
  std::vector<Session*> fresh(buckets, nullptr);
  for (Session* head : shard.buckets) {
    while (head != nullptr) {
      Session* s = std::exchange(head, head->next);
      const std::string_view sid = s->sid();
      Session*& bucket = fresh[XXH3_64bits(sid.data(), sid.size()) & (buckets - 1)];
      s->next = bucket;
      bucket = s;
    }
  }
  shard.buckets.swap(fresh);
}

void StateStore::LinkNew(Shard& shard, uint64_t hash, Session* session) {
  Session*& bucket = shard.buckets[hash & (shard.buckets.size() - 1)];
  session->next = bucket;
  bucket = session;
  if (++shard.sessions > shard.buckets.size()) Rehash(shard, shard.buckets.size() * 2);
}

void StateStore::Erase(Shard& shard, Session** link, Released& released) {
  Session* s = *link;
  Charge(CostOf(*s), -1);
  ReleasePlaces(shard, *s, released);
  *link = s->next;
  Destroy(s, released);
  --shard.sessions;
  if (shard.buckets.size() > kMinBuckets && shard.sessions * 4 < shard.buckets.size()) {
    Rehash(shard, shard.buckets.size() / 2);
  }
}

void StateStore::Replace(Shard&, Session** link, Session* fresh, Released& released) {
  Session* old = *link;
  Charge(CostOf(*old), -1);
  Charge(CostOf(*fresh), 1);
  fresh->next = old->next;
  *link = fresh;
  Destroy(old, released);
}

StateStore::Session* StateStore::Build(SmallChunks& chunks, std::string_view sid,
                                       std::vector<Draft>& drafts) {
  size_t large = 0, small = 0;
  for (const Draft& d : drafts) {
    large += d.kind == Draft::Kind::kLarge;
    small += d.kind == Draft::Kind::kSmall ? d.length : 0;
  }
  const size_t slots_at = Session::SlotsAt(sid.size());
  const size_t buffers_at = slots_at + sizeof(Slot) * drafts.size();
  const size_t small_at = buffers_at + sizeof(Bytes) * large;
  void* chunk = AllocateStoreChunk(chunks, small_at + small);
  auto* s = new (chunk)
      Session{nullptr, static_cast<uint32_t>(sid.size()), static_cast<uint32_t>(drafts.size())};
  if (!sid.empty()) std::memcpy(s->base() + 16, sid.data(), sid.size());
  size_t next_buffer = buffers_at, next_small = small_at;
  Slot* slot = s->slots();
  for (Draft& d : drafts) {
    uint32_t data = 0;
    if (d.kind == Draft::Kind::kLarge) {
      new (s->base() + next_buffer) Bytes(std::move(d.buffer));
      data = static_cast<uint32_t>(next_buffer);
      next_buffer += sizeof(Bytes);
    } else if (d.kind == Draft::Kind::kSmall) {
      if (d.length != 0) std::memcpy(s->base() + next_small, d.bytes, d.length);
      data = static_cast<uint32_t>(next_small);
      next_small += d.length;
    }
    *slot++ = Slot{d.layer, data, d.length, d.place};
  }
  return s;
}

std::vector<StateStore::Draft> StateStore::Drafts(const Session& session) {
  std::vector<Draft> drafts(session.count);
  size_t i = 0;
  for (const Slot& s : session) {
    Draft& d = drafts[i++];
    d.layer = s.layer;
    d.length = s.length;
    d.place = s.place;
    if (Session::Large(s)) {
      d.kind = Draft::Kind::kLarge;
      d.buffer = session.Buffer(s);
    } else if (Session::Small(s)) {
      d.kind = Draft::Kind::kSmall;
      d.bytes = session.Inline(s);
    }
  }
  return drafts;
}

void StateStore::Destroy(Session* session, Released& released) {
  const size_t request = session->RequestBytes();
  for (const Slot& s : *session) {
    if (!Session::Large(s)) continue;
    Bytes& buffer = session->Buffer(s);
    released.values.push_back(std::move(buffer));
    buffer.~Bytes();
  }
  session->~Session();
  FreeStoreChunk(session, request);
}

uint32_t StateStore::AcquireFile(Shard& shard, const std::shared_ptr<const ColdFile>& file) {
  std::vector<FileRef>& files = shard.files;
  size_t at = shard.last_file;
  if (at >= files.size() || files[at].file != file) {
    at =
        std::find_if(files.begin(), files.end(), [&](const FileRef& f) { return f.file == file; }) -
        files.begin();
  }
  if (at == files.size()) {
    at = std::find_if(files.begin(), files.end(),
                      [](const FileRef& f) { return f.file == nullptr; }) -
         files.begin();
    if (at == files.size()) {
      if (files.size() == kMaxFiles) return 0;
      files.emplace_back();
    }
    files[at].file = file;
  }
  files[at].layers += 1;
  shard.last_file = at;
  return static_cast<uint32_t>(at + 1);
}

void StateStore::ReleaseFile(Shard& shard, uint32_t index, Released& released) {
  if (index == 0) return;
  FileRef& ref = shard.files[index - 1];
  if (--ref.layers == 0) released.files.push_back(std::move(ref.file));
}

void StateStore::ReleasePlaces(Shard& shard, const Session& session, Released& released) {
  for (const Slot& s : session) ReleaseFile(shard, FileIndexOf(s.place), released);
}

const std::shared_ptr<const ColdFile>& StateStore::FileOf(const Shard& shard, uint64_t place) {
  static const std::shared_ptr<const ColdFile> none;
  return Placed(place) ? shard.files[FileIndexOf(place) - 1].file : none;
}

StateStore::Cost StateStore::CostOf(const Slot& slot, const Session& session) {
  Cost c;
  c.entries = 1;
  if (!Session::Hot(slot)) {
    c.cold_layers = 1;
    c.cold_bytes = static_cast<int64_t>(slot.length);
    return c;
  }
  c.payload = static_cast<int64_t>(slot.length);
  // A small value's bytes are in the chunk, counted below; a large one's buffer has its slack.
  if (Session::Large(slot)) {
    const Bytes& b = session.Buffer(slot);
    c.overhead = static_cast<int64_t>(b.capacity() - b.size());
  }
  return c;
}

StateStore::Cost StateStore::CostOf(const Session& session) {
  Cost c;
  c.sessions = 1;
  // The chunk and the bucket slot are bookkeeping, but for the small values' own bytes in it.
  c.overhead = static_cast<int64_t>(session.ChunkBytes()) + kBucketBytes;
  for (const Slot& s : session) {
    const Cost layer = CostOf(s, session);
    c.entries += layer.entries;
    c.payload += layer.payload;
    c.overhead += layer.overhead - (Session::Small(s) ? static_cast<int64_t>(s.length) : 0);
    c.cold_layers += layer.cold_layers;
    c.cold_bytes += layer.cold_bytes;
  }
  return c;
}

void StateStore::Charge(const Cost& c, int64_t sign) {
  if (c.sessions != 0) sessions_ += sign * c.sessions;
  entries_ += sign * c.entries;
  payload_bytes_ += sign * c.payload;
  overhead_bytes_ += sign * c.overhead;
  if (c.cold_layers != 0) {
    cold_layers_ += sign * c.cold_layers;
    cold_bytes_ += sign * c.cold_bytes;
  }
}

void StateStore::Put(std::string_view sid, uint32_t layer, Bytes value, const Hook& under_lock) {
  std::vector<std::pair<uint32_t, Bytes>> one;
  one.emplace_back(layer, std::move(value));
  PutMany(sid, std::move(one), under_lock);
}

// Compact sessions (their keyspace entries hold them) ------------------------------------------

namespace cs = compact_session;
using SessionHome = Keyspace::SessionHome;
using SessionChange = Keyspace::SessionChange;

bool StateStore::ReadCompact(std::string_view sid,
                             const std::function<void(std::string_view)>& read) const {
  return keys_ != nullptr && keys_->ReadCompactSession(sid, read);
}

void StateStore::PutMany(std::string_view sid, std::vector<std::pair<uint32_t, Bytes>> layers,
                         const Hook& under_lock) {
  if (keys_ == nullptr) return PutManyHere(sid, std::move(layers), under_lock);
  keys_->EditSession(sid, [&](SessionHome home, std::string_view value, std::string& written) {
    if (home == SessionHome::kElsewhere) {
      PutManyHere(sid, std::move(layers), under_lock);
      return SessionChange::kKeep;
    }
    if (auto merged = cs::Merge(value, layers); merged && !merged->empty()) {
      if (under_lock) under_lock();
      written = std::move(*merged);
      return SessionChange::kWrite;
    }
    if (home == SessionHome::kMissing) {
      PutManyHere(sid, std::move(layers), under_lock);
      return SessionChange::kKeep;
    }
    // Too large to stay compact: its layers move here with the new ones, which win.
    std::vector<std::pair<uint32_t, Bytes>> all = cs::Decode(value);
    for (auto& layer : layers) all.push_back(std::move(layer));
    PutManyHere(sid, std::move(all), under_lock);
    return SessionChange::kUncompact;
  });
}

void StateStore::Uncompact(std::string_view sid) {
  if (keys_ == nullptr) return;
  keys_->EditSession(sid, [&](SessionHome home, std::string_view value, std::string&) {
    if (home != SessionHome::kCompact) return SessionChange::kKeep;
    PutManyHere(sid, cs::Decode(value), {});
    return SessionChange::kUncompact;
  });
}

size_t StateStore::Drop(std::string_view sid, uint32_t layer, const Hook& under_lock) {
  if (keys_ == nullptr) return DropHere(sid, layer, under_lock);
  size_t dropped = 0;
  keys_->EditSession(sid, [&](SessionHome home, std::string_view value, std::string& written) {
    if (home != SessionHome::kCompact) {
      dropped = DropHere(sid, layer, under_lock);
      return SessionChange::kKeep;
    }
    if (under_lock) under_lock();
    bool removed = false;
    written = cs::Without(value, layer, removed);
    if (!removed) return SessionChange::kKeep;
    dropped = 1;
    return written.empty() ? SessionChange::kDelete : SessionChange::kWrite;
  });
  return dropped;
}

size_t StateStore::DropSession(std::string_view sid, const Hook& under_lock) {
  if (keys_ == nullptr) return DropSessionHere(sid, under_lock);
  size_t dropped = 0;
  keys_->EditSession(sid, [&](SessionHome home, std::string_view value, std::string&) {
    if (home != SessionHome::kCompact) {
      dropped = DropSessionHere(sid, under_lock);
      return SessionChange::kKeep;
    }
    if (under_lock) under_lock();
    dropped = cs::LayerCount(value);
    return SessionChange::kDelete;
  });
  return dropped;
}

std::optional<FetchedLayer> StateStore::FetchRange(std::string_view sid, uint32_t layer,
                                                   uint64_t offset, uint64_t length,
                                                   uint64_t stream_from) const {
  std::optional<FetchedLayer> found;
  const bool compact = ReadCompact(sid, [&](std::string_view value) {
    const auto bytes = cs::FindLayer(value, layer);
    if (!bytes) return;
    const uint64_t from = std::min<uint64_t>(offset, bytes->size());
    const uint64_t n = std::min<uint64_t>(length, bytes->size() - from);
    found = FetchedLayer{Bytes::CopyCompact(bytes->substr(from, n)), {}};
  });
  if (compact) return found;
  return FetchRangeHere(sid, layer, offset, length, stream_from);
}

std::vector<std::optional<FetchedLayer>> StateStore::FetchMany(std::string_view sid,
                                                               std::span<const uint32_t> layers,
                                                               uint64_t stream_from) const {
  std::vector<std::optional<FetchedLayer>> out(layers.size());
  const bool compact = ReadCompact(sid, [&](std::string_view value) {
    for (size_t i = 0; i < layers.size(); ++i) {
      if (auto bytes = cs::FindLayer(value, layers[i])) {
        out[i] = FetchedLayer{Bytes::CopyCompact(*bytes), {}};
      }
    }
  });
  if (compact) return out;
  return FetchManyHere(sid, layers, stream_from);
}

void StateStore::PutManyHere(std::string_view sid, std::vector<std::pair<uint32_t, Bytes>> layers,
                             const Hook& under_lock) {
  auto [shard, hash] = Locate(sid);
  // Old values are released after the lock is dropped: freeing a large buffer takes time.
  Released released;
  std::lock_guard lock(shard.mu);
  if (under_lock) under_lock();
  Session** link = LinkOf(shard, hash, sid);
  Session* session = *link;
  // Every value replaces one of its own kind and size: written in place.
  const auto fits = [&](uint32_t layer, const Bytes& value) {
    const Slot* s = session->Find(layer);
    if (s == nullptr) return false;
    return value.size() > kInlineValueMax ? Session::Large(*s)
                                          : Session::Small(*s) && s->length == value.size();
  };
  if (session != nullptr && std::all_of(layers.begin(), layers.end(),
                                        [&](const auto& l) { return fits(l.first, l.second); })) {
    for (auto& [layer, value] : layers) {
      Slot& s = *session->Find(layer);
      Charge(CostOf(s, *session), -1);
      ReleaseFile(shard, FileIndexOf(s.place), released);
      if (Session::Large(s)) {
        released.values.push_back(std::exchange(session->Buffer(s), std::move(value)));
        s.length = session->Buffer(s).size();
        s.place = 0;
      } else {
        if (s.length != 0) std::memcpy(session->Inline(s), value.data(), s.length);
        s.place = TagOf(value.data());
      }
      Charge(CostOf(s, *session), 1);
    }
    return;
  }
  std::vector<Draft> drafts;
  if (session != nullptr) drafts = Drafts(*session);
  for (const auto& [layer, value] : layers) {
    SetDraft(shard, drafts, Draft::Of(layer, value), released);
  }
  Install(shard, hash, link, session, sid, drafts, released);
}

void StateStore::SetDraft(Shard& shard, std::vector<Draft>& drafts, Draft draft,
                          Released& released) {
  auto it = std::lower_bound(drafts.begin(), drafts.end(), draft.layer,
                             [](const Draft& d, uint32_t l) { return d.layer < l; });
  if (it != drafts.end() && it->layer == draft.layer) {
    // The old value's place goes with it (a value given twice in one call has none yet).
    ReleaseFile(shard, FileIndexOf(it->place), released);
    *it = std::move(draft);
  } else {
    drafts.insert(it, std::move(draft));
  }
}

void StateStore::Install(Shard& shard, uint64_t hash, Session** link, const Session* session,
                         std::string_view sid, std::vector<Draft>& drafts, Released& released) {
  Session* fresh = Build(shard.chunks, sid, drafts);
  if (session == nullptr) {
    LinkNew(shard, hash, fresh);
    Charge(CostOf(*fresh), 1);
  } else {
    Replace(shard, link, fresh, released);
  }
}

void StateStore::PutCold(std::string_view sid, uint32_t layer, uint64_t length,
                         std::shared_ptr<const ColdFile> file, uint64_t offset,
                         const Hook& under_lock) {
  // A snapshot may hold a session twice: compact, and then (having grown while the snapshot was
  // written) from this store, cold. The later one joins the earlier here, not beside it.
  Uncompact(sid);
  auto [shard, hash] = Locate(sid);
  Released released;
  std::lock_guard lock(shard.mu);
  // Refused before the hook, so nothing is logged for it.
  const uint32_t index = offset <= kOffsetMask ? AcquireFile(shard, file) : 0;
  if (index == 0) {
    throw std::length_error("a cold layer's place does not fit the store's table of files");
  }
  if (under_lock) under_lock();
  Session** link = LinkOf(shard, hash, sid);
  Session* session = *link;
  std::vector<Draft> drafts;
  if (session != nullptr) drafts = Drafts(*session);
  Draft cold;
  cold.layer = layer;
  cold.length = length;
  cold.place = uint64_t{index} << kOffsetBits | offset;
  SetDraft(shard, drafts, std::move(cold), released);
  Install(shard, hash, link, session, sid, drafts, released);
}

StateStore::Pending StateStore::PendingOf(const Shard& shard, const Session& session,
                                          const Slot& slot) {
  if (Session::Hot(slot)) return Pending{session.Value(slot), nullptr, 0, slot.length, false};
  return Pending{Bytes(), FileOf(shard, slot.place), OffsetOf(slot.place), slot.length, true};
}

Bytes StateStore::Resolve(const Pending& p, uint64_t from, uint64_t length) const {
  from = std::min(from, p.length);
  length = std::min(length, p.length - from);
  if (!p.cold) return from == 0 && length == p.length ? p.value : p.value.Slice(from, length);
  Bytes out;
  std::string error;
  if (!p.file->Read(p.offset + from, length, out, error)) {
    throw std::runtime_error("reading a stored value from disk failed: " + error);
  }
  cold_bytes_read_.fetch_add(length, std::memory_order_relaxed);
  return out;
}

FetchedLayer StateStore::ResolveOrStream(const Pending& p, uint64_t from, uint64_t length,
                                         uint64_t stream_from) const {
  from = std::min(from, p.length);
  length = std::min(length, p.length - from);
  if (!p.cold || length < stream_from) return FetchedLayer{Resolve(p, from, length), {}};
  cold_bytes_read_.fetch_add(length, std::memory_order_relaxed);
  return FetchedLayer{Bytes(), ColdExtent{p.file, p.offset + from, length}};
}

std::optional<Bytes> StateStore::Get(std::string_view sid, uint32_t layer) const {
  return GetRange(sid, layer, 0, ColdFile::kAllDurable);
}

std::optional<Bytes> StateStore::GetRange(std::string_view sid, uint32_t layer, uint64_t offset,
                                          uint64_t length) const {
  auto fetched = FetchRange(sid, layer, offset, length, kNeverStreamed);
  if (!fetched) return std::nullopt;
  return std::move(fetched->value);
}

std::optional<FetchedLayer> StateStore::FetchRangeHere(std::string_view sid, uint32_t layer,
                                                       uint64_t offset, uint64_t length,
                                                       uint64_t stream_from) const {
  Pending found;
  {
    auto [shard, hash] = Locate(sid);
    std::lock_guard lock(shard.mu);
    const Session* session = FindSession(shard, hash, sid);
    if (session == nullptr) return std::nullopt;
    const Slot* slot = session->Find(layer);
    if (slot == nullptr) return std::nullopt;
    if (Session::Small(*slot)) {
      // Only the asked bytes of a small value are copied out.
      const uint64_t from = std::min(offset, slot->length);
      const uint64_t n = std::min(length, slot->length - from);
      return FetchedLayer{
          Bytes::CopyCompact({reinterpret_cast<const char*>(session->Inline(*slot)) + from, n}),
          {}};
    }
    found = PendingOf(shard, *session, *slot);
  }
  if (found.cold) cold_reads_.fetch_add(1, std::memory_order_relaxed);
  return ResolveOrStream(found, offset, length, stream_from);
}

std::vector<std::optional<Bytes>> StateStore::GetMany(std::string_view sid,
                                                      std::span<const uint32_t> layers) const {
  auto fetched = FetchMany(sid, layers, kNeverStreamed);
  std::vector<std::optional<Bytes>> out(fetched.size());
  for (size_t i = 0; i < fetched.size(); ++i) {
    if (fetched[i]) out[i] = std::move(fetched[i]->value);
  }
  return out;
}

std::vector<std::optional<FetchedLayer>> StateStore::FetchManyHere(std::string_view sid,
                                                                   std::span<const uint32_t> layers,
                                                                   uint64_t stream_from) const {
  std::vector<std::optional<Pending>> found(layers.size());
  {
    auto [shard, hash] = Locate(sid);
    std::lock_guard lock(shard.mu);
    const Session* session = FindSession(shard, hash, sid);
    if (session == nullptr) return std::vector<std::optional<FetchedLayer>>(layers.size());
    for (size_t i = 0; i < layers.size(); ++i) {
      const Slot* slot = session->Find(layers[i]);
      if (slot != nullptr) found[i] = PendingOf(shard, *session, *slot);
    }
  }
  // Cold references copied under the lock point at immutable file bytes, so reading them now
  // (or while the reply is sent) still gives the session as it was at that instant: whole,
  // never a mix.
  std::vector<std::optional<FetchedLayer>> out(layers.size());
  std::vector<size_t> cold;
  bool any_cold = false;
  for (size_t i = 0; i < found.size(); ++i) {
    if (!found[i]) continue;
    any_cold |= found[i]->cold;
    if (found[i]->cold && found[i]->length < stream_from) {
      cold.push_back(i);
    } else {
      out[i] = ResolveOrStream(*found[i], 0, found[i]->length, stream_from);
    }
  }
  if (any_cold) cold_reads_.fetch_add(1, std::memory_order_relaxed);
  if (cold.empty()) return out;
  // Layers stored by one MSTORE sit back to back in one record (12 bytes apart): one read of
  // the run serves them all, and a larger request keeps more of the disk busy.
  std::sort(cold.begin(), cold.end(), [&](size_t a, size_t b) {
    return std::pair(found[a]->file.get(), found[a]->offset) <
           std::pair(found[b]->file.get(), found[b]->offset);
  });
  constexpr uint64_t kMaxGap = 4096;
  for (size_t first = 0; first < cold.size();) {
    const Pending& head = *found[cold[first]];
    uint64_t end = head.offset + head.length;
    size_t last = first + 1;
    while (last < cold.size()) {
      const Pending& next = *found[cold[last]];
      if (next.file != head.file || next.offset < end || next.offset - end > kMaxGap) break;
      end = next.offset + next.length;
      ++last;
    }
    if (last - first == 1) {
      out[cold[first]] = FetchedLayer{Resolve(head, 0, head.length), {}};
    } else {
      const Bytes run = Resolve(Pending{Bytes(), head.file, head.offset, end - head.offset, true},
                                0, end - head.offset);
      for (size_t k = first; k < last; ++k) {
        const Pending& p = *found[cold[k]];
        out[cold[k]] = FetchedLayer{run.Slice(p.offset - head.offset, p.length), {}};
      }
    }
    first = last;
  }
  return out;
}

void StateStore::Place(std::string_view sid, uint32_t layer, const uint8_t* data,
                       std::shared_ptr<const ColdFile> file, uint64_t offset) {
  auto [shard, hash] = Locate(sid);
  Released released;
  std::lock_guard lock(shard.mu);
  Session* session = FindSession(shard, hash, sid);
  Slot* s = session == nullptr ? nullptr : session->Find(layer);
  if (s == nullptr || !Session::Hot(*s) || offset > kOffsetMask) return;
  // The caller still holds the buffer at `data`, so no other value can sit at that address: a
  // large value is named by its own buffer, a small one (until placed) by the buffer it was
  // copied from. An empty value sits at any place.
  bool same = true;
  if (Session::Large(*s)) {
    same = session->Buffer(*s).data() == data;
  } else if (s->length != 0) {
    same = !Placed(s->place) && s->place != 0 && s->place == TagOf(data);
  }
  if (!same) return;
  const uint32_t index = AcquireFile(shard, file);
  if (index == 0) return;  // the shard's table of files is full: the layer stays unplaced
  ReleaseFile(shard, FileIndexOf(s->place), released);
  s->place = uint64_t{index} << kOffsetBits | offset;
}

void StateStore::Repoint(std::string_view sid, uint32_t layer, const ColdFile* old_file,
                         uint64_t old_offset, std::shared_ptr<const ColdFile> file,
                         uint64_t offset) {
  auto [shard, hash] = Locate(sid);
  Released released;
  std::lock_guard lock(shard.mu);
  Session* session = FindSession(shard, hash, sid);
  Slot* s = session == nullptr ? nullptr : session->Find(layer);
  // A place holds one value (hot or cold): the caller holds `old_file` open, so no other file
  // can sit at that address, and a rewritten layer has another place or none.
  if (s == nullptr || !Placed(s->place) || FileOf(shard, s->place).get() != old_file ||
      OffsetOf(s->place) != old_offset || offset > kOffsetMask) {
    return;
  }
  const uint32_t index = AcquireFile(shard, file);
  if (index == 0) return;  // a full table: the old place stays (its file is held open)
  ReleaseFile(shard, FileIndexOf(s->place), released);
  s->place = uint64_t{index} << kOffsetBits | offset;
}

ColdOutcome StateStore::MakeCold(std::string_view sid, bool keep_unplaced_small) {
  auto [shard, hash] = Locate(sid);
  Released released;  // freed after the lock
  ColdOutcome out;
  std::lock_guard lock(shard.mu);
  Session** link = LinkOf(shard, hash, sid);
  if (*link == nullptr) return out;
  Session& session = **link;
  out.existed = true;
  const auto stays = [&](bool small, uint64_t place) {
    return keep_unplaced_small && small && !Placed(place);
  };
  for (const Slot& s : session) {
    if (!Session::Hot(s) || stays(Session::Small(s), s.place)) continue;
    if (!Placed(s.place) || OffsetOf(s.place) + s.length > FileOf(shard, s.place)->durable_end()) {
      return out;
    }
  }
  std::vector<Draft> drafts = Drafts(session);
  for (Draft& d : drafts) {
    if (d.kind == Draft::Kind::kCold || stays(d.kind == Draft::Kind::kSmall, d.place)) continue;
    out.freed += d.length;
    d.kind = Draft::Kind::kCold;
    d.buffer = Bytes();
  }
  Replace(shard, link, Build(shard.chunks, sid, drafts), released);
  out.ok = true;
  return out;
}

uint64_t StateStore::ColdBytes(std::string_view sid) const {
  auto [shard, hash] = Locate(sid);
  std::lock_guard lock(shard.mu);
  const Session* session = FindSession(shard, hash, sid);
  if (session == nullptr) return 0;
  uint64_t total = 0;
  for (const Slot& s : *session) total += Session::Hot(s) ? 0 : s.length;
  return total;
}

bool StateStore::Promote(std::string_view sid) {
  auto [shard, hash] = Locate(sid);
  std::vector<std::pair<uint32_t, Pending>> cold;
  {
    std::lock_guard lock(shard.mu);
    const Session* session = FindSession(shard, hash, sid);
    if (session == nullptr) return false;
    for (const Slot& s : *session) {
      if (!Session::Hot(s)) cold.emplace_back(s.layer, PendingOf(shard, *session, s));
    }
  }
  if (cold.empty()) return true;
  // A fetch that promotes reads the cold layers here, not in its own read: it counts as one.
  cold_reads_.fetch_add(1, std::memory_order_relaxed);
  std::vector<Bytes> read;
  read.reserve(cold.size());
  for (const auto& [layer, p] : cold) read.push_back(Resolve(p, 0, p.length));
  Released released;
  std::lock_guard lock(shard.mu);
  Session** link = LinkOf(shard, hash, sid);
  if (*link == nullptr) return false;
  std::vector<Draft> drafts = Drafts(**link);
  bool changed = false;
  for (size_t i = 0; i < cold.size(); ++i) {
    auto it = std::lower_bound(drafts.begin(), drafts.end(), cold[i].first,
                               [](const Draft& d, uint32_t l) { return d.layer < l; });
    if (it == drafts.end() || it->layer != cold[i].first) continue;
    // Only the reference that was read: a layer rewritten or moved meanwhile keeps its state.
    if (it->kind != Draft::Kind::kCold || FileOf(shard, it->place) != cold[i].second.file ||
        OffsetOf(it->place) != cold[i].second.offset) {
      continue;
    }
    const uint64_t place = it->place;  // a promoted layer keeps its place
    *it = Draft::Of(it->layer, read[i]);
    it->place = place;
    changed = true;
  }
  if (changed) Replace(shard, link, Build(shard.chunks, sid, drafts), released);
  for (const Slot& s : **link) {
    if (!Session::Hot(s)) return false;
  }
  promotions_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

size_t StateStore::DropHere(std::string_view sid, uint32_t layer, const Hook& under_lock) {
  auto [shard, hash] = Locate(sid);
  Released released;
  std::lock_guard lock(shard.mu);
  if (under_lock) under_lock();
  Session** link = LinkOf(shard, hash, sid);
  if (*link == nullptr) return 0;
  Session& session = **link;
  const Slot* s = session.Find(layer);
  if (s == nullptr) return 0;
  if (session.count == 1) {
    Erase(shard, link, released);
    return 1;
  }
  ReleaseFile(shard, FileIndexOf(s->place), released);
  std::vector<Draft> drafts = Drafts(session);
  drafts.erase(drafts.begin() + (s - session.begin()));
  Replace(shard, link, Build(shard.chunks, sid, drafts), released);
  return 1;
}

size_t StateStore::DropSessionHere(std::string_view sid, const Hook& under_lock) {
  auto [shard, hash] = Locate(sid);
  Released released;
  std::lock_guard lock(shard.mu);
  if (under_lock) under_lock();
  Session** link = LinkOf(shard, hash, sid);
  if (*link == nullptr) return 0;
  const size_t count = (*link)->count;
  Erase(shard, link, released);
  return count;
}

void StateStore::Clear() {
  for (size_t i = 0; i < shard_count_; ++i) {
    Shard& shard = shards_[i];
    Released released;  // freed after the lock
    std::lock_guard lock(shard.mu);
    for (Session* head : shard.buckets) {
      while (head != nullptr) {
        Session* s = std::exchange(head, head->next);
        Charge(CostOf(*s), -1);
        Destroy(s, released);
      }
    }
    for (FileRef& f : shard.files) released.files.push_back(std::move(f.file));
    shard.files.clear();
    shard.buckets.clear();
    shard.buckets.shrink_to_fit();
    shard.chunks.Trim();
    shard.sessions = 0;
    shard.last_file = 0;
  }
}

std::vector<LayerPlace> StateStore::PlacesOf(const Shard& shard, Session& session, bool retag) {
  std::vector<LayerPlace> layers;
  layers.reserve(session.count);
  for (Slot& s : session) {
    LayerPlace p{s.layer,           Bytes(),  FileOf(shard, s.place),
                 OffsetOf(s.place), s.length, !Session::Hot(s)};
    if (Session::Hot(s)) p.value = session.Value(s);
    if (retag && Session::Small(s) && !Placed(s.place)) s.place = TagOf(p.value.data());
    layers.push_back(std::move(p));
  }
  return layers;
}

std::vector<std::pair<uint32_t, Bytes>> StateStore::Resolved(
    const std::vector<LayerPlace>& places) const {
  std::vector<std::pair<uint32_t, Bytes>> layers;
  layers.reserve(places.size());
  for (const LayerPlace& p : places) {
    layers.emplace_back(p.layer,
                        Resolve(Pending{p.value, p.file, p.offset, p.length, p.cold}, 0, p.length));
  }
  return layers;
}

void StateStore::ForEachPlace(
    bool retag,
    const std::function<void(const std::string&, const std::vector<LayerPlace>&)>& visit) const {
  // Compact sessions first: a session moves from its entry to this store, never back, so one
  // that moves while this runs is visited before the move, after it, or both — never neither
  // (a snapshot that missed it would lose the layers its older records wrote).
  if (keys_ != nullptr) {
    keys_->ForEachCompactSession([&](const std::string& sid, std::string_view value) {
      std::vector<LayerPlace> layers;
      cs::ForEachLayer(value, [&](uint32_t layer, std::string_view bytes) {
        LayerPlace p;
        p.layer = layer;
        p.value = Bytes::CopyCompact(bytes);
        p.length = bytes.size();
        layers.push_back(std::move(p));
      });
      visit(sid, layers);
    });
  }
  std::vector<std::pair<std::string, std::vector<LayerPlace>>> copied;
  for (size_t i = 0; i < shard_count_; ++i) {
    copied.clear();
    {
      Shard& shard = shards_[i];
      std::lock_guard lock(shard.mu);
      copied.reserve(shard.sessions);
      for (Session* s : shard.buckets) {
        for (; s != nullptr; s = s->next) {
          copied.emplace_back(std::string(s->sid()), PlacesOf(shard, *s, retag));
        }
      }
    }
    for (const auto& [sid, layers] : copied) visit(sid, layers);
  }
}

void StateStore::ForEachSessionPlace(
    const std::function<void(const std::string&, const std::vector<LayerPlace>&)>& visit) const {
  // The snapshot: it places each small unplaced value by the copy it writes, once durable.
  ForEachPlace(true, visit);
}

void StateStore::ForEachSession(
    const std::function<void(const std::string&, const std::vector<std::pair<uint32_t, Bytes>>&)>&
        visit) const {
  ForEachPlace(false, [&](const std::string& sid, const std::vector<LayerPlace>& places) {
    visit(sid, Resolved(places));
  });
}

std::optional<std::vector<std::pair<uint32_t, Bytes>>> StateStore::ReadSession(
    std::string_view sid) const {
  std::vector<std::pair<uint32_t, Bytes>> compact;
  if (ReadCompact(sid, [&](std::string_view value) { compact = cs::Decode(value); })) {
    return compact;
  }
  std::vector<LayerPlace> places;
  {
    auto [shard, hash] = Locate(sid);
    std::lock_guard lock(shard.mu);
    Session* session = FindSession(shard, hash, sid);
    if (session == nullptr) return std::nullopt;
    places = PlacesOf(shard, *session, false);
  }
  return Resolved(places);
}

std::vector<LayerSize> StateStore::Layers(std::string_view sid) const {
  std::vector<LayerSize> out;
  const bool compact = ReadCompact(sid, [&](std::string_view value) {
    cs::ForEachLayer(value, [&](uint32_t layer, std::string_view bytes) {
      out.push_back({layer, bytes.size()});
    });
  });
  if (compact) return out;
  auto [shard, hash] = Locate(sid);
  std::lock_guard lock(shard.mu);
  const Session* session = FindSession(shard, hash, sid);
  if (session == nullptr) return out;
  out.reserve(session->count);
  for (const Slot& s : *session) out.push_back({s.layer, s.length});
  return out;
}

bool StateStore::Contains(std::string_view sid) const {
  auto [shard, hash] = Locate(sid);
  std::lock_guard lock(shard.mu);
  return FindSession(shard, hash, sid) != nullptr;
}

uint64_t StateStore::SessionBytes(std::string_view sid) const {
  auto [shard, hash] = Locate(sid);
  std::lock_guard lock(shard.mu);
  const Session* session = FindSession(shard, hash, sid);
  if (session == nullptr) return 0;
  uint64_t total = session->ChunkBytes() + kBucketBytes;
  for (const Slot& s : *session) total += Session::Large(s) ? session->Buffer(s).capacity() : 0;
  return total;
}

StoreStats StateStore::Stats() const {
  StoreStats s;
  s.sessions = static_cast<uint64_t>(sessions_.load());
  s.entries = static_cast<uint64_t>(entries_.load());
  s.payload_bytes = static_cast<uint64_t>(payload_bytes_.load());
  s.overhead_bytes = static_cast<uint64_t>(overhead_bytes_.load());
  s.cold_layers = static_cast<uint64_t>(cold_layers_.load());
  s.cold_bytes = static_cast<uint64_t>(cold_bytes_.load());
  s.cold_reads = cold_reads_.load();
  s.cold_bytes_read = cold_bytes_read_.load();
  s.promotions = promotions_.load();
  if (keys_ != nullptr) {
    const Keyspace::CompactSessionStats compact = keys_->CompactSessions();
    s.sessions += compact.sessions;
    s.entries += compact.layers;
    s.payload_bytes += compact.bytes;
    s.compact_bytes = compact.bytes;
  }
  return s;
}

}  // namespace prefixd::store
