// ReplyWriter: the reply verbs handlers use (simple, error, integer, bulk, null, aggregates and
// the RESP3 types with Redis's RESP2 downgrades). Small replies are packed into owned chunks;
// large bulk values are queued as references to their Bytes for a gather write, never copied.
// Owned by one connection's thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"

namespace prefixd::protocol {

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

  // Everything queued, in order: owned chunks and referenced values.
  std::vector<std::span<const uint8_t>> Buffers() const;
  size_t pending_bytes() const { return pending_bytes_; }
  // Bytes copied into owned chunks (the part that costs memory beyond stored values).
  size_t owned_bytes() const { return owned_bytes_; }
  bool empty() const { return pending_bytes_ == 0; }
  void Clear();

  // A point in the queue to go back to: a request that fails half-way through its reply (an
  // exception) is answered with an error instead of the part written so far.
  struct Mark {
    size_t pieces = 0;
    size_t tail_size = 0;
    size_t pending_bytes = 0;
    size_t owned_bytes = 0;
  };
  Mark GetMark() const;
  void RewindTo(const Mark& mark);

  // Values referenced instead of copied when at least this long.
  static constexpr size_t kReferenceThreshold = 16 * 1024;

 private:
  std::string& Tail();
  void Append(std::string_view bytes);
  void Header(char type, int64_t n);

  int protocol_;
  // Pieces in output order; each is either an owned chunk or a referenced value.
  struct Piece {
    std::string owned;
    Bytes referenced;
    bool is_reference = false;
  };
  std::vector<Piece> pieces_;
  size_t pending_bytes_ = 0;
  size_t owned_bytes_ = 0;
};

}  // namespace prefixd::protocol
