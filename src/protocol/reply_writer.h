// ReplyWriter: the reply verbs handlers use (simple, error, integer, bulk, null, aggregates and
// the RESP3 types with Redis's RESP2 downgrades). Small replies are packed into owned chunks;
// large bulk values are queued as references to their Bytes for a gather write, never copied.
// A large computed reply (decoded V-store rows) is queued as a ReplyProducer and made window by
// window as the socket drains, so a client that does not read costs one window, not the reply.
// Owned by one connection's thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"

namespace prefixd::protocol {

// Makes one queued reply's bytes on demand, front to back. Runs on the connection's thread,
// possibly long after the handler returned: it must own (or pin) everything it reads.
class ReplyProducer {
 public:
  virtual ~ReplyProducer() = default;
  // Writes the next out.size() bytes of the reply (the writer never asks past its size).
  virtual void Produce(std::span<uint8_t> out) = 0;
  // Stored bytes the producer keeps referenced until it is done, for memory accounting.
  virtual size_t pinned_bytes() const = 0;

  // A producer whose bytes already sit in a file may let a connection send them from there
  // (sendfile) instead of being asked to Produce: the descriptor (valid while the producer
  // lives; -1: not a file) and the offset in it of the reply's first byte.
  virtual int file_descriptor() const { return -1; }
  virtual uint64_t file_offset() const { return 0; }
};

// A produced piece handed out to be sent straight from its file: `length` bytes from `offset`
// of `fd`. `producer` stays alive until the next NextWrite call.
struct FileSend {
  ReplyProducer* producer = nullptr;
  int fd = -1;
  uint64_t offset = 0;
  uint64_t length = 0;
};

class ReplyWriter {
 public:
  explicit ReplyWriter(int protocol = 2) : protocol_(protocol) {}

  int protocol() const { return protocol_; }
  void set_protocol(int protocol) { protocol_ = protocol; }

  void Simple(std::string_view text);
  // `message` starts with the error code, e.g. "ERR syntax error"; CR and LF become spaces.
  void Error(std::string_view message);
  void Integer(int64_t value);
  void Bulk(std::string_view value);
  // Queues `value` by reference when it is large enough to be worth a separate iovec.
  void Bulk(const Bytes& value);
  // One bulk string made of `pieces` back to back, each large piece queued by reference: a
  // value assembled from stored chunks goes out with a gather write, never joined.
  void BulkPieces(std::span<const Bytes> pieces);
  // A bulk string of `size` bytes made by `producer` while it is being written.
  void BulkProduced(uint64_t size, std::unique_ptr<ReplyProducer> producer);
  void Null();       // RESP3 `_`, RESP2 `$-1`
  void NullArray();  // RESP3 `_`, RESP2 `*-1`
  void ArrayLen(size_t n);
  void MapLen(size_t n);  // RESP2: an array of 2n
  void SetLen(size_t n);  // RESP2: an array
  void Double(double value);
  void Bool(bool value);
  void Verbatim(std::string_view text, std::string_view format = "txt");
  // Bytes already encoded as RESP, appended as they are.
  void Raw(std::string_view resp);

  // Everything queued, in order: owned chunks and referenced values (a produced piece is not
  // made here: for tests of replies without one).
  std::vector<std::span<const uint8_t>> Buffers() const;

  // The next run of queued bytes to write, in order, into `out` (cleared first): up to kMaxRun
  // owned and referenced pieces as they are, or up to kProduceWindow bytes of a produced piece,
  // made in a scratch buffer valid until the next call. Returns false once everything was
  // handed out. With `file`, a produced piece that sits in a file is handed out whole as
  // `*file` instead (after the run before it, in a call of its own; `out` empty); file->fd is
  // -1 otherwise.
  bool NextWrite(std::vector<std::span<const uint8_t>>& out, FileSend* file = nullptr);

  // Errors written since the writer was made, and the code (first word) of the last one: what
  // the dispatcher counts as a failed call and in INFO errorstats.
  uint64_t error_count() const { return error_count_; }
  std::string_view last_error_code() const { return last_error_code_; }

  // Bytes of the replies queued (what the client will receive).
  size_t pending_bytes() const { return pending_bytes_; }
  // Memory the queued replies hold: copied bytes, referenced (pinned) stored values, and the
  // scratch window of a produced piece. What client-output-buffer-limit bounds.
  size_t held_bytes() const { return owned_bytes_ + referenced_bytes_ + scratch_.capacity(); }
  // Of those, stored values queued by reference (the store counts them already).
  size_t referenced_bytes() const { return referenced_bytes_; }
  bool empty() const { return pending_bytes_ == 0; }
  // Forgets everything queued; keeps a small first chunk for the next batch and frees the rest,
  // so an idle connection holds no reply memory. Returns the bytes of owned storage freed.
  size_t Clear();

  // A point in the queue to go back to: a request that fails half-way through its reply (an
  // exception) is answered with an error instead of the part written so far. Rewinding drops
  // every piece queued since (releasing what referenced and produced pieces pinned) and restores
  // the byte counts; nothing queued after the mark may have been handed to NextWrite yet.
  struct Mark {
    size_t pieces = 0;
    size_t tail_size = 0;
    size_t pending_bytes = 0;
    size_t owned_bytes = 0;
    size_t referenced_bytes = 0;
  };
  Mark GetMark() const;
  void RewindTo(const Mark& mark);

  // Values referenced instead of copied when at least this long.
  static constexpr size_t kReferenceThreshold = 16 * 1024;
  // A produced piece is made this much at a time: what a client that does not read costs.
  static constexpr size_t kProduceWindow = 1 << 20;
  // Pieces per run: what one writev takes (asio passes at most 64 buffers per call anyway), so
  // the caller's buffer lists stay small after a reply of many pieces.
  static constexpr size_t kMaxRun = 64;
  // Owned chunks are sealed past this size, so many small replies never regrow (and copy) one
  // huge string; the first chunk is kept across batches while no larger than kKeptChunk.
  static constexpr size_t kOwnedChunk = 64 * 1024;
  static constexpr size_t kKeptChunk = 4 * 1024;

 private:
  std::string& Tail();
  void Append(std::string_view bytes);
  void Header(char type, int64_t n);
  void Reference(const Bytes& value);

  int protocol_;
  // Pieces in output order: an owned chunk, a referenced value or a produced bulk body.
  struct Piece {
    std::string owned;
    Bytes referenced;
    std::unique_ptr<ReplyProducer> producer;
    uint64_t produced_size = 0;
    enum class Kind : uint8_t { kOwned, kReference, kProduced } kind = Kind::kOwned;
  };
  std::vector<Piece> pieces_;
  size_t pending_bytes_ = 0;
  size_t owned_bytes_ = 0;
  size_t referenced_bytes_ = 0;
  // NextWrite's position: the next piece, and how much of a produced one was made already.
  size_t next_piece_ = 0;
  uint64_t produced_ = 0;
  std::vector<uint8_t> scratch_;
  std::unique_ptr<ReplyProducer> sending_;  // the producer of the FileSend last handed out
  uint64_t error_count_ = 0;
  std::string last_error_code_;
};

}  // namespace prefixd::protocol
