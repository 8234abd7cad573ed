// RequestParser: the incremental RESP request parser (multibulk and inline), fed any split of the
// input and answering malformed input exactly as Redis 7 does. Knows no sockets.
// One instance per connection, used by that connection's thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "common/bytes.h"
#include "protocol/limits.h"
#include "protocol/request.h"

namespace prefixd::protocol {

enum class ParseError {
  kNone,
  kInvalidMultibulkLength,
  kExpectedDollar,
  kInvalidBulkLength,
  kTooBigInline,
  kTooBigMultibulkCount,
  kTooBigBulkCount,
  kUnbalancedQuotes,
  kUnauthenticatedMultibulk,
  kUnauthenticatedBulk,
  kRequestTooLarge,
};

class RequestParser {
 public:
  // A large argument gets huge pages only past this much received data, in steps this long.
  static constexpr size_t kHugePagesAfter = size_t{2} << 20;
  static constexpr size_t kHugePagesAhead = size_t{32} << 20;
  // A line buffer grown past this is freed between requests.
  static constexpr size_t kIdleLineCapacity = 1024;

  explicit RequestParser(ParserLimits limits = {}) : limits_(limits) {}

  // Asked before a large argument is received, with the arguments received so far: a non-empty
  // answer (an error reply without '-') refuses the request, whose remaining bytes are then read
  // and dropped as they arrive, never held (a cluster node's MOVED for a 300 MB store).
  using LargeArgumentGate = std::function<std::string(const Request& partial)>;
  void set_large_argument_gate(LargeArgumentGate gate) { gate_ = std::move(gate); }
  // Once has_request(): the gate's refusal of that request (empty when it was not refused), to
  // take before TakeRequest, which then yields only the arguments received before the refusal.
  std::string TakeRefusal() { return std::exchange(refusal_, {}); }

  // Limits apply from the next length the parser reads (e.g. after AUTH succeeds).
  void set_limits(const ParserLimits& limits) { limits_ = limits; }
  const ParserLimits& limits() const { return limits_; }

  // Consumes bytes from `input` until one request is complete, an error is found, or the input
  // runs out; returns how many bytes it consumed. Bytes after a complete request are left for
  // the next call, so the caller can dispatch (and change limits) in between.
  size_t Feed(std::string_view input);

  bool has_request() const { return ready_; }
  // Moves the complete request into `out` (reusing out's storage) and readies the next one.
  void TakeRequest(Request& out);

  ParseError error() const { return error_; }
  // The exact error reply (without the leading '-' and the CRLF) for error().
  std::string ErrorMessage() const;

  // While a large argument is being received, the part of its final buffer still to be filled:
  // the caller may read socket bytes straight into it and report them with CommitDirect().
  std::span<uint8_t> DirectTarget();
  void CommitDirect(size_t n);

  // Bytes of the request in progress, for diagnostics and the query-buffer figure in CLIENT LIST.
  size_t pending_bytes() const { return line_.size() + large_filled_ + request_.payload_bytes(); }
  // Memory the request in progress holds: its line, the filled part of a large argument and its
  // arena (the part of a declared argument not yet received is not committed).
  size_t buffer_bytes() const;

  // Between requests: frees buffers grown past their everyday size by an unusual request (a long
  // inline line, a request of many small arguments). Returns the bytes freed.
  size_t ReleaseIdleMemory();

 private:
  enum class State {
    kStart,
    kInlineLine,
    kCountLine,
    kBulkLine,
    kSmallData,
    kLargeData,
    kCrlf,
    kSkipData,  // an argument of a refused request, and its CRLF
  };

  // The common case in one pass: a whole multibulk request of small arguments, every length a
  // plain decimal, all of it in `input`. Returns the bytes it took, with the request ready; 0,
  // with nothing changed, for anything else (a partial request, a large argument, a limit met,
  // malformed input), which the state machine then takes as before.
  size_t TakeWholeRequest(std::string_view input);
  // Accumulates a line up to '\r' plus one more byte (Redis does not check that it is '\n').
  // Returns true when the line is complete; `consumed` advances over the bytes taken.
  bool TakeCountLine(std::string_view input, size_t& consumed, ParseError too_big);
  void OnCountLine();
  void OnBulkLine();
  void OnInlineLine();
  void FinishArgument();
  void Fail(ParseError e) { error_ = e; }

  ParserLimits limits_;
  State state_ = State::kStart;
  ParseError error_ = ParseError::kNone;
  char bad_byte_ = 0;  // for "expected '$', got '%c'"
  bool ready_ = false;
  bool saw_cr_ = false;
  std::string line_;
  int64_t args_remaining_ = 0;
  int64_t declared_bytes_ = 0;
  size_t small_remaining_ = 0;
  int crlf_remaining_ = 0;
  Bytes large_;
  size_t large_filled_ = 0;
  size_t huge_advised_to_ = 0;  // large_ has huge pages advised below this offset
  size_t skip_remaining_ = 0;
  LargeArgumentGate gate_;
  std::string refusal_;  // set while the request in progress is being dropped
  Request request_;
};

// Splits an inline request line as Redis's sdssplitargs does (quotes, escapes). Returns false on
// unbalanced quotes. Exposed for tests.
bool SplitInlineArgs(std::string_view line, Request& out);

}  // namespace prefixd::protocol
