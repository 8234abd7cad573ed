// ParserLimits: the sizes a request may declare before the parser commits memory to it.
// A plain value; each connection copies its own.
#pragma once

#include <cstddef>
#include <cstdint>

namespace prefixd::protocol {

// Redis's PROTO_INLINE_MAX_SIZE: the longest inline line or count line without its terminator.
inline constexpr size_t kInlineMax = 64 * 1024;
// Arguments at least this long get a buffer of their own, read straight from the socket.
inline constexpr size_t kLargeArgument = 32 * 1024;
// Redis's limits for clients that have not authenticated yet.
inline constexpr int64_t kUnauthenticatedMaxArgs = 10;
inline constexpr int64_t kUnauthenticatedMaxBulk = 16384;

// What one argument costs beyond its bytes, counted against max_request_bytes.
inline constexpr int64_t kArgumentOverhead = 16;

struct ParserLimits {
  int64_t max_bulk_length = int64_t{1} << 30;  // proto-max-bulk-len
  // client-query-buffer-limit: the most argument bytes (plus kArgumentOverhead each) one request
  // may declare in total. Below 4 GiB: the request arena uses 32-bit offsets.
  int64_t max_request_bytes = int64_t{2} << 30;
  bool authenticated = true;
};

}  // namespace prefixd::protocol
