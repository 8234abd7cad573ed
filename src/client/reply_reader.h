// Reply reading for the client: the socket's unread bytes (Inbox) and the typed reads of one
// RESP2 reply (ReplyReader): a status, an integer, an array header, a bulk into a new or a
// caller's buffer, or any reply through hiredis. Owned by one connection (one thread at a time).
// Unlike protocol::ReplyParser (the server's, which builds a tree from bytes pushed to it), it
// pulls exactly what the command expects, so a bulk lands in its destination without a copy.
//
// A server error reply at the top level gives kServerError and leaves the stream in step. Any
// other failure (I/O, timeout, malformed or unexpected reply) leaves it out of step: the reader
// passes it to the connection's `fail` hook, which closes the connection, and returns that.
#pragma once

#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "prefixd/client.h"
#include "prefixd/status.h"

namespace prefixd::client_internal {

// Bytes read from the socket and not yet consumed. Bulk payloads bypass it: whatever part of a
// payload is already buffered is copied out, the rest is received straight into its destination.
class Inbox {
 public:
  void Reset(int fd) {
    fd_ = fd;
    head_ = tail_ = 0;
  }

  size_t available() const { return tail_ - head_; }
  const char* data() const { return buf_.data() + head_; }
  void Consume(size_t n) {
    head_ += n;
    if (head_ == tail_) head_ = tail_ = 0;
  }

  // Receives at least one more byte.
  Status Fill();
  // The next CRLF-terminated line without its CRLF, consumed. The view is valid until the next
  // read from this inbox.
  Result<std::string_view> Line();
  // Exactly `n` bytes into `dst`.
  Status ReadInto(uint8_t* dst, size_t n);
  Status Discard(size_t n);
  Status ExpectCrlf();

 private:
  Result<size_t> Receive(void* dst, size_t n, int flags);

  int fd_ = -1;
  std::vector<char> buf_;
  size_t head_ = 0;
  size_t tail_ = 0;
};

// The first byte of a reply and the rest of its first line.
struct ReplyHead {
  char type;
  std::string_view text;
};

// Outcome of reading one bulk-or-nil reply into a fixed buffer.
struct BulkRead {
  bool nil = false;
  uint64_t length = 0;  // the full bulk length; only the first dst.size() bytes were kept
};

std::optional<int64_t> ParseInteger(std::string_view text);

class ReplyReader {
 public:
  // `fail` closes the connection and returns the status it was given.
  ReplyReader(uint64_t max_bulk_bytes, std::function<Status(Status)> fail)
      : max_bulk_bytes_(max_bulk_bytes), fail_(std::move(fail)) {}

  void Reset(int fd) { in_.Reset(fd); }

  Result<ReplyHead> Head();
  // A protocol error naming what `command` expected and what came; fatal.
  Status Unexpected(const ReplyHead& head, std::string_view command, std::string_view wanted);

  // A `+<expected>` reply; an error reply becomes kServerError.
  Status ReadStatus(std::string_view expected, std::string_view command);
  // `*<n>`; an error reply becomes kServerError. A nil array reads as empty.
  Result<int64_t> ReadArrayHead(std::string_view command);
  // `:<n>`; an error reply becomes kServerError.
  Result<int64_t> ReadInteger(std::string_view command);
  // `:<n>` as an array element (an error reply there is fatal).
  Result<int64_t> ReadIntegerInArray(std::string_view command);
  // The length of a bulk header, nullopt for nil; an error reply outside an array becomes
  // kServerError (inside one it would leave the rest of the array unread, so it is fatal).
  Result<std::optional<uint64_t>> ReadBulkHead(std::string_view command, bool in_array);
  // One bulk-or-nil reply into a new buffer.
  Result<std::optional<Blob>> ReadBulk(std::string_view command, bool in_array);
  // One bulk-or-nil reply; its first dst.size() bytes land in `dst`, any rest is discarded.
  Result<BulkRead> ReadBulkInto(std::span<uint8_t> dst, std::string_view command);
  // The same into `pieces` in turn (a scatter read: one value into places that are not
  // adjacent); the bytes past their total are discarded.
  Result<BulkRead> ReadBulkScatter(std::span<const std::span<uint8_t>> pieces,
                                   std::string_view command, bool in_array);
  // Any reply, parsed by hiredis's `reader`. With one request in flight nothing can follow the
  // reply, and anything that does is a protocol error.
  Result<Reply> ReadGeneric(redisReader* reader);

 private:
  const uint64_t max_bulk_bytes_;
  const std::function<Status(Status)> fail_;
  Inbox in_;
};

}  // namespace prefixd::client_internal
