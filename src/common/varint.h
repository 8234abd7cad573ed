// Unsigned LEB128 varints, shared by the log's compact string records and the keyspace's
// compact sessions: seven bits a byte, low bits first, the high bit set on every byte but the
// last. Pure functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace prefixd {

inline constexpr size_t kMaxVarintSize = 10;

inline size_t VarintSize(uint64_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

// Writes `v` at `p` (room for VarintSize(v) bytes); returns the byte after it.
inline uint8_t* PutVarint(uint8_t* p, uint64_t v) {
  for (; v >= 0x80; v >>= 7) *p++ = static_cast<uint8_t>(v | 0x80);
  *p++ = static_cast<uint8_t>(v);
  return p;
}

// Reads a varint from [p, end) into `v`: the bytes it took, or 0 when it runs past `end`, past
// 64 bits, or is not in its shortest form (so every value has one encoding).
inline size_t GetVarint(const uint8_t* p, const uint8_t* end, uint64_t& v) {
  v = 0;
  for (size_t i = 0; i < kMaxVarintSize && p + i < end; ++i) {
    const uint64_t bits = p[i] & 0x7f;
    if (i == kMaxVarintSize - 1 && bits > 1) return 0;
    v |= bits << (7 * i);
    if ((p[i] & 0x80) == 0) return i > 0 && p[i] == 0 ? 0 : i + 1;
  }
  return 0;
}

}  // namespace prefixd
