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

struct Mutation {
  RecordType type = RecordType::kSsmPut;
  std::string sid;
  // kSsmPut: the layers and their blobs. kSsmDropLayer: one entry, blob unused.
  std::vector<std::pair<uint32_t, Bytes>> layers;
  // kSnapshotEnd: the number of records before it in the snapshot.
  uint64_t count = 0;
};

// The payload as pieces to be written in order: small metadata pieces and the blobs themselves,
// so large values reach the file without being copied into a staging buffer.
std::vector<Bytes> EncodePayload(const Mutation& m);

// Decodes a record payload. Blobs are slices of `payload` (no copy). Returns an error text, or
// empty on success.
std::string DecodePayload(RecordType type, const Bytes& payload, Mutation& out);

}  // namespace prefixd::persist
