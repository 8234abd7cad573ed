// Redis Cluster hash slots: slot = CRC16-XMODEM(key, or its {hash tag}) mod 16384, exactly as
// Redis's keyHashSlot. Pure functions; any thread.
//
// Per-slot counting and listing (CLUSTER COUNTKEYSINSLOT, GETKEYSINSLOT, slot migration) is a
// property of the keyspace, designed in docs/cache-design.md: the keyspace picks a key's shard
// from its slot (ShardOfSlot), so every key of a slot lives in one shard and a per-shard table
// of SlotsPerShard counters, kept under the shard lock, answers COUNTKEYSINSLOT in O(1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace prefixd {

inline constexpr uint32_t kClusterSlots = 16384;

// CRC16 with polynomial 0x1021, initial value 0, no reflection (XMODEM), as Redis's crc16.c.
uint16_t Crc16Xmodem(std::string_view data);

// The bytes Redis hashes for `key`: between the first '{' and the first '}' after it when that
// is non-empty, else the whole key.
std::string_view HashTagOf(std::string_view key);

inline uint16_t KeySlot(std::string_view key) {
  return static_cast<uint16_t>(Crc16Xmodem(HashTagOf(key)) & (kClusterSlots - 1));
}

// The keyspace shard a slot belongs to, for a power-of-two shard count up to kClusterSlots.
// Consecutive slots go to different shards, so a node serving a slot range still uses every
// shard.
inline size_t ShardOfSlot(uint16_t slot, size_t shard_count) { return slot & (shard_count - 1); }
inline size_t SlotsPerShard(size_t shard_count) { return kClusterSlots / shard_count; }

}  // namespace prefixd
