#include "common/keyed_hash.h"

#include <xxhash.h>

#include <array>
#include <random>

namespace prefixd {

uint64_t KeyedHash(const void* data, size_t length) {
  static const auto secret = [] {
    std::array<uint8_t, 192> bytes{};
    std::random_device device;
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(device());
    return bytes;
  }();
  return XXH3_64bits_withSecret(data, length, secret.data(), secret.size());
}

}  // namespace prefixd
