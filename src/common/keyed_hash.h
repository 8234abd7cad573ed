// KeyedHash: a 64-bit hash keyed by a secret drawn once per process (XXH3 with a random
// secret), for tables whose slots clients choose the inputs of (keyspace positions, the prefix
// index's block and checkpoint hashes): without the secret a client cannot predict where an input
// lands, so it cannot pile inputs into one chain or probe run (Redis seeds its dict's SipHash for
// the same reason). Values differ between processes: never persist them. Any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace prefixd {

uint64_t KeyedHash(const void* data, size_t length);
inline uint64_t KeyedHash(std::string_view bytes) { return KeyedHash(bytes.data(), bytes.size()); }

}  // namespace prefixd
