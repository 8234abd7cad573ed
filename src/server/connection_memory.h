// Connection memory: the input buffer a connection reads into, and the between-requests upkeep
// that keeps an idle connection small (freeing what an unusual request or reply grew) and
// publishes its figures for CLIENT LIST and INFO. One connection's thread only.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <span>

#include "protocol/reply_writer.h"
#include "protocol/request.h"
#include "protocol/resp_parser.h"
#include "server_api/client_state.h"

namespace prefixd::server {

// Idle, the input buffer is a small array inside the connection; a read that fills it borrows a
// large buffer from the io thread's cache for the following reads, handed back as soon as a read
// leaves room, so an idle connection holds no large buffer and a busy one reads in large steps.
class InputBuffer {
 public:
  static constexpr size_t kSmall = 1024;
  static constexpr size_t kLarge = 64 * 1024;
  // Large buffers an io thread keeps for its connections' next bursts.
  static constexpr size_t kCachedPerThread = 16;

  InputBuffer() = default;
  InputBuffer(const InputBuffer&) = delete;
  InputBuffer& operator=(const InputBuffer&) = delete;
  ~InputBuffer();

  // Where the next read goes.
  std::span<char> Target() {
    if (large_) return {large_.get(), kLarge};
    return small_;
  }
  // After a read of `n` bytes into Target() was processed: picks the next read's buffer. A read
  // that filled its buffer borrows the large one; a large buffer goes back once a read leaves
  // room and `bytes_waiting()` (the socket's unread bytes) says the client has paused.
  template <typename BytesWaiting>
  void AfterRead(size_t n, BytesWaiting&& bytes_waiting) {
    if (n == Target().size()) {
      if (!large_) Borrow();
    } else if (large_ && bytes_waiting() == 0) {
      GiveBack();
    }
  }
  size_t capacity() const { return large_ ? kLarge : 0; }

 private:
  void Borrow();
  void GiveBack();

  std::array<char, kSmall> small_;
  std::unique_ptr<char[]> large_;
};

// After a request ran: drops its arguments (a large one no longer pinned by an idle connection)
// and frees what it grew.
void ReleaseRequest(protocol::Request& done, protocol::RequestParser& parser);

// Publishes the connection's memory figures to `client` (qbuf, argv-mem, omem, tot-mem).
// `pushed_bytes`: bytes pushed outside replies and not yet sent (a replica's stream, MONITOR's
// lines); in omem and tot-mem, but not counted against maxmemory, as Redis leaves replication
// buffers out of it (a slow replica must not make the primary evict).
void PublishMemory(ClientState& client, const InputBuffer& input,
                   const protocol::RequestParser& parser, const protocol::ReplyWriter& reply,
                   size_t connection_bytes, size_t pushed_bytes = 0);

// Frees the replies' storage after they were written and reports it to the reclaimer.
void ReleaseReplies(protocol::ReplyWriter& reply);

// The connection is gone: its memory counts towards the next malloc_trim.
void NoteConnectionClosed(ClientState& client);

}  // namespace prefixd::server
