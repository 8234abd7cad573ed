// ColdReply: cold values streamed into a reply as it is written, window by window, so a reply
// holds one window (ReplyWriter::kProduceWindow) whatever the values' size. The kernel reads
// ahead of the socket on its own (the reads are sequential in the file); see ColdPlan. Built by
// a handler and then run by its connection's io thread, like any ReplyProducer.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "protocol/reply_writer.h"
#include "store/cold_file.h"

namespace prefixd::commands {

// Cold values of at least this many bytes are streamed; smaller ones are read whole (a run of
// adjacent small layers is one read).
inline constexpr uint64_t kStreamColdFrom = uint64_t{256} << 10;

// The cold extents one reply streams, in reply order. An extent without a file stands for
// `length` zero bytes (rows of a V-store layer that were never written). No read-ahead hint is
// given: sendfile and pread of a file read in order get the kernel's own read-ahead, which reads
// in large folios (block requests up to max_sectors_kb), while posix_fadvise(WILLNEED) reads
// single pages, so its requests stop at max_segments pages (1 MiB on this VM's virtio disk) and
// cost the io thread the page allocation: without it the server spends 30-40 % less CPU per cold
// GB at the same or better speed (docs/benchmarks.md, disk tier).
class ColdPlan {
 public:
  // Throws std::runtime_error when an extent lies past the end of its file, before anything of
  // the reply is queued (the request's exception boundary answers -ERR).
  explicit ColdPlan(std::vector<store::ColdExtent> extents);

  const store::ColdExtent& extent(size_t index) const { return extents_[index]; }

 private:
  std::vector<store::ColdExtent> extents_;
};

// Queues extents [first, first + count) of `plan` back to back as one bulk string read from disk
// while it is written; a bulk that is one extent of a file may be sent from it (sendfile). A
// read that fails once part of it went out cannot become an error reply: it throws from the
// write, which closes the connection (logged); the key is untouched either way.
void BulkCold(protocol::ReplyWriter& reply, const std::shared_ptr<ColdPlan>& plan, size_t first,
              size_t count = 1);

}  // namespace prefixd::commands
