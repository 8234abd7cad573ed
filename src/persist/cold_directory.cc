#include "persist/cold_directory.h"

#include <cstring>
#include <string_view>
#include <unordered_set>

#include "persist/log_format.h"
#include "persist/record_layout.h"
#include "store/vector_codec.h"

namespace prefixd::persist {
namespace {

// The SSM put's bytes before its layers when its sid is empty, and each layer's head
// (record_layout.h).
const uint64_t kPutFixedBytes = ValueOffset<FieldIndex<SsmPut>("layers")>(SsmPut{});
constexpr uint64_t kPutLayerBytes = FieldWire<LayerBlobs>::kItemHead;
// Fixed bytes of the directory (u64 region_end, u32 count), of an entry (u64 record_offset,
// u32 sid length, u32 layer count) and of a layer (u32 layer, u64 length).
constexpr uint64_t kDirectoryFixedBytes = 12;
constexpr uint64_t kEntryFixedBytes = 16;
constexpr uint64_t kLayerBytes = 12;

// Payload bytes of a create record beyond its sid, and of a rows record beyond its sid and rows.
const uint64_t kCreateFixedBytes = PayloadSize(VCreate{});
const uint64_t kRowsFixedBytes = ValueOffset<FieldIndex<VStore>("data")>(VStore{});
// Fixed bytes of a V-store entry (u64 record_offset, u32 sid length, u64 index, u32 dim, u32
// tier, u32 record count) and of a rows record's listing.
constexpr uint64_t kVectorEntryFixedBytes = 32;
constexpr uint64_t kRecordBytes = 20;

class Reader {
 public:
  explicit Reader(const Bytes& payload) : at_(payload.data()), left_(payload.size()) {}
  bool Has(uint64_t n) const { return n <= left_; }
  uint64_t left() const { return left_; }
  uint32_t U32() { return Advance(4), GetU32(at_ - 4); }
  uint64_t U64() { return Advance(8), GetU64(at_ - 8); }
  std::string_view Take(uint64_t n) {
    Advance(n);
    return {reinterpret_cast<const char*>(at_ - n), n};
  }

 private:
  void Advance(uint64_t n) { at_ += n, left_ -= n; }
  const uint8_t* at_;
  uint64_t left_;
};

// The region the listed records tile lies inside the file, after the directory.
Status CheckRegion(uint64_t region_end, uint64_t region_start, uint64_t file_size) {
  if (region_end <= file_size && region_end >= region_start) return {};
  return Status::Corruption("its cold records' end " + std::to_string(region_end) +
                            " is outside [" + std::to_string(region_start) + ", " +
                            std::to_string(file_size) + "]");
}

// The payload is consumed and the records end exactly at the region's end.
Status CheckEnd(const Reader& in, uint64_t at, uint64_t region_end) {
  if (in.left() != 0)
    return Status::Corruption(std::to_string(in.left()) + " unexpected trailing bytes");
  if (at == region_end) return {};
  return Status::Corruption("its records end at " + std::to_string(at) +
                            ", not at its cold records' end " + std::to_string(region_end));
}

// Both directories open with u64 region_end, u32 count, and each entry with u64
// record_offset, u32 sid length, the sid. Each returns the byte after what it wrote.
uint8_t* PutHead(uint8_t* p, uint64_t region_end, size_t count) {
  PutU64(p, region_end);
  PutU32(p + 8, static_cast<uint32_t>(count));
  return p + 12;
}
uint8_t* PutEntryHead(uint8_t* p, uint64_t record_offset, std::string_view sid) {
  PutU64(p, record_offset);
  PutU32(p + 8, static_cast<uint32_t>(sid.size()));
  std::memcpy(p + 12, sid.data(), sid.size());
  return p + 12 + sid.size();
}

}  // namespace

uint64_t SsmPutPayloadLength(const ColdEntry& entry) {
  uint64_t length = kPutFixedBytes + entry.sid.size();
  for (const auto& [layer, value_length] : entry.layers) length += kPutLayerBytes + value_length;
  return length;
}

std::vector<uint64_t> ColdValueOffsets(const ColdEntry& entry) {
  std::vector<uint64_t> out;
  out.reserve(entry.layers.size());
  uint64_t at = entry.record_offset + kRecordHeaderSize + kPutFixedBytes + entry.sid.size();
  for (const auto& [layer, value_length] : entry.layers) {
    at += kPutLayerBytes;
    out.push_back(at);
    at += value_length;
  }
  return out;
}

Bytes EncodeColdDirectory(const ColdDirectory& directory) {
  uint64_t size = kDirectoryFixedBytes;
  for (const ColdEntry& e : directory.entries) {
    size += kEntryFixedBytes + e.sid.size() + kLayerBytes * e.layers.size();
  }
  Bytes out = Bytes::Allocate(size);
  uint8_t* p = PutHead(out.mutable_data(), directory.region_end, directory.entries.size());
  for (const ColdEntry& e : directory.entries) {
    p = PutEntryHead(p, e.record_offset, e.sid);
    PutU32(p, static_cast<uint32_t>(e.layers.size())), p += 4;
    for (const auto& [layer, length] : e.layers) {
      PutU32(p, layer), p += 4;
      PutU64(p, length), p += 8;
    }
  }
  return out;
}

Status DecodeColdDirectory(const Bytes& payload, uint64_t region_start, uint64_t file_size,
                           uint64_t max_sid_len, ColdDirectory& out) {
  out = ColdDirectory{};
  Reader in(payload);
  if (!in.Has(kDirectoryFixedBytes))
    return Status::Corruption("it is shorter than its fixed fields");
  out.region_end = in.U64();
  const uint32_t count = in.U32();
  if (count > in.left() / kEntryFixedBytes)
    return Status::Corruption("its entry count runs past its payload");
  PREFIXD_RETURN_IF_ERROR(CheckRegion(out.region_end, region_start, file_size));
  out.entries.reserve(count);
  std::unordered_set<std::string_view> sids;
  // Each record starts where the one before it ends.
  uint64_t at = region_start;
  for (uint32_t i = 0; i < count; ++i) {
    ColdEntry& e = out.entries.emplace_back();
    const std::string where = "entry " + std::to_string(i) + " ";
    if (!in.Has(kEntryFixedBytes - 4)) return Status::Corruption(where + "runs past its payload");
    e.record_offset = in.U64();
    const uint32_t sid_length = in.U32();
    if (sid_length > max_sid_len)
      return Status::Corruption(where + "has a sid longer than max-sid-len");
    if (!in.Has(uint64_t{sid_length} + 4))
      return Status::Corruption(where + "runs past its payload");
    e.sid = in.Take(sid_length);
    const uint32_t layers = in.U32();
    if (layers > in.left() / kLayerBytes)
      return Status::Corruption(where + "has a layer count past its payload");
    e.layers.reserve(layers);
    for (uint32_t k = 0; k < layers; ++k) {
      const uint32_t layer = in.U32();
      e.layers.emplace_back(layer, in.U64());
    }
    if (e.record_offset != at) {
      return Status::Corruption(where + "starts at " + std::to_string(e.record_offset) +
                                ", not where the record " + "before it ends (" +
                                std::to_string(at) + ")");
    }
    uint64_t end = at;  // stays within [region_start, region_end], so no sum overflows
    const auto grow = [&](uint64_t n) {
      if (n > out.region_end - end) return false;
      end += n;
      return true;
    };
    bool fits = grow(kRecordHeaderSize + kPutFixedBytes) && grow(sid_length);
    for (const auto& [layer, length] : e.layers)
      fits = fits && grow(kPutLayerBytes) && grow(length);
    if (!fits)
      return Status::Corruption(where + "runs past the cold records' end " +
                                std::to_string(out.region_end));
    at = end;
    if (!sids.insert(e.sid).second)
      return Status::Corruption(where + "names a session already listed");
  }
  return CheckEnd(in, at, out.region_end);
}

uint64_t VectorColdEntryBytes(const VectorColdEntry& entry) {
  const auto tier = store::TierFromCode(entry.tier);
  if (!tier) return 0;
  const uint64_t row_bytes = store::RowBytes(*tier, entry.dim);
  uint64_t bytes = kRecordHeaderSize + kCreateFixedBytes + entry.sid.size();
  for (const VectorColdRows& r : entry.records) {
    bytes += kRecordHeaderSize + kRowsFixedBytes + entry.sid.size() + r.rows * row_bytes;
  }
  return bytes;
}

std::vector<uint64_t> VectorColdRowsOffsets(const VectorColdEntry& entry) {
  const auto tier = store::TierFromCode(entry.tier);
  const uint64_t row_bytes = tier ? store::RowBytes(*tier, entry.dim) : 0;
  std::vector<uint64_t> out;
  out.reserve(entry.records.size());
  uint64_t at = entry.record_offset + kRecordHeaderSize + kCreateFixedBytes + entry.sid.size();
  for (const VectorColdRows& r : entry.records) {
    at += kRecordHeaderSize + kRowsFixedBytes + entry.sid.size();
    out.push_back(at);
    at += r.rows * row_bytes;
  }
  return out;
}

Bytes EncodeVectorColdDirectory(const VectorColdDirectory& directory) {
  uint64_t size = kDirectoryFixedBytes;
  for (const VectorColdEntry& e : directory.entries) {
    size += kVectorEntryFixedBytes + e.sid.size() + kRecordBytes * e.records.size();
  }
  Bytes out = Bytes::Allocate(size);
  uint8_t* p = PutHead(out.mutable_data(), directory.region_end, directory.entries.size());
  for (const VectorColdEntry& e : directory.entries) {
    p = PutEntryHead(p, e.record_offset, e.sid);
    PutU64(p, e.index), p += 8;
    PutU32(p, e.dim), p += 4;
    PutU32(p, e.tier), p += 4;
    PutU32(p, static_cast<uint32_t>(e.records.size())), p += 4;
    for (const VectorColdRows& r : e.records) {
      PutU32(p, r.layer), p += 4;
      PutU64(p, r.start), p += 8;
      PutU64(p, r.rows), p += 8;
    }
  }
  return out;
}

Status DecodeVectorColdDirectory(const Bytes& payload, uint64_t region_start, uint64_t file_size,
                                 uint64_t max_sid_len, uint64_t max_dim, VectorColdDirectory& out) {
  out = VectorColdDirectory{};
  Reader in(payload);
  if (!in.Has(kDirectoryFixedBytes))
    return Status::Corruption("it is shorter than its fixed fields");
  out.region_end = in.U64();
  const uint32_t count = in.U32();
  if (count > in.left() / kVectorEntryFixedBytes)
    return Status::Corruption("its entry count runs past its payload");
  PREFIXD_RETURN_IF_ERROR(CheckRegion(out.region_end, region_start, file_size));
  out.entries.reserve(count);
  std::unordered_set<std::string_view> sids;
  uint64_t at = region_start;  // each entry's records start where the ones before end
  for (uint32_t i = 0; i < count; ++i) {
    VectorColdEntry& e = out.entries.emplace_back();
    const std::string where = "entry " + std::to_string(i) + " ";
    if (!in.Has(12)) return Status::Corruption(where + "runs past its payload");
    e.record_offset = in.U64();
    const uint32_t sid_length = in.U32();
    if (sid_length > max_sid_len)
      return Status::Corruption(where + "has a sid longer than max-sid-len");
    if (!in.Has(uint64_t{sid_length} + 20))
      return Status::Corruption(where + "runs past its payload");
    e.sid = in.Take(sid_length);
    e.index = in.U64();
    e.dim = in.U32();
    e.tier = in.U32();
    const uint32_t records = in.U32();
    if (records > in.left() / kRecordBytes)
      return Status::Corruption(where + "has a record count past its payload");
    const auto tier = store::TierFromCode(e.tier);
    if (!tier) return Status::Corruption(where + "has an unknown tier " + std::to_string(e.tier));
    if (e.dim < 1 || e.dim > max_dim || !store::CheckDim(*tier, e.dim).empty()) {
      return Status::Corruption(where + "has a dim " + std::to_string(e.dim) +
                                " its tier does not take");
    }
    const uint64_t row_bytes = store::RowBytes(*tier, e.dim);
    e.records.reserve(records);
    for (uint32_t k = 0; k < records; ++k) {
      VectorColdRows& r = e.records.emplace_back();
      r.layer = in.U32();
      r.start = in.U64();
      r.rows = in.U64();
      if (r.rows == 0 || r.rows > ~uint64_t{0} - r.start) {
        return Status::Corruption(where + "has a rows record of " + std::to_string(r.rows) +
                                  " rows from " + std::to_string(r.start));
      }
    }
    if (e.record_offset != at) {
      return Status::Corruption(where + "starts at " + std::to_string(e.record_offset) +
                                ", not where the record " + "before it ends (" +
                                std::to_string(at) + ")");
    }
    uint64_t end = at;  // stays within [region_start, region_end], so no sum overflows
    const auto grow = [&](uint64_t n) {
      if (n > out.region_end - end) return false;
      end += n;
      return true;
    };
    bool fits = grow(kRecordHeaderSize + kCreateFixedBytes) && grow(sid_length);
    for (const VectorColdRows& r : e.records) {
      fits = fits && grow(kRecordHeaderSize + kRowsFixedBytes) && grow(sid_length) &&
             r.rows <= (out.region_end - end) / row_bytes && grow(r.rows * row_bytes);
    }
    if (!fits)
      return Status::Corruption(where + "runs past the cold records' end " +
                                std::to_string(out.region_end));
    at = end;
    if (!sids.insert(e.sid).second)
      return Status::Corruption(where + "names a session already listed");
  }
  return CheckEnd(in, at, out.region_end);
}

}  // namespace prefixd::persist
