// RespValue and ReplyParser: a RESP2/RESP3 reply as a tree, and the incremental parser that
// builds it from any split of a server's bytes, fed as they arrive (RequestParser's counterpart).
// Used by MIGRATE's link to the target server, tests and fuzz targets; the client library reads
// its replies its own way (client/reply_reader.h: typed reads pulled from a blocking socket,
// bulks straight into the caller's buffers, which a tree would copy). Plain values; one
// ReplyParser per stream, used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace prefixd::protocol {

enum class RespType {
  kSimple,     // +text
  kError,      // -text, or the RESP3 blob error !len
  kInteger,    // :n
  kBulk,       // $len (RESP3 streamed strings $? arrive joined into one)
  kNull,       // $-1, *-1 and RESP3 _
  kArray,      // *n
  kMap,        // %n, children are key, value, key, value...
  kSet,        // ~n
  kDouble,     // ,x
  kBoolean,    // #t / #f
  kVerbatim,   // =len, `format` holds the three-letter format, `str` the text after ':'
  kBignum,     // (digits, kept as text
  kPush,       // >n
  kAttribute,  // |n: children are the n key/value pairs, then the reply they annotate
};

struct RespValue {
  RespType type = RespType::kNull;
  std::string str;      // simple, error, bulk, verbatim and bignum payloads
  std::string format;   // verbatim only
  int64_t integer = 0;  // integer; boolean as 0 or 1
  double number = 0;    // double
  std::vector<RespValue> children;

  static RespValue Simple(std::string_view text);
  static RespValue Error(std::string_view text);
  static RespValue Integer(int64_t value);
  static RespValue Bulk(std::string_view value);
  static RespValue Null();
  static RespValue Array(std::vector<RespValue> elements);
  // `pairs` is flat: key, value, key, value...
  static RespValue Map(std::vector<RespValue> pairs);
  static RespValue Set(std::vector<RespValue> elements);
  static RespValue Double(double value);
  static RespValue Boolean(bool value);
  static RespValue Verbatim(std::string_view format, std::string_view text);
  static RespValue Bignum(std::string_view digits);
  static RespValue Push(std::vector<RespValue> elements);
  static RespValue Attribute(std::vector<RespValue> pairs, RespValue annotated);

  bool is_aggregate() const;
  // The reply itself with any attributes in front of it removed.
  const RespValue& Unwrapped() const;

  // Structural equality; doubles compare by value, with NaN equal to NaN.
  friend bool operator==(const RespValue& a, const RespValue& b);
};

// A one-line rendering for test failure messages, e.g. `{"a": [:1, null, ,2.5]}`.
std::string ToDebugString(const RespValue& value);

struct ReaderLimits {
  // Aggregates nested inside one another (an attribute counts as one level).
  int max_depth = 64;
  // Declared bulk, blob error and verbatim lengths (proto-max-bulk-len).
  int64_t max_bulk_length = int64_t{512} << 20;
  // Declared element count of one aggregate (a map declaring n pairs counts 2n).
  int64_t max_aggregate_length = int64_t{1} << 32;
  // Lines other than payloads: simple strings, errors, numbers and lengths.
  size_t max_line_length = 1 << 20;
};

enum class ReadStatus { kNeedMore, kComplete, kMalformed };

struct ReadResult {
  ReadStatus status;
  size_t consumed;  // bytes of the input taken; all of it unless a value completed or failed
};

class ReplyParser {
 public:
  explicit ReplyParser(ReaderLimits limits = {}) : limits_(limits) {}

  // Consumes `input` until one top-level reply is complete, the input is malformed, or the input
  // runs out. Bytes after a complete reply are left for the next call, after TakeValue().
  // Memory grows only with bytes actually received: declared lengths are checked against the
  // limits but never allocated up front.
  ReadResult Feed(std::string_view input);

  bool has_value() const { return complete_; }
  // Moves the complete reply out and readies the reader for the next one.
  RespValue TakeValue();

  bool failed() const { return !error_.empty(); }
  // Why the input was malformed; empty while it is not.
  const std::string& error() const { return error_; }

 private:
  enum class State { kType, kLine, kPayload, kPayloadEnd };

  // One aggregate being filled; `remaining` is -1 for a streamed aggregate that ends with '.'.
  struct Frame {
    RespValue node;
    int64_t remaining;
  };

  // Appends to line_ until CRLF; returns true once the whole line is in line_.
  bool TakeLine(std::string_view input, size_t& pos);
  void OnLine();
  void OnPayload();
  void OnLength(RespType type, std::string_view digits);
  void OnAggregate(RespType type, std::string_view digits);
  void OnStreamEnd();
  // Hands a finished value to the enclosing aggregate, completing it and its parents as needed.
  void Emit(RespValue value);
  void Fail(std::string message);

  ReaderLimits limits_;
  State state_ = State::kType;
  char type_byte_ = 0;
  std::string line_;
  bool saw_cr_ = false;
  int payload_crlf_ = 0;           // bytes of the CRLF after a payload still expected
  int64_t payload_left_ = 0;       // bytes of the current payload still expected
  RespValue scalar_;               // the bulk-like value whose payload is being read
  bool streaming_string_ = false;  // inside a `$?` string, expecting ';' chunks
  std::vector<Frame> stack_;
  RespValue result_;
  bool complete_ = false;
  std::string error_;
};

}  // namespace prefixd::protocol
