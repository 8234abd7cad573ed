// ColdReply: cold values streamed into a reply as it is written, window by window, with the disk
// asked to read ahead of the socket, so reading the next window overlaps sending this one and a
// reply holds one window (ReplyWriter::kProduceWindow) whatever the values' size. Built by a
// handler and then run by its connection's io thread, like any ReplyProducer.
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

// The cold extents one reply streams, in reply order, and how far ahead the disk was asked to
// read: kReadAhead bytes past what was sent, across the ends of extents, so a multi-layer reply
// has the next layer on its way before the last window of this one is sent. An extent without a
// file stands for `length` zero bytes (rows of a V-store layer that were never written).
class ColdReadAhead {
 public:
  static constexpr uint64_t kReadAhead = uint64_t{16} << 20;
  // The disk is asked in steps of at least this much: fewer, larger hints, so more of the
  // read-ahead is in flight and the block requests are larger. Measured against 8 MiB ahead in
  // 1 MiB steps (docs/benchmarks.md, disk tier): ahead in 5 of 6 paired passes.
  static constexpr uint64_t kHintStep = uint64_t{4} << 20;

  // Throws std::runtime_error when an extent lies past the end of its file, before anything of
  // the reply is queued (the request's exception boundary answers -ERR); then asks for the
  // first kReadAhead bytes.
  explicit ColdReadAhead(std::vector<store::ColdExtent> extents);

  const store::ColdExtent& extent(size_t index) const { return extents_[index]; }
  // The reply is about to send extent `index` up to `upto`: ask for everything up to kReadAhead
  // bytes past that which was not asked for yet.
  void Reach(size_t index, uint64_t upto);

 private:
  std::vector<store::ColdExtent> extents_;
  std::vector<uint64_t> starts_;  // each extent's first byte in the reply's stream of them
  uint64_t total_ = 0;
  uint64_t asked_ = 0;  // the stream up to here was asked for
};

// Queues extents [first, first + count) of `plan` back to back as one bulk string read from disk
// while it is written; a bulk that is one extent of a file may be sent from it (sendfile). A
// read that fails once part of it went out cannot become an error reply: it throws from the
// write, which closes the connection (logged); the key is untouched either way.
void BulkCold(protocol::ReplyWriter& reply, const std::shared_ptr<ColdReadAhead>& plan,
              size_t first, size_t count = 1);

}  // namespace prefixd::commands
