#include "persist/cold_directory.h"

#include <cstring>
#include <string_view>
#include <unordered_set>

#include "persist/log_format.h"

namespace prefixd::persist {
namespace {

// Fixed bytes of an SSM put payload (u32 sid length, u32 count) and of each layer (u32, u64).
constexpr uint64_t kPutFixedBytes = 8;
constexpr uint64_t kPutLayerBytes = 12;
// Fixed bytes of the directory (u64 region_end, u32 count), of an entry (u64 record_offset,
// u32 sid length, u32 layer count) and of a layer (u32 layer, u64 length).
constexpr uint64_t kDirectoryFixedBytes = 12;
constexpr uint64_t kEntryFixedBytes = 16;
constexpr uint64_t kLayerBytes = 12;

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
  uint8_t* p = out.mutable_data();
  PutU64(p, directory.region_end), p += 8;
  PutU32(p, static_cast<uint32_t>(directory.entries.size())), p += 4;
  for (const ColdEntry& e : directory.entries) {
    PutU64(p, e.record_offset), p += 8;
    PutU32(p, static_cast<uint32_t>(e.sid.size())), p += 4;
    std::memcpy(p, e.sid.data(), e.sid.size()), p += e.sid.size();
    PutU32(p, static_cast<uint32_t>(e.layers.size())), p += 4;
    for (const auto& [layer, length] : e.layers) {
      PutU32(p, layer), p += 4;
      PutU64(p, length), p += 8;
    }
  }
  return out;
}

std::string DecodeColdDirectory(const Bytes& payload, uint64_t region_start, uint64_t file_size,
                                uint64_t max_sid_len, ColdDirectory& out) {
  out = ColdDirectory{};
  Reader in(payload);
  if (!in.Has(kDirectoryFixedBytes)) return "it is shorter than its fixed fields";
  out.region_end = in.U64();
  const uint32_t count = in.U32();
  if (count > in.left() / kEntryFixedBytes) return "its entry count runs past its payload";
  if (out.region_end > file_size || out.region_end < region_start) {
    return "its cold records' end " + std::to_string(out.region_end) + " is outside [" +
           std::to_string(region_start) + ", " + std::to_string(file_size) + "]";
  }
  out.entries.reserve(count);
  std::unordered_set<std::string_view> sids;
  // Each record starts where the one before it ends.
  uint64_t at = region_start;
  for (uint32_t i = 0; i < count; ++i) {
    ColdEntry& e = out.entries.emplace_back();
    const std::string where = "entry " + std::to_string(i) + " ";
    if (!in.Has(kEntryFixedBytes - 4)) return where + "runs past its payload";
    e.record_offset = in.U64();
    const uint32_t sid_length = in.U32();
    if (sid_length > max_sid_len) return where + "has a sid longer than max-sid-len";
    if (!in.Has(uint64_t{sid_length} + 4)) return where + "runs past its payload";
    e.sid = in.Take(sid_length);
    const uint32_t layers = in.U32();
    if (layers > in.left() / kLayerBytes) return where + "has a layer count past its payload";
    e.layers.reserve(layers);
    for (uint32_t k = 0; k < layers; ++k) {
      const uint32_t layer = in.U32();
      e.layers.emplace_back(layer, in.U64());
    }
    if (e.record_offset != at) {
      return where + "starts at " + std::to_string(e.record_offset) + ", not where the record " +
             "before it ends (" + std::to_string(at) + ")";
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
    if (!fits) return where + "runs past the cold records' end " + std::to_string(out.region_end);
    at = end;
    if (!sids.insert(e.sid).second) return where + "names a session already listed";
  }
  if (in.left() != 0) return std::to_string(in.left()) + " unexpected trailing bytes";
  if (at != out.region_end) {
    return "its records end at " + std::to_string(at) + ", not at its cold records' end " +
           std::to_string(out.region_end);
  }
  return {};
}

}  // namespace prefixd::persist
