// The codec of every kind of change (mutation.h): the fieldwise payload each record's Tie
// declares, the log's compact string records, Describe, and where values sit in a payload
// (record_layout.h). Check and Apply are in mutation_apply.cc.
#include "persist/mutation.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "persist/record_layout.h"
#include "store/key_entry.h"

namespace prefixd::persist {
namespace {

template <typename Record, typename Visit>
void ForEachField(Record& r, Visit&& visit) {
  std::apply([&](auto&... field) { (visit(field), ...); }, std::remove_cvref_t<Record>::Tie(r));
}

bool Inline(uint64_t size) { return size < kCopiedBlobBelow; }

// The first pass of encoding: the bytes a record takes in its staging buffer (fields and small
// blobs; large blobs are pieces of their own).
class StagedSize {
 public:
  void operator()(uint32_t v) { bytes += WireSize(v); }
  void operator()(uint64_t v) { bytes += WireSize(v); }
  void operator()(const std::string& s) { bytes += WireSize(s); }
  void operator()(const RecordKey& k) { bytes += WireSize(k); }
  void operator()(const Blob& blob) {
    const uint64_t size = blob.size();
    bytes += FieldWire<Blob>::kHead + (Inline(size) ? size : 0);
  }
  void operator()(const LayerBlobs& layers) {
    bytes += FieldWire<LayerBlobs>::kHead;
    for (const auto& [layer, value] : layers)
      bytes += FieldWire<LayerBlobs>::kItemHead + (Inline(value.size()) ? value.size() : 0);
  }
  void operator()(const std::vector<StringSet>& entries) {
    bytes += FieldWire<std::vector<StringSet>>::kHead;
    for (const StringSet& entry : entries) ForEachField(entry, *this);
  }

  uint64_t bytes = 0;
};

// The second pass: little-endian fields and small blobs into the staging buffer sized by the
// first, after the header's room; a large blob closes the buffer's current stretch and follows
// it as a piece of its own (the stored buffer, no copy).
class Encoder {
 public:
  Encoder(EncodedRecord& out, uint64_t staged_bytes)
      : out_(out), buffer_(StagingBytes(kRecordHeaderSize + staged_bytes)) {}
  // The last stretch: a record staged whole (the usual case) takes the buffer's handle itself, so
  // its slab's count moves once, not three times.
  ~Encoder() {
    if (out_.head.data() == nullptr && used_ == buffer_.size()) {
      out_.head = std::move(buffer_);
    } else {
      Close();
    }
  }

  void operator()(uint32_t v) { PutU32(Take(4), v); }
  void operator()(uint64_t v) { PutU64(Take(8), v); }
  void operator()(std::string_view s) {
    (*this)(static_cast<uint32_t>(s.size()));
    Copy(s);
  }
  void operator()(const std::string& s) { (*this)(std::string_view(s)); }
  void operator()(const RecordKey& k) { (*this)(k.view()); }
  void operator()(const Blob& blob) {
    const uint64_t size = blob.size();
    (*this)(size);
    for (const Bytes& piece : blob.pieces) Inline(size) ? Copy(piece.view()) : Piece(piece);
  }
  void operator()(const LayerBlobs& layers) {
    (*this)(static_cast<uint32_t>(layers.size()));
    for (const auto& [layer, value] : layers) {
      (*this)(layer);
      (*this)(static_cast<uint64_t>(value.size()));
      Inline(value.size()) ? Copy(value.view()) : Piece(value);
    }
  }
  void operator()(const std::vector<StringSet>& entries) {
    (*this)(static_cast<uint32_t>(entries.size()));
    for (const StringSet& entry : entries) ForEachField(entry, *this);
  }

 private:
  uint8_t* Take(size_t n) {
    // StagedSize sized the buffer; a field it missed must not write into the next record.
    if (n > buffer_.size() - used_) throw std::logic_error("a record outgrew its staged size");
    uint8_t* at = buffer_.mutable_data() + used_;
    used_ += n;
    return at;
  }
  void Copy(std::string_view bytes) {
    if (!bytes.empty()) std::memcpy(Take(bytes.size()), bytes.data(), bytes.size());
  }
  void Piece(const Bytes& piece) {
    if (piece.empty()) return;
    Close();
    out_.rest.push_back(piece);
  }
  // Ends the buffer's current stretch: the head (with the header's room) or a piece after it.
  void Close() {
    if (out_.head.data() == nullptr) {
      out_.head = buffer_.Slice(0, used_);
    } else if (used_ > closed_) {
      out_.rest.push_back(buffer_.Slice(closed_, used_ - closed_));
    }
    closed_ = used_;
  }

  EncodedRecord& out_;
  Bytes buffer_;
  size_t used_ = kRecordHeaderSize;
  size_t closed_ = 0;
};

// Reads little-endian fields, failing (not crashing) on a short payload: `ok` turns false and
// stays false, naming the first field that ran past the end.
class Decoder {
 public:
  explicit Decoder(const Bytes& b) : bytes_(b) {}

  void operator()(uint32_t& v) {
    if (Need(4, "u32")) v = GetU32(bytes_.data() + pos_), pos_ += 4;
  }
  void operator()(uint64_t& v) {
    if (Need(8, "u64")) v = GetU64(bytes_.data() + pos_), pos_ += 8;
  }
  void operator()(std::string& s) {
    uint32_t length = 0;
    (*this)(length);
    Bytes b;
    if (Take(length, b, "string")) s.assign(b.view());
  }
  // A key keeps its slice of the payload (no copy).
  void operator()(RecordKey& k) {
    uint32_t length = 0;
    (*this)(length);
    Bytes b;
    if (Take(length, b, "string")) k = RecordKey(std::move(b));
  }
  void operator()(Blob& blob) {
    uint64_t length = 0;
    (*this)(length);
    blob.pieces.clear();
    if (Take(length, blob.pieces.emplace_back(), "blob")) return;
    blob.pieces.clear();
  }
  void operator()(LayerBlobs& layers) {
    uint32_t count = 0;
    (*this)(count);
    // Each layer needs at least 12 bytes: this bounds the count before anything is reserved.
    if (ok_ && count > Remaining() / 12) return Fail("layer count exceeds the payload");
    layers.reserve(count);
    for (uint32_t i = 0; i < count && ok_; ++i) {
      uint32_t layer = 0;
      uint64_t length = 0;
      Bytes blob;
      (*this)(layer);
      (*this)(length);
      if (Take(length, blob, "layer blob")) layers.emplace_back(layer, std::move(blob));
    }
  }

  void operator()(std::vector<StringSet>& entries) {
    uint32_t count = 0;
    (*this)(count);
    // Each entry needs at least 24 bytes: this bounds the count before anything is reserved.
    if (ok_ && count > Remaining() / 24) return Fail("entry count exceeds the payload");
    entries.reserve(count);
    for (uint32_t i = 0; i < count && ok_; ++i) ForEachField(entries.emplace_back(), *this);
  }

  // The compact string records' fields: a varint (common/varint.h), and `n` bytes as a slice.
  void Varint(uint64_t& v, std::string_view what) {
    if (!ok_) return;
    const size_t n = GetVarint(bytes_.data() + pos_, bytes_.data() + bytes_.size(), v);
    if (n == 0) {
      return Fail(std::string(what) + " at payload offset " + std::to_string(pos_) +
                  " is not a varint within the payload");
    }
    pos_ += n;
  }
  void Slice(uint64_t n, std::string_view what, Bytes& out) { Take(n, out, what); }
  void Refuse(std::string why) { Fail(std::move(why)); }

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  size_t Remaining() const { return bytes_.size() - pos_; }

 private:
  bool Need(uint64_t n, std::string_view what) {
    if (!ok_) return false;
    if (Remaining() >= n) return true;
    Fail(std::string(what) + " at payload offset " + std::to_string(pos_) + " runs past the end");
    return false;
  }
  bool Take(uint64_t n, Bytes& out, std::string_view what) {
    if (!Need(n, what)) return false;
    out = bytes_.Slice(pos_, n), pos_ += n;
    return true;
  }
  void Fail(std::string why) {
    if (ok_) ok_ = false, error_ = std::move(why);
  }

  const Bytes& bytes_;
  size_t pos_ = 0;
  bool ok_ = true;
  std::string error_;
};

// Appends one field's value for Describe.
class Describer {
 public:
  explicit Describer(std::string& out) : out_(out) {}
  void operator()(uint32_t v) { out_ += std::to_string(v); }
  void operator()(uint64_t v) { out_ += std::to_string(v); }
  void operator()(const RecordKey& k) { (*this)(std::string(k.view())); }
  void operator()(const std::string& s) {
    out_ += '\'';
    for (char c : std::string_view(s).substr(0, 64)) {
      if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
        out_ += c;
      } else {
        char hex[5];
        std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
        out_ += hex;
      }
    }
    out_ += s.size() > 64 ? "'..." : "'";
  }
  void operator()(const Blob& blob) { out_ += std::to_string(blob.size()) + " bytes"; }
  void operator()(const LayerBlobs& layers) {
    uint64_t bytes = 0;
    for (const auto& [layer, blob] : layers) bytes += blob.size();
    out_ += std::to_string(layers.size()) + " layers of " + std::to_string(bytes) + " bytes";
  }
  void operator()(const std::vector<StringSet>& entries) {
    uint64_t bytes = 0;
    for (const StringSet& entry : entries) bytes += entry.value.size();
    out_ += std::to_string(entries.size()) + " keys with " + std::to_string(bytes) + " bytes";
    if (entries.empty()) return;
    out_ += ", the first ";
    (*this)(entries.front().key);
  }

 private:
  std::string& out_;
};

// Each kind's declaration is whole: a name per field, and a record type of its own.
template <typename... Kinds>
consteval bool DeclarationsWhole(std::variant<Kinds...>*) {
  const RecordType types[] = {Kinds::kType...};
  for (size_t i = 0; i < sizeof...(Kinds); ++i) {
    for (size_t j = i + 1; j < sizeof...(Kinds); ++j) {
      if (types[i] == types[j]) return false;
    }
  }
  return ((Kinds::kFields.size() == kFieldCount<Kinds>)&&...);
}
static_assert(DeclarationsWhole(static_cast<Mutation*>(nullptr)),
              "a kind of change shares its record type, or names its fields wrongly");

// The alternative of Mutation whose kType is `type`; false for an unknown type.
template <size_t I = 0>
bool Emplace(RecordType type, Mutation& out) {
  if constexpr (I == std::variant_size_v<Mutation>) {
    return false;
  } else {
    if (std::variant_alternative_t<I, Mutation>::kType == type) {
      out.emplace<I>();
      return true;
    }
    return Emplace<I + 1>(type, out);
  }
}

}  // namespace

Bytes Blob::Joined() const {
  if (pieces.empty()) return Bytes();
  if (pieces.size() == 1) return pieces.front();
  Bytes out = Bytes::Allocate(size());
  size_t at = 0;
  for (const Bytes& piece : pieces) {
    if (!piece.empty()) std::memcpy(out.mutable_data() + at, piece.data(), piece.size());
    at += piece.size();
  }
  return out;
}

RecordType TypeOf(const Mutation& m) {
  return std::visit([](const auto& r) { return std::remove_cvref_t<decltype(r)>::kType; }, m);
}

namespace {

// Every record type's documented fieldwise layout, whatever its values' sizes.
EncodedRecord EncodeFields(const Mutation& m) {
  EncodedRecord out;
  out.type = TypeOf(m);
  std::visit(
      [&](const auto& r) {
        StagedSize size;
        ForEachField(r, size);
        Encoder encoder(out, size.bytes);
        ForEachField(r, encoder);
      },
      m);
  return out;
}

// The compact string records (log_format.h): a string set's fields as varints, its value copied
// after them. Every value is below kCopiedBlobBelow, so the record is one staged buffer; and
// below KeyEntry::kInlineValueBelow, so the disk tier never asks where one sits (that offset is
// the fieldwise layout's).
static_assert(kCopiedBlobBelow <= store::KeyEntry::kInlineValueBelow);

// One string set's compact entry: varint key length, the key, varint flags, varint at_ms,
// varint value length, the value.
size_t CompactEntrySize(const StringSet& r) {
  const uint64_t value = r.value.size();
  return VarintSize(r.key.size()) + r.key.size() + VarintSize(r.flags) + VarintSize(r.at_ms) +
         VarintSize(value) + value;
}

uint8_t* PutCompactEntry(uint8_t* at, const StringSet& r) {
  const std::string_view key = r.key.view();
  at = PutVarint(at, key.size());
  if (!key.empty()) std::memcpy(at, key.data(), key.size());
  at = PutVarint(PutVarint(PutVarint(at + key.size(), r.flags), r.at_ms), r.value.size());
  for (const Bytes& piece : r.value.pieces) {
    if (!piece.empty()) std::memcpy(at, piece.data(), piece.size());
    at += piece.size();
  }
  return at;
}

// kStringSetCompact: one entry.
EncodedRecord EncodeCompactStringSet(const StringSet& r) {
  EncodedRecord out;
  out.type = RecordType::kStringSetCompact;
  out.head = StagingBytes(kRecordHeaderSize + CompactEntrySize(r));
  PutCompactEntry(out.head.mutable_data() + kRecordHeaderSize, r);
  return out;
}

// kStringMultiSetCompact: varint count, then the entries.
EncodedRecord EncodeCompactMultiSet(const StringMultiSet& r) {
  size_t size = kRecordHeaderSize + VarintSize(r.entries.size());
  for (const StringSet& entry : r.entries) size += CompactEntrySize(entry);
  EncodedRecord out;
  out.type = RecordType::kStringMultiSetCompact;
  out.head = StagingBytes(size);
  uint8_t* at = PutVarint(out.head.mutable_data() + kRecordHeaderSize, r.entries.size());
  for (const StringSet& entry : r.entries) at = PutCompactEntry(at, entry);
  return out;
}

// Reads one compact entry (PutCompactEntry's layout) with the fieldwise records' Decoder.
void DecodeCompactEntry(Decoder& decoder, StringSet& r) {
  uint64_t key_length = 0, flags = 0, at_ms = 0, value_length = 0;
  Bytes key;
  decoder.Varint(key_length, "key length");
  decoder.Slice(key_length, "key", key);
  decoder.Varint(flags, "flags");
  decoder.Varint(at_ms, "at_ms");
  decoder.Varint(value_length, "value length");
  if (!decoder.ok()) return;
  if (flags > std::numeric_limits<uint32_t>::max()) return decoder.Refuse("flags past 32 bits");
  // The writer uses the fieldwise records for larger values: one encoding for each record.
  if (value_length >= kCopiedBlobBelow) return decoder.Refuse("a value of 512 bytes or more");
  r.key = RecordKey(std::move(key));
  r.flags = static_cast<uint32_t>(flags);
  r.at_ms = at_ms;
  r.value.pieces.clear();
  decoder.Slice(value_length, "value", r.value.pieces.emplace_back());
}

// kStringSetCompact: one entry; kStringMultiSetCompact: a varint count, then the entries.
void DecodeCompact(RecordType type, Decoder& decoder, Mutation& out) {
  if (type == RecordType::kStringSetCompact)
    return DecodeCompactEntry(decoder, out.emplace<StringSet>());
  StringMultiSet& multi = out.emplace<StringMultiSet>();
  uint64_t count = 0;
  decoder.Varint(count, "entry count");
  // Each entry takes at least four bytes: this bounds the count before anything is reserved.
  if (decoder.ok() && count > decoder.Remaining() / 4) {
    return decoder.Refuse("entry count exceeds the payload");
  }
  multi.entries.resize(decoder.ok() ? count : 0);
  for (StringSet& entry : multi.entries) DecodeCompactEntry(decoder, entry);
}

}  // namespace

EncodedRecord EncodeRecord(const Mutation& m) {
  if (const auto* set = std::get_if<StringSet>(&m); set && Inline(set->value.size())) {
    return EncodeCompactStringSet(*set);
  }
  if (const auto* multi = std::get_if<StringMultiSet>(&m);
      multi && std::all_of(multi->entries.begin(), multi->entries.end(),
                           [](const StringSet& e) { return Inline(e.value.size()); })) {
    return EncodeCompactMultiSet(*multi);
  }
  return EncodeFields(m);
}

std::vector<Bytes> EncodePayload(const Mutation& m) {
  EncodedRecord record = EncodeFields(m);
  std::vector<Bytes> pieces;
  pieces.reserve(record.rest.size() + 1);
  if (record.head.size() > kRecordHeaderSize) {
    pieces.push_back(record.head.Slice(kRecordHeaderSize, record.head.size()));
  }
  for (Bytes& piece : record.rest) pieces.push_back(std::move(piece));
  return pieces;
}

std::vector<uint64_t> SsmPutValueOffsets(const SsmPut& put) {
  std::vector<uint64_t> out;
  out.reserve(put.layers.size());
  uint64_t at = ValueOffset<FieldIndex<SsmPut>("layers")>(put);
  for (const auto& [layer, value] : put.layers) {
    at += FieldWire<LayerBlobs>::kItemHead;
    out.push_back(at);
    at += value.size();
  }
  return out;
}

uint64_t VStoreRowsOffset(std::string_view sid) {
  VStore rows;
  rows.sid = sid;
  return ValueOffset<FieldIndex<VStore>("data")>(rows);
}

std::vector<StringValueAt> StringValueOffsets(const Mutation& m, uint64_t from_size) {
  std::vector<StringValueAt> out;
  // `set` starts at `at` in the payload; returns where it ends.
  const auto add = [&](const StringSet& set, uint64_t at) {
    if (set.value.pieces.size() == 1 && set.value.size() >= from_size) {
      out.push_back(StringValueAt{std::string(set.key.view()), set.value.pieces[0].data(),
                                  at + ValueOffset<FieldIndex<StringSet>("value")>(set)});
    }
    return at + PayloadSize(set);
  };
  if (const auto* set = std::get_if<StringSet>(&m)) {
    add(*set, 0);
  } else if (const auto* multi = std::get_if<StringMultiSet>(&m)) {
    uint64_t at = ValueOffset<FieldIndex<StringMultiSet>("entries")>(*multi);
    for (const StringSet& entry : multi->entries) at = add(entry, at);
  }
  return out;
}

LayerHead DecodeLayerHead(const uint8_t* at) {
  return LayerHead{GetU32(at), GetU64(at + FieldWire<uint32_t>::kHead)};
}

Status DecodeHead(RecordType type, const Bytes& head, Mutation& out, uint64_t& values_head) {
  Decoder decoder(head);
  if (!Emplace(type, out)) {
    return Status::Corruption("unknown record type " + std::to_string(static_cast<int>(type)));
  }
  std::visit(
      [&](auto& r) {
        using R = std::remove_cvref_t<decltype(r)>;
        size_t i = 0;
        ForEachField(r, [&](auto& field) {
          if (i++ < kValuesField<R>) return decoder(field);
          // The values' head: a blob's u64 length or a count's u32.
          if constexpr (FieldWire<std::remove_cvref_t<decltype(field)>>::kHead == 8) {
            decoder(values_head);
          } else {
            uint32_t count = 0;
            decoder(count);
            values_head = count;
          }
        });
      },
      out);
  if (!decoder.ok()) return Status::Corruption(decoder.error());
  if (decoder.Remaining() != 0) {
    return Status::Corruption(std::to_string(decoder.Remaining()) + " unexpected trailing bytes");
  }
  return {};
}

Status DecodePayload(RecordType type, const Bytes& payload, Mutation& out) {
  Decoder decoder(payload);
  if (type == RecordType::kStringSetCompact || type == RecordType::kStringMultiSetCompact) {
    DecodeCompact(type, decoder, out);
  } else if (Emplace(type, out)) {
    std::visit([&](auto& r) { ForEachField(r, decoder); }, out);
  } else {
    return Status::Corruption("unknown record type " + std::to_string(static_cast<int>(type)));
  }
  if (!decoder.ok()) return Status::Corruption(decoder.error());
  if (decoder.Remaining() != 0) {
    return Status::Corruption(std::to_string(decoder.Remaining()) + " unexpected trailing bytes");
  }
  return {};
}

std::string Describe(const Mutation& m) {
  std::string out;
  std::visit(
      [&](const auto& r) {
        using R = std::remove_cvref_t<decltype(r)>;
        out.append(R::kName);
        if constexpr (R::kFields.empty()) return;
        out += " (";
        size_t i = 0;
        Describer describe(out);
        ForEachField(r, [&](const auto& field) {
          if (i > 0) out += ", ";
          out.append(R::kFields[i++]).append(" ");
          describe(field);
        });
        out += ")";
      },
      m);
  return out;
}
}  // namespace prefixd::persist
