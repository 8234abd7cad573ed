// The prefix index's store commands as argv (KV.PREFIX.BSTORE, SSM.PREFIX.CKPT.STORE), built in
// one place for Client (sent over its socket) and ShmClient (sent through SHM.CALL, its blobs in
// a memfd). Used on the caller's thread while it builds one request.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string_view>
#include <vector>

#include "prefixd/client.h"
#include "resp_encoding.h"

namespace prefixd::client_internal {

// One request's words. They point into the caller's hashes and blobs and into `texts`, so the
// whole stays where it was built (not copied or moved) until the request is sent.
struct StoreArgs {
  std::vector<std::string_view> argv;
  // The indices in argv of the rows and state blobs: the arguments worth sending by memfd.
  std::vector<size_t> blobs;
  std::deque<Decimal> texts;  // the numbers (a deque: stable addresses)

  StoreArgs() = default;
  StoreArgs(const StoreArgs&) = delete;
  StoreArgs& operator=(const StoreArgs&) = delete;
};

// KV.PREFIX.BSTORE <ns> <parent> <n> <hashes> <layer> <rows> [...] [FMT F16|BF16].
void BlockStoreArgs(StoreArgs& out, std::string_view ns, const PrefixHash& parent,
                    std::span<const PrefixHash> hashes, std::span<const LayerBlob> layers,
                    RowFormat format);
// SSM.PREFIX.CKPT.STORE <ns> <anchor> <L> <pos> <layer> <blob> [...] [TAIL <layer> <rows> ...
// [FMT F16|BF16]].
void CheckpointStoreArgs(StoreArgs& out, std::string_view ns, const PrefixHash& anchor,
                         uint64_t length, const PrefixHash& position,
                         const PrefixCheckpointParts& parts);

}  // namespace prefixd::client_internal
