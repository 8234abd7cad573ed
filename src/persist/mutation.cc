#include "persist/mutation.h"

#include <cstring>
#include <string_view>

namespace prefixd::persist {
namespace {

// Appends little-endian fields into one small metadata piece.
class Meta {
 public:
  void U32(uint32_t v) {
    uint8_t b[4];
    PutU32(b, v);
    bytes_.append(reinterpret_cast<char*>(b), 4);
  }
  void U64(uint64_t v) {
    uint8_t b[8];
    PutU64(b, v);
    bytes_.append(reinterpret_cast<char*>(b), 8);
  }
  void Text(std::string_view s) { bytes_.append(s); }
  // `str` in docs/storage-format.md: a u32 length, then the bytes.
  void Str(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    Text(s);
  }
  // Moves the metadata gathered so far into `pieces`.
  void FlushTo(std::vector<Bytes>& pieces) {
    if (!bytes_.empty()) pieces.push_back(Bytes::CopyOf(bytes_));
    bytes_.clear();
  }

 private:
  std::string bytes_;
};

// Reads little-endian fields, failing (not crashing) on a short payload.
class Cursor {
 public:
  explicit Cursor(const Bytes& b) : bytes_(b) {}
  bool U32(uint32_t& v) {
    if (Remaining() < 4) return false;
    v = GetU32(bytes_.data() + pos_), pos_ += 4;
    return true;
  }
  bool U64(uint64_t& v) {
    if (Remaining() < 8) return false;
    v = GetU64(bytes_.data() + pos_), pos_ += 8;
    return true;
  }
  bool Take(uint64_t n, Bytes& out) {
    if (Remaining() < n) return false;
    out = bytes_.Slice(pos_, n), pos_ += n;
    return true;
  }
  size_t Remaining() const { return bytes_.size() - pos_; }

 private:
  const Bytes& bytes_;
  size_t pos_ = 0;
};

}  // namespace

uint64_t VectorFields::data_size() const {
  uint64_t total = 0;
  for (const Bytes& piece : data) total += piece.size();
  return total;
}

Bytes VectorFields::joined_data() const {
  if (data.size() == 1) return data.front();
  Bytes out = Bytes::Allocate(data_size());
  size_t at = 0;
  for (const Bytes& piece : data) {
    if (!piece.empty()) std::memcpy(out.mutable_data() + at, piece.data(), piece.size());
    at += piece.size();
  }
  return out;
}

namespace {

// Row data rides as the stored buffers themselves (no copy into the metadata piece).
void AppendNonEmpty(const std::vector<Bytes>& data, std::vector<Bytes>& pieces) {
  for (const Bytes& piece : data) {
    if (!piece.empty()) pieces.push_back(piece);
  }
}

}  // namespace

std::vector<Bytes> EncodePayload(const Mutation& m) {
  std::vector<Bytes> pieces;
  Meta meta;
  switch (m.type) {
    case RecordType::kSsmPut:
      meta.Str(m.sid);
      meta.U32(static_cast<uint32_t>(m.layers.size()));
      for (const auto& [layer, blob] : m.layers) {
        meta.U32(layer);
        meta.U64(blob.size());
        meta.FlushTo(pieces);
        if (!blob.empty()) pieces.push_back(blob);
      }
      break;
    case RecordType::kSsmDropLayer:
      meta.Str(m.sid);
      meta.U32(m.layers.empty() ? 0 : m.layers.front().first);
      break;
    case RecordType::kSsmDropSession:
      meta.Str(m.sid);
      break;
    case RecordType::kFlushAll:
      break;
    case RecordType::kSnapshotEnd:
      meta.U64(m.count);
      break;
    case RecordType::kVCreate:
      meta.Str(m.sid);
      meta.U64(m.vector.index);
      meta.U32(m.vector.dim);
      meta.U32(m.vector.tier);
      break;
    case RecordType::kVStore:
      meta.Str(m.sid);
      meta.U32(m.vector.layer);
      meta.U64(m.vector.start);
      meta.U64(m.vector.rows);
      meta.U32(m.vector.dim);
      meta.U32(m.vector.tier);
      meta.U64(m.vector.data_size());
      meta.FlushTo(pieces);
      AppendNonEmpty(m.vector.data, pieces);
      break;
    case RecordType::kVDrop:
    case RecordType::kKvDrop:
      meta.Str(m.sid);
      break;
    case RecordType::kKvRegister:
    case RecordType::kKvPrefix:
      meta.Str(m.sid);
      meta.U64(m.vector.index);
      meta.U64(m.vector.value_index);
      meta.U32(m.vector.dim);
      meta.U32(m.vector.tier);
      meta.U32(m.vector.block_size);
      meta.U64(m.vector.prefill_us);
      meta.U64(m.vector.data_size());
      meta.FlushTo(pieces);
      AppendNonEmpty(m.vector.data, pieces);
      break;
  }
  meta.FlushTo(pieces);
  return pieces;
}

std::string DecodePayload(RecordType type, const Bytes& payload, Mutation& out) {
  out = Mutation{};
  out.type = type;
  Cursor c(payload);
  auto read_sid = [&]() {
    uint32_t length = 0;
    Bytes sid;
    if (!c.U32(length) || !c.Take(length, sid)) return false;
    out.sid.assign(sid.view());
    return true;
  };
  switch (type) {
    case RecordType::kSsmPut: {
      uint32_t count = 0;
      if (!read_sid() || !c.U32(count)) return "short SSM put header";
      // Each layer needs at least 12 bytes, which bounds the count before reserving.
      if (count > c.Remaining() / 12 + 1) return "SSM put layer count exceeds the payload";
      out.layers.reserve(count);
      for (uint32_t i = 0; i < count; ++i) {
        uint32_t layer = 0;
        uint64_t length = 0;
        Bytes blob;
        if (!c.U32(layer) || !c.U64(length) || !c.Take(length, blob)) {
          return "SSM put layer " + std::to_string(i) + " runs past the payload";
        }
        out.layers.emplace_back(layer, std::move(blob));
      }
      break;
    }
    case RecordType::kSsmDropLayer: {
      uint32_t layer = 0;
      if (!read_sid() || !c.U32(layer)) return "short SSM drop-layer payload";
      out.layers.emplace_back(layer, Bytes());
      break;
    }
    case RecordType::kSsmDropSession:
      if (!read_sid()) return "short SSM drop-session payload";
      break;
    case RecordType::kFlushAll:
      break;
    case RecordType::kSnapshotEnd:
      if (!c.U64(out.count)) return "short snapshot end payload";
      break;
    case RecordType::kVCreate: {
      VectorFields& v = out.vector;
      if (!read_sid() || !c.U64(v.index) || !c.U32(v.dim) || !c.U32(v.tier)) {
        return "short V-store create payload";
      }
      break;
    }
    case RecordType::kVStore: {
      VectorFields& v = out.vector;
      uint64_t length = 0;
      if (!read_sid() || !c.U32(v.layer) || !c.U64(v.start) || !c.U64(v.rows) || !c.U32(v.dim) ||
          !c.U32(v.tier) || !c.U64(length)) {
        return "short V-store rows header";
      }
      if (!c.Take(length, v.data.emplace_back())) return "V-store rows run past the payload";
      break;
    }
    case RecordType::kVDrop:
    case RecordType::kKvDrop:
      if (!read_sid()) return "short drop payload";
      break;
    case RecordType::kKvRegister:
    case RecordType::kKvPrefix: {
      VectorFields& v = out.vector;
      uint64_t length = 0;
      if (!read_sid() || !c.U64(v.index) || !c.U64(v.value_index) || !c.U32(v.dim) ||
          !c.U32(v.tier) || !c.U32(v.block_size) || !c.U64(v.prefill_us) || !c.U64(length)) {
        return "short KV.PREFIX register header";
      }
      if (!c.Take(length, v.data.emplace_back())) {
        return "KV.PREFIX block hashes run past the payload";
      }
      break;
    }
    default:
      return "unknown record type " + std::to_string(static_cast<int>(type));
  }
  if (c.Remaining() != 0) return std::to_string(c.Remaining()) + " unexpected trailing bytes";
  return {};
}

}  // namespace prefixd::persist
