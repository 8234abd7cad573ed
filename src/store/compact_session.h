// CompactSession: a small SSM session as its keyspace entry holds it, in the entry's value
// instead of a StateStore chunk beside it (docs/cache-design.md, "Small SSM sessions in their
// keyspace entry") — its layers in ascending order, each a varint layer number, a varint length
// and the bytes. Pure functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "common/varint.h"

namespace prefixd::store::compact_session {

// A session is kept compact while every layer is at most this long (StateStore keeps such values
// inline too) and its encoding at most kMaxSessionBytes; a larger one lives in StateStore, which
// fetches large values by reference and moves sessions to the disk tier.
inline constexpr size_t kMaxLayerBytes = 128;
inline constexpr size_t kMaxSessionBytes = 1024;

// Calls `visit(layer, bytes)` for each layer of `value` (written by Merge), in layer order,
// until a visitor that returns bool returns false.
template <class Visit>
void ForEachLayer(std::string_view value, Visit&& visit);

// The bytes of `layer`, or nullopt. Inline: a small FETCH's or MFETCH's whole read.
inline std::optional<std::string_view> FindLayer(std::string_view value, uint32_t layer);
size_t LayerCount(std::string_view value);
// The layers' bytes together, without the encoding's own.
uint64_t PayloadBytes(std::string_view value);
// Copies of every layer, in order.
std::vector<std::pair<uint32_t, Bytes>> Decode(std::string_view value);

// `value`'s layers with `layers` put over them (a layer given twice keeps its last value), or
// nullopt when the result would not be compact (the session then goes to StateStore).
std::optional<std::string> Merge(std::string_view value,
                                 std::span<const std::pair<uint32_t, Bytes>> layers);
// `value` without `layer` (`removed` says whether it was there); empty when no layer is left.
std::string Without(std::string_view value, uint32_t layer, bool& removed);

// The encoding's varints (common/varint.h). ReadVarint advances `at`; a malformed one (cut
// short, past 64 bits, not shortest) reads as 0 and moves `at` to the end, ending a walk.
// ReadVarint is inline (over common/varint.h's GetVarint): a small MFETCH spent more on this walk
// than on its lookup while it was a call.
void AppendVarint(std::string& out, uint64_t v);
inline uint64_t ReadVarint(std::string_view value, size_t& at) {
  const auto* data = reinterpret_cast<const uint8_t*>(value.data());
  uint64_t v = 0;
  const size_t n = GetVarint(data + at, data + value.size(), v);
  // A malformed one (cut short, past 64 bits) ends the walk instead of shifting past 64 bits.
  at = n == 0 ? value.size() : at + n;
  return n == 0 ? 0 : v;
}

template <class Visit>
void ForEachLayer(std::string_view value, Visit&& visit) {
  size_t at = 0;
  while (at < value.size()) {
    const auto layer = static_cast<uint32_t>(ReadVarint(value, at));
    const auto length = static_cast<size_t>(ReadVarint(value, at));
    // A visitor that returns bool stops the walk by returning false.
    if constexpr (std::is_same_v<decltype(visit(layer, value.substr(at, length))), bool>) {
      if (!visit(layer, value.substr(at, length))) return;
    } else {
      visit(layer, value.substr(at, length));
    }
    at += length;
  }
}

std::optional<std::string_view> FindLayer(std::string_view value, uint32_t layer) {
  // The layers are in ascending order: the walk stops at the first one at or past `layer`.
  std::optional<std::string_view> found;
  ForEachLayer(value, [&](uint32_t l, std::string_view bytes) {
    if (l == layer) found = bytes;
    return l < layer;
  });
  return found;
}

}  // namespace prefixd::store::compact_session
