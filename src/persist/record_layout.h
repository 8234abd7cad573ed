// RecordLayout: where a record's fields and values sit in its fieldwise payload (the layout
// EncodePayload writes and DecodePayload reads), derived from the record's one declaration in
// mutation.h (its Tie, in payload order, and kFields) and each field type's wire (FieldWire), so
// the disk tier, the snapshot's cold directories, recovery's cold loaders and the size sums all
// read one layout. Pure functions; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "persist/mutation.h"
#include "prefixd/status.h"

namespace prefixd::persist {

// Each field type's wire: kHead, the bytes before its variable part (the whole field for an
// integer). str: u32 length, the bytes; blob: u64 length, the bytes; layers: u32 count, then per
// layer kItemHead (u32 layer, u64 length) and the bytes; entries: u32 count, then each entry a
// StringSet's fields.
template <typename F>
struct FieldWire;
template <>
struct FieldWire<uint32_t> {
  static constexpr uint64_t kHead = 4;
};
template <>
struct FieldWire<uint64_t> {
  static constexpr uint64_t kHead = 8;
};
// The other heads are the lengths and counts above: each takes its integer's wire.
template <>
struct FieldWire<std::string> : FieldWire<uint32_t> {};
template <>
struct FieldWire<RecordKey> : FieldWire<std::string> {};
template <>
struct FieldWire<Blob> : FieldWire<uint64_t> {};
template <>
struct FieldWire<LayerBlobs> : FieldWire<uint32_t> {
  static constexpr uint64_t kItemHead = FieldWire<uint32_t>::kHead + FieldWire<uint64_t>::kHead;
};
template <>
struct FieldWire<std::vector<StringSet>> : FieldWire<uint32_t> {};

// The type of field `I` of record `R`.
template <typename R, size_t I>
using FieldType =
    std::remove_cvref_t<std::tuple_element_t<I, decltype(R::Tie(std::declval<R&>()))>>;
template <typename R>
inline constexpr size_t kFieldCount = std::tuple_size_v<decltype(R::Tie(std::declval<R&>()))>;

// The index of R's field named `name` (kFields); a name R lacks does not compile.
template <typename R>
consteval size_t FieldIndex(std::string_view name) {
  for (size_t i = 0; i < R::kFields.size(); ++i) {
    if (R::kFields[i] == name) return i;
  }
  throw "no field of that name";  // not a constant expression: a compile error
}

// The bytes one field takes in the payload.
inline uint64_t WireSize(uint32_t) { return FieldWire<uint32_t>::kHead; }
inline uint64_t WireSize(uint64_t) { return FieldWire<uint64_t>::kHead; }
inline uint64_t WireSize(const std::string& s) { return FieldWire<std::string>::kHead + s.size(); }
inline uint64_t WireSize(const RecordKey& k) { return FieldWire<RecordKey>::kHead + k.size(); }
inline uint64_t WireSize(const Blob& b) { return FieldWire<Blob>::kHead + b.size(); }
inline uint64_t WireSize(const LayerBlobs& layers) {
  uint64_t bytes = FieldWire<LayerBlobs>::kHead;
  for (const auto& [layer, value] : layers)
    bytes += FieldWire<LayerBlobs>::kItemHead + value.size();
  return bytes;
}
uint64_t WireSize(const std::vector<StringSet>& entries);

// Where field `field` of `r` starts in its payload: the sum of the fields before it.
template <typename R>
uint64_t FieldOffset(const R& r, size_t field) {
  uint64_t at = 0;
  size_t i = 0;
  std::apply([&](const auto&... f) { ((at += i++ < field ? WireSize(f) : 0), ...); }, R::Tie(r));
  return at;
}
// Where the bytes of field `I` start: after its head (a name's or blob's length, a count).
template <size_t I, typename R>
uint64_t ValueOffset(const R& r) {
  return FieldOffset(r, I) + FieldWire<FieldType<R, I>>::kHead;
}
// The payload's length.
template <typename R>
uint64_t PayloadSize(const R& r) {
  return FieldOffset(r, kFieldCount<R>);
}

inline uint64_t WireSize(const std::vector<StringSet>& entries) {
  uint64_t bytes = FieldWire<std::vector<StringSet>>::kHead;
  for (const StringSet& entry : entries) bytes += PayloadSize(entry);
  return bytes;
}

// A cold record's values are its last field (recovery reads what comes before it, not them),
// and the only field before them whose size varies is its first, a name.
template <typename R>
inline constexpr size_t kValuesField = kFieldCount<R> - 1;
template <typename R>
consteval bool ValuesLastAfterOneName() {
  return []<size_t... I>(std::index_sequence<I...>) {
    using Name = FieldType<R, 0>;
    return (std::is_same_v<Name, std::string> ||
            std::is_same_v<Name, RecordKey>)&&(std::is_integral_v<FieldType<R, I + 1>> && ...);
  }
  (std::make_index_sequence<kValuesField<R> - 1>{});
}
// The bytes before a cold record's values (its head) when its name takes `name_length` bytes.
template <typename R>
uint64_t HeadBytes(uint64_t name_length) {
  static_assert(ValuesLastAfterOneName<R>());
  return ValueOffset<kValuesField<R>>(R{}) + name_length;
}

// The head of one layer of a `layers` field (FieldWire<LayerBlobs>::kItemHead bytes).
struct LayerHead {
  uint32_t layer = 0;
  uint64_t length = 0;
};
LayerHead DecodeLayerHead(const uint8_t* at);

// Decodes a cold record's head (its first HeadBytes: every field before its values, then their
// length or count into `values_head`) from `head`; the record left in `out` holds no values.
Status DecodeHead(RecordType type, const Bytes& head, Mutation& out, uint64_t& values_head);

}  // namespace prefixd::persist
