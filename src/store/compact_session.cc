#include "store/compact_session.h"

#include <algorithm>

namespace prefixd::store::compact_session {

void AppendVarint(std::string& out, uint64_t v) {
  uint8_t bytes[kMaxVarintSize];
  out.append(reinterpret_cast<const char*>(bytes),
             static_cast<size_t>(PutVarint(bytes, v) - bytes));
}

size_t LayerCount(std::string_view value) {
  size_t count = 0;
  ForEachLayer(value, [&](uint32_t, std::string_view) { ++count; });
  return count;
}

uint64_t PayloadBytes(std::string_view value) {
  uint64_t bytes = 0;
  ForEachLayer(value, [&](uint32_t, std::string_view b) { bytes += b.size(); });
  return bytes;
}

std::vector<std::pair<uint32_t, Bytes>> Decode(std::string_view value) {
  std::vector<std::pair<uint32_t, Bytes>> layers;
  ForEachLayer(value, [&](uint32_t layer, std::string_view bytes) {
    layers.emplace_back(layer, Bytes::CopyCompact(bytes));
  });
  return layers;
}

namespace {

std::string Encode(const std::vector<std::pair<uint32_t, std::string_view>>& layers) {
  std::string out;
  for (const auto& [layer, bytes] : layers) {
    AppendVarint(out, layer);
    AppendVarint(out, bytes.size());
    out.append(bytes);
  }
  return out;
}

}  // namespace

std::optional<std::string> Merge(std::string_view value,
                                 std::span<const std::pair<uint32_t, Bytes>> layers) {
  std::vector<std::pair<uint32_t, std::string_view>> merged;
  ForEachLayer(value,
               [&](uint32_t layer, std::string_view bytes) { merged.emplace_back(layer, bytes); });
  for (const auto& [layer, bytes] : layers) {
    if (bytes.size() > kMaxLayerBytes) return std::nullopt;
    auto it = std::lower_bound(merged.begin(), merged.end(), layer,
                               [](const auto& l, uint32_t wanted) { return l.first < wanted; });
    if (it != merged.end() && it->first == layer) {
      it->second = bytes.view();
    } else {
      merged.insert(it, {layer, bytes.view()});
    }
  }
  std::string out = Encode(merged);
  if (out.size() > kMaxSessionBytes) return std::nullopt;
  return out;
}

std::string Without(std::string_view value, uint32_t layer, bool& removed) {
  std::vector<std::pair<uint32_t, std::string_view>> kept;
  removed = false;
  ForEachLayer(value, [&](uint32_t l, std::string_view bytes) {
    if (l == layer) {
      removed = true;
    } else {
      kept.emplace_back(l, bytes);
    }
  });
  return removed ? Encode(kept) : std::string(value);
}

}  // namespace prefixd::store::compact_session
