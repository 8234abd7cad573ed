// Mutation: one change to the stored state as the log and snapshots record it, and the codec
// between a Mutation and a record payload. Pure data and functions; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "persist/log_format.h"

namespace prefixd::persist {

// The fields of V-store and KV.PREFIX records (types 32 and up).
struct VectorFields {
  static constexpr uint64_t kNoPrefill = ~uint64_t{0};

  uint64_t index = 0;        // kVCreate; kKvRegister: the `_pk` session's
  uint64_t value_index = 0;  // kKvRegister: the `_pv` session's
  uint32_t dim = 0;          // kVCreate, kVStore; kKvRegister: kv_dim
  uint32_t tier = 0;         // store::Tier code
  uint32_t layer = 0;        // kVStore
  uint64_t start = 0;        // kVStore: first row
  uint64_t rows = 0;         // kVStore: row count
  // kVStore: the encoded rows; kKvRegister: the block hashes. Written as the pieces back to back
  // (a snapshot sends a layer's chunks without joining them); decoding gives one piece.
  std::vector<Bytes> data;
  uint32_t block_size = 0;           // kKvRegister (0: no BLOCKS)
  uint64_t prefill_us = kNoPrefill;  // kKvRegister

  uint64_t data_size() const;
  // The data as one buffer: the piece itself when there is one, else a joined copy.
  Bytes joined_data() const;
};

struct Mutation {
  RecordType type = RecordType::kSsmPut;
  // The session id; for kKvRegister and kKvDrop the namespace.
  std::string sid;
  // kSsmPut: the layers and their blobs. kSsmDropLayer: one entry, blob unused.
  std::vector<std::pair<uint32_t, Bytes>> layers;
  // kSnapshotEnd: the number of records before it in the snapshot.
  uint64_t count = 0;
  VectorFields vector;
};

// The payload as pieces to be written in order: small metadata pieces and the blobs themselves,
// so large values reach the file without being copied into a staging buffer.
std::vector<Bytes> EncodePayload(const Mutation& m);

// Decodes a record payload. Blobs are slices of `payload` (no copy). Returns an error text, or
// empty on success.
std::string DecodePayload(RecordType type, const Bytes& payload, Mutation& out);

}  // namespace prefixd::persist
