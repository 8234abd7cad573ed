// Connection memory: the input buffer a connection reads into, and the between-requests upkeep
// that keeps an idle connection small (freeing what an unusual request or reply grew) and
// publishes its figures for CLIENT LIST and INFO. One connection's thread only.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <string_view>

#include "protocol/reply_writer.h"
#include "protocol/request.h"
#include "protocol/resp_parser.h"
#include "server_api/client_state.h"

namespace prefixd::server {

// The input buffer: a small array inside the connection, and for one read at a time a large
// buffer from the io thread's cache. Every read goes into the large buffer, so that a burst of
// any size up to it comes in one system call; bytes that fit the small array are moved there
// and the large buffer goes straight back, and a longer burst keeps it only until its bytes were
// processed. A connection that waits for its client therefore holds no large buffer; one that
// was sent more than the small array holds keeps it while those requests run.
class InputBuffer {
 public:
  static constexpr size_t kSmall = 1024;
  static constexpr size_t kLarge = 64 * 1024;
  // Large buffers an io thread keeps for its connections' reads.
  static constexpr size_t kCachedPerThread = 16;

  InputBuffer() = default;
  InputBuffer(const InputBuffer&) = delete;
  InputBuffer& operator=(const InputBuffer&) = delete;
  ~InputBuffer();

  // Where the next read goes: the whole of a large buffer, borrowed for the read.
  std::span<char> Room();
  // After a read of `n` bytes into Room() (0: nothing came): those bytes. Up to kSmall they are
  // moved into the small array and the large buffer goes back here; past it they stay where
  // they are, held until Processed().
  std::string_view Filled(size_t n);
  // The bytes Filled returned were processed: the large buffer, if held, goes back.
  void Processed() {
    if (large_) GiveBack();
  }
  // The large buffer's bytes while one is held (CLIENT LIST's qbuf-free).
  size_t capacity() const { return large_ ? kLarge : 0; }

 private:
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
