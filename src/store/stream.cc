#include "store/stream.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "store/members.h"

namespace prefixd::store {
namespace {

constexpr size_t kHeaderBytes = 80;
constexpr size_t kGroupsAtOffset = 64;
constexpr size_t kEndOffset = 72;
// From this size on a value is held in its own buffer (KeyEntry::kInlineValueBelow) with room
// to grow: appends then write into the room instead of copying the stream.
constexpr size_t kRoomFrom = 16 * 1024;
constexpr size_t kEntryHead = 20;  // ms 8 | seq 8 | body length 4

// One append of the little-endian bytes (a byte at a time, push_back was most of encoding a
// group's pending entries).
void Put64(std::string& out, uint64_t v) {
  char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(v >> (8 * i));
  out.append(bytes, 8);
}
void Put32(std::string& out, uint32_t v) {
  char bytes[4];
  for (int i = 0; i < 4; ++i) bytes[i] = static_cast<char>(v >> (8 * i));
  out.append(bytes, 4);
}
void PutString(std::string& out, std::string_view s) {
  Put32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}
void PutId(std::string& out, StreamId id) {
  Put64(out, id.ms);
  Put64(out, id.seq);
}
// One load where the machine is little-endian (GCC does not merge the byte loop into one).
uint64_t Get64(const char* p) {
  uint64_t v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&v, p, sizeof v);
  } else {
    for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  }
  return v;
}
uint32_t Get32(const char* p) {
  uint32_t v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&v, p, sizeof v);
  } else {
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  }
  return v;
}

// The seek index (stream.h): at `end` in a value with room, `magic 4 | stride 4 | slots 8`, then
// per slot the byte offset of entry slot × kSeekStride. Every writer of a value with room keeps it
// there (Assemble writes it, the in-place edits move it); a value without room has none.
constexpr uint32_t kSeekMagic = 0x31584953;  // "SIX1"
constexpr uint64_t kSeekStride = 64;
constexpr size_t kSeekHead = 16;
constexpr size_t kLengthOffset = 56;

uint64_t SeekSlotsFor(uint64_t length) { return (length + kSeekStride - 1) / kSeekStride; }

// Reads fields off the front of a byte string; any read past the end sets `bad`.
struct Cursor {
  std::string_view rest;
  bool bad = false;
  bool Take(size_t n, std::string_view& out) {
    if (bad || rest.size() < n) return !(bad = true);
    out = rest.substr(0, n);
    rest.remove_prefix(n);
    return true;
  }
  uint64_t U64() {
    std::string_view s;
    return Take(8, s) ? Get64(s.data()) : 0;
  }
  uint32_t U32() {
    std::string_view s;
    return Take(4, s) ? Get32(s.data()) : 0;
  }
  StreamId Id() {
    const uint64_t ms = U64();
    return {ms, U64()};
  }
  std::string Str() {
    const uint32_t n = U32();
    std::string_view s;
    return Take(n, s) ? std::string(s) : std::string();
  }
};

void PutMeta(std::string& out, const StreamMeta& m, uint64_t groups_at, uint64_t end) {
  PutId(out, m.last);
  PutId(out, m.max_deleted);
  PutId(out, m.first);
  Put64(out, m.entries_added);
  Put64(out, m.length);
  Put64(out, groups_at);
  Put64(out, end);
}
void Write64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// A value's seek index, read where the header says it sits (`end`); absent when the value has no
// room or the bytes there are not an index for `length` entries.
struct SeekIndex {
  const char* slots = nullptr;
  uint64_t count = 0;
  uint64_t At(uint64_t slot) const { return Get64(slots + 8 * slot); }
  size_t Size() const { return kSeekHead + 8 * count; }
};
std::optional<SeekIndex> FindSeekIndex(std::string_view value, uint64_t end, uint64_t length) {
  if (end > value.size() || value.size() - end < kSeekHead) return std::nullopt;
  const char* at = value.data() + end;
  const uint64_t slots = Get64(at + 8);
  if (Get32(at) != kSeekMagic || Get32(at + 4) != kSeekStride || slots != SeekSlotsFor(length) ||
      (value.size() - end - kSeekHead) / 8 < slots) {
    return std::nullopt;
  }
  return SeekIndex{at + kSeekHead, slots};
}
size_t SeekIndexBytes(uint64_t length) { return kSeekHead + 8 * SeekSlotsFor(length); }

// Writes the seek index of the `length` entries from kHeaderBytes to `groups_at` in `data` at
// `end` (room for SeekIndexBytes(length) there); entries that do not add up to `length` (a damaged
// value) get a mark that is no index instead.
void WriteSeekIndex(uint8_t* data, uint64_t groups_at, uint64_t end, uint64_t length) {
  uint8_t* at = data + end;
  Write64(at, 0);
  uint64_t offset = kHeaderBytes;
  for (uint64_t i = 0; i < length; ++i) {
    if (offset > groups_at || groups_at - offset < kEntryHead) return;
    if (i % kSeekStride == 0) Write64(at + kSeekHead + 8 * (i / kSeekStride), offset);
    offset += kEntryHead + Get32(reinterpret_cast<const char*>(data) + offset + 16);
  }
  if (offset != groups_at) return;
  Write64(at, uint64_t{kSeekStride} << 32 | kSeekMagic);
  Write64(at + 8, SeekSlotsFor(length));
}

// `used` bytes of a value (its header's `end`) in a buffer with room for appends (half as much
// again) and its seek index.
Bytes WithRoom(std::string_view used, uint64_t groups_at, uint64_t length) {
  const size_t index_bytes = SeekIndexBytes(length);
  Bytes value = Bytes::Allocate(used.size() + std::max(used.size() / 2, 2 * index_bytes));
  std::memcpy(value.mutable_data(), used.data(), used.size());
  WriteSeekIndex(value.mutable_data(), groups_at, used.size(), length);
  return value;
}

// A value from its parts: the header from `meta` (first id and length from the entries).
Bytes Assemble(StreamMeta meta, const std::vector<std::string_view>& entry_runs, size_t count,
               StreamId first, std::string_view groups) {
  size_t entry_bytes = 0;
  for (std::string_view run : entry_runs) entry_bytes += run.size();
  meta.length = count;
  meta.first = count == 0 ? StreamId{} : first;
  std::string out;
  out.reserve(kHeaderBytes + entry_bytes + groups.size());
  PutMeta(out, meta, kHeaderBytes + entry_bytes, kHeaderBytes + entry_bytes + groups.size());
  for (std::string_view run : entry_runs) out.append(run);
  out.append(groups);
  if (out.size() < kRoomFrom) return Bytes::CopyCompact(out);
  return WithRoom(out, kHeaderBytes + entry_bytes, count);
}

// The entries' bytes of a reader's value, from entry `from` on.
std::string_view EntryRun(std::string_view value, const StreamReader& r, size_t from) {
  const size_t end = static_cast<size_t>(r.groups_bytes().data() - value.data());
  if (from >= r.entries().size()) return {};
  const size_t start =
      static_cast<size_t>(r.entries()[from].body.data() - value.data()) - kEntryHead;
  return value.substr(start, end - start);
}

StreamReader OpenOrEmpty(std::string_view value, Bytes& holder) {
  if (value.empty()) {
    holder = EmptyStream();
    value = holder.view();
  }
  auto r = StreamReader::Open(value);
  if (r) return *r;
  holder = EmptyStream();  // a record's check keeps a damaged value from getting here
  return *StreamReader::Open(holder.view());
}

}  // namespace

std::string StreamId::ToString() const { return std::to_string(ms) + "-" + std::to_string(seq); }

std::vector<std::string> StreamEntryView::Fields() const {
  return DecodeMembers(body).value_or(std::vector<std::string>{});
}

std::optional<StreamReader> StreamReader::Open(std::string_view value) {
  if (value.size() < kHeaderBytes) return std::nullopt;
  StreamReader r;
  Cursor c{value};
  r.meta_.last = c.Id();
  r.meta_.max_deleted = c.Id();
  r.meta_.first = c.Id();
  r.meta_.entries_added = c.U64();
  r.meta_.length = c.U64();
  const uint64_t groups_at = c.U64();
  const uint64_t end = c.U64();
  if (groups_at < kHeaderBytes || groups_at > end || end > value.size()) return std::nullopt;
  Cursor entries{value.substr(kHeaderBytes, groups_at - kHeaderBytes)};
  while (!entries.rest.empty() && !entries.bad) {
    StreamEntryView e;
    e.id = entries.Id();
    const uint32_t n = entries.U32();
    if (!entries.Take(n, e.body)) break;
    if (!r.entries_.empty() && !(r.entries_.back().id < e.id)) return std::nullopt;
    r.entries_.push_back(e);
  }
  if (entries.bad || r.entries_.size() != r.meta_.length) return std::nullopt;
  r.groups_ = value.substr(groups_at, end - groups_at);
  return r;
}

std::optional<StreamMeta> ReadStreamMeta(std::string_view value) {
  if (value.size() < kHeaderBytes) return std::nullopt;
  Cursor c{value};
  StreamMeta m;
  m.last = c.Id();
  m.max_deleted = c.Id();
  m.first = c.Id();
  m.entries_added = c.U64();
  m.length = c.U64();
  return m;
}

namespace {

// Calls `take` with each entry of `rest` (whole entries of a value, oldest first) whose id is at
// least `low`, until `take` returns false or an id passes `high`. A head or a body that runs past
// `rest` ends the walk.
template <typename Take>
void WalkEntries(std::string_view rest, StreamId low, StreamId high, Take take) {
  while (rest.size() >= kEntryHead) {
    const StreamId id{Get64(rest.data()), Get64(rest.data() + 8)};
    const uint32_t n = Get32(rest.data() + 16);
    if (rest.size() - kEntryHead < n || id > high) return;
    if (id >= low && !take(StreamEntryView{id, rest.substr(kEntryHead, n)})) return;
    rest.remove_prefix(kEntryHead + n);
  }
}

// StreamEntriesBetween over every entry from the oldest (a value without a seek index).
std::vector<StreamEntryView> EntriesFromOldest(std::string_view entries, StreamId low,
                                               StreamId high, size_t count, bool reverse) {
  std::vector<StreamEntryView> out;
  // Newest first with a count, `out` is a ring of the last `count` entries seen; `oldest` is
  // where the oldest of them sits once it is full.
  size_t oldest = 0;
  WalkEntries(entries, low, high, [&](const StreamEntryView& e) {
    if (count == 0 || out.size() < count) {
      out.push_back(e);
      return reverse || out.size() != count;
    }
    out[oldest] = e;
    if (++oldest == count) oldest = 0;
    return true;
  });
  if (reverse) {
    std::rotate(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(oldest), out.end());
    std::reverse(out.begin(), out.end());
  }
  return out;
}

// The offset of slot `slot`'s entry, checked to hold an entry's head before `groups_at`.
std::optional<uint64_t> SlotOffset(const SeekIndex& index, uint64_t slot, uint64_t groups_at) {
  const uint64_t at = index.At(slot);
  if (at < kHeaderBytes || at > groups_at || groups_at - at < kEntryHead) return std::nullopt;
  return at;
}

// How many slots' entries have ids up to `id` (a binary search: slots are in id order); nullopt
// where a slot points outside the entries.
std::optional<uint64_t> SlotsUpTo(std::string_view value, const SeekIndex& index,
                                  uint64_t groups_at, StreamId id) {
  uint64_t lo = 0, hi = index.count;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    const auto at = SlotOffset(index, mid, groups_at);
    if (!at) return std::nullopt;
    const StreamId slot_id{Get64(value.data() + *at), Get64(value.data() + *at + 8)};
    if (slot_id <= id) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// StreamEntriesBetween through the seek index: nullopt where the index is found inconsistent.
std::optional<std::vector<StreamEntryView>> EntriesBySeek(std::string_view value,
                                                          const SeekIndex& index,
                                                          uint64_t groups_at, StreamId low,
                                                          StreamId high, size_t count,
                                                          bool reverse) {
  std::vector<StreamEntryView> out;
  if (!reverse) {
    // From the last slot at or before `low` (or the first entry): under a stride to step over.
    const auto upto = SlotsUpTo(value, index, groups_at, low);
    if (!upto) return std::nullopt;
    uint64_t from = kHeaderBytes;
    if (*upto > 0) {
      const auto at = SlotOffset(index, *upto - 1, groups_at);
      if (!at) return std::nullopt;
      from = *at;
    }
    WalkEntries(value.substr(from, groups_at - from), low, high, [&](const StreamEntryView& e) {
      out.push_back(e);
      return count == 0 || out.size() < count;
    });
    return out;
  }
  // Newest first: a stride's entries at a time, from the one holding `high` back, each read
  // oldest first and taken newest first.
  const auto upto = SlotsUpTo(value, index, groups_at, high);
  if (!upto) return std::nullopt;
  std::vector<StreamEntryView> block;
  for (uint64_t slot = *upto; slot-- > 0;) {
    const auto begin = SlotOffset(index, slot, groups_at);
    const auto next = slot + 1 < index.count ? SlotOffset(index, slot + 1, groups_at) : groups_at;
    if (!begin || !next || *next < *begin) return std::nullopt;
    block.clear();
    WalkEntries(value.substr(*begin, *next - *begin), low, high, [&](const StreamEntryView& e) {
      block.push_back(e);
      return true;
    });
    for (auto e = block.rbegin(); e != block.rend(); ++e) {
      out.push_back(*e);
      if (count != 0 && out.size() == count) return out;
    }
    // A stride that starts at or below `low` is the last one to read.
    if (StreamId{Get64(value.data() + *begin), Get64(value.data() + *begin + 8)} <= low) break;
  }
  return out;
}

}  // namespace

std::vector<StreamEntryView> StreamEntriesBetween(std::string_view value, StreamId low,
                                                  StreamId high, size_t count, bool reverse) {
  if (value.size() < kHeaderBytes || high < low) return {};
  const uint64_t groups_at = Get64(value.data() + kGroupsAtOffset);
  const uint64_t end = Get64(value.data() + kEndOffset);
  if (groups_at < kHeaderBytes || groups_at > end || end > value.size()) return {};
  if (const auto index = FindSeekIndex(value, end, Get64(value.data() + kLengthOffset))) {
    auto found = EntriesBySeek(value, *index, groups_at, low, high, count, reverse);
    if (found) return std::move(*found);
  }
  return EntriesFromOldest(value.substr(kHeaderBytes, groups_at - kHeaderBytes), low, high, count,
                           reverse);
}

bool StreamHasSeekIndex(std::string_view value) {
  return value.size() >= kHeaderBytes && FindSeekIndex(value, Get64(value.data() + kEndOffset),
                                                       Get64(value.data() + kLengthOffset));
}

std::string_view StreamGroupsBytes(std::string_view value) {
  if (value.size() < kHeaderBytes) return {};
  const uint64_t groups_at = Get64(value.data() + kGroupsAtOffset);
  const uint64_t end = Get64(value.data() + kEndOffset);
  if (groups_at < kHeaderBytes || groups_at > end || end > value.size()) return {};
  return value.substr(groups_at, end - groups_at);
}

StreamGroups StreamReader::Groups() const {
  return DecodeStreamGroups(groups_).value_or(StreamGroups{});
}

size_t StreamReader::LowerBound(StreamId id) const {
  return static_cast<size_t>(
      std::lower_bound(entries_.begin(), entries_.end(), id,
                       [](const StreamEntryView& e, StreamId x) { return e.id < x; }) -
      entries_.begin());
}

Bytes EmptyStream() {
  std::string out;
  PutMeta(out, StreamMeta{}, kHeaderBytes, kHeaderBytes + 4);
  Put32(out, 0);  // no groups
  return Bytes::CopyCompact(out);
}

Bytes EncodeStreamBody(const std::vector<std::string_view>& fields) {
  std::string out;
  for (std::string_view f : fields) PutString(out, f);
  return Bytes::CopyCompact(out);
}

Bytes EncodeStreamEntry(StreamId id, std::string_view body) {
  std::string out;
  PutId(out, id);
  out.append(body);
  return Bytes::CopyCompact(out);
}

namespace {

// Little-endian fields written into a buffer sized beforehand: a pass without `out` counts the
// bytes, a second writes them (appending to a string a field at a time was most of the cost of
// encoding a long pending list).
struct FieldWriter {
  uint8_t* out = nullptr;
  size_t size = 0;
  void Raw(const void* data, size_t n) {
    if (out != nullptr) std::memcpy(out + size, data, n);
    size += n;
  }
  void U64(uint64_t v) {
    uint8_t bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(v >> (8 * i));
    Raw(bytes, 8);
  }
  void U32(uint32_t v) {
    uint8_t bytes[4];
    for (int i = 0; i < 4; ++i) bytes[i] = static_cast<uint8_t>(v >> (8 * i));
    Raw(bytes, 4);
  }
  void Str(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    Raw(s.data(), s.size());
  }
  void Id(StreamId id) {
    U64(id.ms);
    U64(id.seq);
  }
};

void WriteGroups(const StreamGroups& groups, FieldWriter& w) {
  w.U32(static_cast<uint32_t>(groups.size()));
  for (const auto& [name, g] : groups) {
    w.Str(name);
    w.Id(g.last_delivered);
    w.U64(static_cast<uint64_t>(g.entries_read));
    w.U32(static_cast<uint32_t>(g.pending.size()));
    for (const auto& [id, p] : g.pending) {
      w.Id(id);
      w.U64(p.delivery_ms);
      w.U64(p.deliveries);
      w.Str(p.consumer);
    }
    w.U32(static_cast<uint32_t>(g.consumers.size()));
    for (const auto& [cname, c] : g.consumers) {
      w.Str(cname);
      w.U64(c.seen_ms);
    }
  }
}

}  // namespace

Bytes EncodeStreamGroups(const StreamGroups& groups) {
  FieldWriter count;
  WriteGroups(groups, count);
  Bytes out = Bytes::Allocate(count.size);
  FieldWriter write{out.mutable_data()};
  WriteGroups(groups, write);
  return out;
}

std::optional<StreamGroups> DecodeStreamGroups(std::string_view bytes) {
  Cursor c{bytes};
  StreamGroups groups;
  const uint32_t n = c.U32();
  for (uint32_t i = 0; i < n && !c.bad; ++i) {
    std::string name = c.Str();
    StreamGroup g;
    g.last_delivered = c.Id();
    g.entries_read = static_cast<int64_t>(c.U64());
    const uint32_t pending = c.U32();
    for (uint32_t k = 0; k < pending && !c.bad; ++k) {
      const StreamId id = c.Id();
      StreamPending p;
      p.delivery_ms = c.U64();
      p.deliveries = c.U64();
      p.consumer = c.Str();
      // Ids ascending: each goes in at the end without a search.
      g.pending.emplace_hint(g.pending.end(), id, std::move(p));
    }
    const uint32_t consumers = c.U32();
    for (uint32_t k = 0; k < consumers && !c.bad; ++k) {
      std::string cname = c.Str();
      const uint64_t seen_ms = c.U64();
      g.consumers.emplace_hint(g.consumers.end(), std::move(cname), StreamConsumer{})
          ->second.seen_ms = seen_ms;
    }
    groups.emplace(std::move(name), std::move(g));
  }
  if (c.bad || !c.rest.empty()) return std::nullopt;
  return groups;
}

Bytes EncodeStreamMetaChange(StreamId last, StreamId max_deleted, uint64_t entries_added) {
  std::string out;
  PutId(out, last);
  PutId(out, max_deleted);
  Put64(out, entries_added);
  return Bytes::CopyCompact(out);
}

Bytes EncodeStreamIds(const std::vector<StreamId>& ids) {
  std::string out;
  for (StreamId id : ids) PutId(out, id);
  return Bytes::CopyCompact(out);
}

bool ValidStream(std::string_view value) {
  auto r = StreamReader::Open(value);
  if (!r || !DecodeStreamGroups(r->groups_bytes())) return false;
  for (const StreamEntryView& e : r->entries()) {
    if (!ValidMembers(e.body)) return false;
  }
  return true;
}

bool ValidStreamEntry(std::string_view entry) {
  return entry.size() >= 16 && ValidMembers(entry.substr(16));
}
bool ValidStreamGroups(std::string_view groups) {
  // DecodeStreamGroups's walk without building its maps (the check of every group change).
  Cursor c{groups};
  std::string_view skipped;
  const auto skip_string = [&] { c.Take(c.U32(), skipped); };
  const uint32_t n = c.U32();
  for (uint32_t i = 0; i < n && !c.bad; ++i) {
    skip_string();
    c.Take(16 + 8, skipped);  // last delivered id, entries read
    const uint32_t pending = c.U32();
    for (uint32_t k = 0; k < pending && !c.bad; ++k) {
      c.Take(16 + 8 + 8, skipped);  // id, delivery time, deliveries
      skip_string();
    }
    const uint32_t consumers = c.U32();
    for (uint32_t k = 0; k < consumers && !c.bad; ++k) {
      skip_string();
      c.Take(8, skipped);
    }
  }
  return !c.bad && c.rest.empty();
}
bool ValidStreamIds(std::string_view ids) { return ids.size() % 16 == 0; }
bool ValidStreamMetaChange(std::string_view meta) { return meta.size() == 40; }

Bytes StreamAppend(std::string_view value, std::string_view entry, uint64_t trimmed) {
  Bytes holder;
  const StreamReader r = OpenOrEmpty(value, holder);
  const std::string_view v = holder.empty() ? value : holder.view();
  Cursor c{entry};
  const StreamId id = c.Id();
  const std::string_view body = c.rest;
  std::string appended;
  PutId(appended, id);
  Put32(appended, static_cast<uint32_t>(body.size()));
  appended.append(body);
  StreamMeta meta = r.meta();
  meta.last = id;
  ++meta.entries_added;
  const size_t n = r.entries().size();
  const size_t from = static_cast<size_t>(std::min<uint64_t>(trimmed, n + 1));
  if (from > n) return Assemble(meta, {}, 0, {}, r.groups_bytes());
  const StreamId first = from < n ? r.entries()[from].id : id;
  return Assemble(meta, {EntryRun(v, r, from), appended}, n + 1 - from, first, r.groups_bytes());
}

size_t StreamUsedBytes(std::string_view value) {
  if (value.size() < kHeaderBytes) return value.size();
  return static_cast<size_t>(std::min<uint64_t>(Get64(value.data() + kEndOffset), value.size()));
}

bool StreamAppendInPlace(uint8_t* data, size_t size, std::string_view entry) {
  // Only the header is read: a value in memory was checked when its record was.
  const auto* text = reinterpret_cast<const char*>(data);
  if (size < kHeaderBytes || entry.size() < 16) return false;
  const size_t body = entry.size() - 16;
  const size_t grow = kEntryHead + body;
  const uint64_t groups_at = Get64(text + kGroupsAtOffset), end = Get64(text + kEndOffset);
  const uint64_t entries_added = Get64(text + 48), length = Get64(text + kLengthOffset);
  if (groups_at > end || end > size) return false;
  // The seek index moves with the groups and takes a slot for every kSeekStride-th entry.
  const auto index = FindSeekIndex({text, size}, end, length);
  const size_t index_bytes = index ? index->Size() : 0;
  const bool new_slot = index && length % kSeekStride == 0;
  if (size - end < grow + index_bytes + (new_slot ? 8 : 0)) return false;
  std::memmove(data + groups_at + grow, data + groups_at, end - groups_at + index_bytes);
  std::memcpy(data + groups_at, entry.data(), 16);
  uint8_t length_bytes[4];
  for (int i = 0; i < 4; ++i) length_bytes[i] = static_cast<uint8_t>(body >> (8 * i));
  std::memcpy(data + groups_at + 16, length_bytes, 4);
  std::memcpy(data + groups_at + kEntryHead, entry.data() + 16, body);
  if (new_slot) {
    Write64(data + end + grow + 8, index->count + 1);
    Write64(data + end + grow + index_bytes, groups_at);  // where the new entry starts
  }
  std::memcpy(data, entry.data(), 16);                        // last id
  if (length == 0) std::memcpy(data + 32, entry.data(), 16);  // first id
  Write64(data + 48, entries_added + 1);
  Write64(data + kLengthOffset, length + 1);
  Write64(data + kGroupsAtOffset, groups_at + grow);
  Write64(data + kEndOffset, end + grow);
  return true;
}

bool StreamReplaceGroupsInPlace(uint8_t* data, size_t size, std::string_view groups) {
  const auto* text = reinterpret_cast<const char*>(data);
  if (size < kHeaderBytes) return false;
  const uint64_t groups_at = Get64(text + kGroupsAtOffset), end = Get64(text + kEndOffset);
  if (groups_at > end || end > size) return false;
  const auto index = FindSeekIndex({text, size}, end, Get64(text + kLengthOffset));
  const size_t index_bytes = index ? index->Size() : 0;
  if (size - groups_at < groups.size() + index_bytes) return false;
  // The index first, to just past the new groups (the old groups' bytes it lands on are
  // overwritten next, or left behind).
  std::memmove(data + groups_at + groups.size(), data + end, index_bytes);
  std::memcpy(data + groups_at, groups.data(), groups.size());
  Write64(data + kEndOffset, groups_at + groups.size());
  return true;
}

Bytes StreamTrim(std::string_view value, uint64_t count) {
  Bytes holder;
  const StreamReader r = OpenOrEmpty(value, holder);
  const std::string_view v = holder.empty() ? value : holder.view();
  const size_t n = r.entries().size();
  const size_t from = static_cast<size_t>(std::min<uint64_t>(count, n));
  const StreamId first = from < n ? r.entries()[from].id : StreamId{};
  return Assemble(r.meta(), {EntryRun(v, r, from)}, n - from, first, r.groups_bytes());
}

Bytes StreamDelete(std::string_view value, std::string_view ids) {
  Bytes holder;
  const StreamReader r = OpenOrEmpty(value, holder);
  const std::string_view v = holder.empty() ? value : holder.view();
  std::vector<StreamId> gone;
  for (Cursor c{ids}; c.rest.size() >= 16;) gone.push_back(c.Id());
  std::sort(gone.begin(), gone.end());
  StreamMeta meta = r.meta();
  std::vector<std::string_view> runs;
  size_t kept = 0;
  StreamId first;
  for (const StreamEntryView& e : r.entries()) {
    if (std::binary_search(gone.begin(), gone.end(), e.id)) {
      meta.max_deleted = std::max(meta.max_deleted, e.id);
      continue;
    }
    if (kept++ == 0) first = e.id;
    const size_t start = static_cast<size_t>(e.body.data() - v.data()) - kEntryHead;
    runs.push_back(v.substr(start, kEntryHead + e.body.size()));
  }
  return Assemble(meta, runs, kept, first, r.groups_bytes());
}

Bytes StreamWhole(std::string_view value) {
  const auto meta = ReadStreamMeta(value);
  const size_t used = StreamUsedBytes(value);
  if (!meta || used < kRoomFrom) return Bytes::CopyCompact(value);
  const uint64_t groups_at = Get64(value.data() + kGroupsAtOffset);
  if (groups_at < kHeaderBytes || groups_at > used) return Bytes::CopyCompact(value);
  return WithRoom(value.substr(0, used), groups_at, meta->length);
}

Bytes StreamReplaceGroups(std::string_view value, std::string_view groups) {
  Bytes holder;
  const StreamReader r = OpenOrEmpty(value, holder);
  const std::string_view v = holder.empty() ? value : holder.view();
  const StreamId first = r.entries().empty() ? StreamId{} : r.entries()[0].id;
  return Assemble(r.meta(), {EntryRun(v, r, 0)}, r.entries().size(), first, groups);
}

Bytes StreamSetMeta(std::string_view value, std::string_view change) {
  Bytes holder;
  const StreamReader r = OpenOrEmpty(value, holder);
  const std::string_view v = holder.empty() ? value : holder.view();
  StreamMeta meta = r.meta();
  Cursor c{change};
  meta.last = c.Id();
  meta.max_deleted = c.Id();
  meta.entries_added = c.U64();
  const StreamId first = r.entries().empty() ? StreamId{} : r.entries()[0].id;
  return Assemble(meta, {EntryRun(v, r, 0)}, r.entries().size(), first, r.groups_bytes());
}

}  // namespace prefixd::store
