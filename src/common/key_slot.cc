#include "common/key_slot.h"

#include <array>

namespace prefixd {
namespace {

// kCrc16Tables[k][b]: what byte b contributes to the CRC once k zero bytes follow it. Table 0 is
// the classic byte-at-a-time table; the others let eight bytes be folded in with eight
// independent lookups instead of a chain of eight dependent ones (slicing-by-8).
constexpr std::array<std::array<uint16_t, 256>, 8> MakeCrc16Tables() {
  std::array<std::array<uint16_t, 256>, 8> tables{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte << 8;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1;
    tables[0][byte] = static_cast<uint16_t>(crc);
  }
  for (size_t k = 1; k < 8; ++k) {
    for (uint32_t byte = 0; byte < 256; ++byte) {
      const uint16_t prev = tables[k - 1][byte];
      tables[k][byte] = static_cast<uint16_t>((prev << 8) ^ tables[0][prev >> 8]);
    }
  }
  return tables;
}
constexpr auto kCrc16Tables = MakeCrc16Tables();

}  // namespace

uint16_t Crc16Xmodem(std::string_view data) {
  const auto& t = kCrc16Tables;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t n = data.size();
  uint16_t crc = 0;
  for (; n >= 8; n -= 8, p += 8) {
    // The CRC's two bytes combine with the first two input bytes; the other six pass through.
    crc = static_cast<uint16_t>(t[7][(crc >> 8) ^ p[0]] ^ t[6][(crc & 0xff) ^ p[1]] ^ t[5][p[2]] ^
                                t[4][p[3]] ^ t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]]);
  }
  for (; n > 0; --n, ++p) crc = static_cast<uint16_t>((crc << 8) ^ t[0][((crc >> 8) ^ *p) & 0xff]);
  return crc;
}

std::string_view HashTagOf(std::string_view key) {
  const size_t open = key.find('{');
  if (open == std::string_view::npos) return key;
  const size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

}  // namespace prefixd
