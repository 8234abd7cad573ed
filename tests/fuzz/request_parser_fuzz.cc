// libFuzzer target for RequestParser: parses the input whole and again in chunks whose sizes come
// from the input (some bytes going through DirectTarget/CommitDirect), under small limits, and
// aborts if the two disagree or an invariant of the Feed contract breaks.
//
// Input layout: byte 0 holds flags, byte 1 picks the limits, the rest is the wire data.
//   byte 0: bit 0 clear = authenticated, bit 1 = authenticate after the first request,
//           bit 2 = use DirectTarget, bit 3 = run-length expand the data, bits 4-7 = chunk size.
//   byte 1: high nibble = max_bulk_length, low nibble = max_request_bytes (tables below).
// Expansion lets a few bytes reach the 32 KiB and 64 KiB thresholds: 0xFE k repeats the previous
// byte k * 512 times.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/limits.h"
#include "protocol/request.h"
#include "protocol/resp_parser.h"

namespace {

using prefixd::protocol::kUnauthenticatedMaxArgs;
using prefixd::protocol::kUnauthenticatedMaxBulk;
using prefixd::protocol::ParseError;
using prefixd::protocol::ParserLimits;
using prefixd::protocol::Request;
using prefixd::protocol::RequestParser;

// Bulk limits stay small: a 1 GiB declared length would make ASan poison 128 MiB per run.
constexpr int64_t kBulkLimits[16] = {0,     1,     2,     3,     5,     16,    100,   16383,
                                     16384, 16385, 32767, 32768, 40000, 65536, 70000, 1 << 20};
constexpr int64_t kRequestLimits[16] = {
    0,     1,     4,     10,     100,    1000,    16384,   32768,
    40000, 65536, 65537, 100000, 200000, 1 << 20, 1 << 21, int64_t{2} << 30};
constexpr size_t kChunkSizes[16] = {1, 1, 2, 3, 4, 5, 7, 8, 13, 16, 64, 100, 512, 4096, 40000, 0};
constexpr size_t kMaxExpanded = 200 * 1024;
// Long inputs are cut into at most about this many chunks, to keep runs fast.
constexpr size_t kMaxChunks = 512;

struct Config {
  ParserLimits limits;
  bool authenticate_after_first = false;
  bool direct = false;
  size_t max_chunk = 0;  // 0: any size up to the rest of the input
  uint64_t seed = 0;
};

struct Outcome {
  std::vector<std::vector<std::string>> requests;
  std::vector<bool> inline_flags;
  ParseError error = ParseError::kNone;
  std::string message;
};

void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "invariant broken: %s\n", what);
  std::abort();
}

// splitmix64: a deterministic stream for the chunk sizes.
uint64_t NextRandom(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::string Expand(std::string_view data) {
  std::string out;
  for (size_t i = 0; i < data.size() && out.size() < kMaxExpanded; ++i) {
    if (static_cast<uint8_t>(data[i]) == 0xFE && i + 1 < data.size()) {
      const size_t n = static_cast<size_t>(static_cast<uint8_t>(data[++i])) * 512;
      out.append(std::min(n, kMaxExpanded - out.size()), out.empty() ? 'a' : out.back());
    } else {
      out.push_back(data[i]);
    }
  }
  return out;
}

void TakeOne(RequestParser& parser, const Config& config, Outcome& out) {
  const ParserLimits limits = parser.limits();
  Request r;
  parser.TakeRequest(r);
  Check(!parser.has_request(), "a request is still ready after TakeRequest");
  Check(!r.empty(), "an empty request was delivered");
  std::vector<std::string> args;
  size_t total = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    args.emplace_back(r[i]);
    total += r[i].size();
    Check(r.TakeBytes(i).view() == r[i], "TakeBytes differs from the argument");
    if (!r.is_inline()) {
      Check(static_cast<int64_t>(r[i].size()) <= limits.max_bulk_length, "bulk over the limit");
      Check(limits.authenticated || static_cast<int64_t>(r[i].size()) <= kUnauthenticatedMaxBulk,
            "unauthenticated bulk over its limit");
    }
  }
  Check(total == r.payload_bytes(), "payload_bytes differs from the argument sizes");
  if (!r.is_inline()) {
    Check(static_cast<int64_t>(total) <= limits.max_request_bytes, "request over the limit");
    Check(limits.authenticated || static_cast<int64_t>(r.size()) <= kUnauthenticatedMaxArgs,
          "unauthenticated request with too many arguments");
  }
  out.requests.push_back(std::move(args));
  out.inline_flags.push_back(r.is_inline());
  if (config.authenticate_after_first && !limits.authenticated) {
    ParserLimits next = limits;
    next.authenticated = true;
    parser.set_limits(next);
  }
}

// After Feed: a ready request or an error may leave input behind; anything else may not.
void CheckFeed(const RequestParser& parser, size_t consumed, size_t offered) {
  Check(consumed <= offered, "consumed more than offered");
  if (!parser.has_request() && parser.error() == ParseError::kNone) {
    Check(consumed == offered, "an incomplete request left input unconsumed");
  }
}

void RecordError(RequestParser& parser, std::string_view rest, Outcome& out) {
  out.error = parser.error();
  out.message = parser.ErrorMessage();
  Check(!out.message.empty(), "an error without a message");
  Check(parser.Feed(rest) == 0, "an errored parser consumed input");
  Check(!parser.has_request(), "an errored parser produced a request");
  Check(parser.error() == out.error, "the error changed");
}

Outcome ParseWhole(std::string_view data, const Config& config) {
  RequestParser parser(config.limits);
  Outcome out;
  size_t pos = 0;
  while (true) {
    const size_t n = parser.Feed(data.substr(pos));
    CheckFeed(parser, n, data.size() - pos);
    pos += n;
    if (parser.has_request()) {
      Check(parser.Feed(data.substr(pos)) == 0, "fed past a ready request");
      TakeOne(parser, config, out);
      continue;
    }
    if (parser.error() != ParseError::kNone) RecordError(parser, data.substr(pos), out);
    Check(parser.ErrorMessage().empty() == (parser.error() == ParseError::kNone),
          "ErrorMessage disagrees with error()");
    return out;
  }
}

Outcome ParseChunked(std::string_view data, const Config& config) {
  RequestParser parser(config.limits);
  Outcome out;
  uint64_t rng = config.seed;
  size_t pos = 0;       // next byte of `data` not yet offered
  std::string pending;  // offered bytes the parser left behind
  while (true) {
    if (parser.has_request()) {
      TakeOne(parser, config, out);
      continue;
    }
    if (parser.error() != ParseError::kNone) {
      RecordError(parser, pending, out);
      return out;
    }
    if (!pending.empty()) {
      const size_t n = parser.Feed(pending);
      CheckFeed(parser, n, pending.size());
      pending.erase(0, n);
      continue;
    }
    if (pos == data.size()) return out;
    size_t chunk = data.size() - pos;
    if (config.max_chunk != 0) {
      const size_t max_chunk = std::max(config.max_chunk, data.size() / kMaxChunks);
      chunk = std::min(chunk, 1 + static_cast<size_t>(NextRandom(rng) % max_chunk));
    }
    auto target = parser.DirectTarget();
    if (config.direct && !target.empty() && (NextRandom(rng) & 3) != 0) {
      const size_t n = std::min(chunk, target.size());
      std::memcpy(target.data(), data.data() + pos, n);
      const size_t before = parser.pending_bytes();
      parser.CommitDirect(n);
      Check(parser.has_request() || parser.pending_bytes() == before + n ||
                parser.DirectTarget().empty(),
            "CommitDirect did not account for its bytes");
      pos += n;
      continue;
    }
    pending.assign(data.substr(pos, chunk));
    pos += chunk;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size < 2) return 0;
  const uint8_t flags = bytes[0];
  const uint8_t limits = bytes[1];
  std::string_view raw(reinterpret_cast<const char*>(bytes) + 2, size - 2);

  Config config;
  config.limits.authenticated = (flags & 1) == 0;
  config.authenticate_after_first = (flags & 2) != 0;
  config.direct = (flags & 4) != 0;
  config.max_chunk = kChunkSizes[flags >> 4];
  config.limits.max_bulk_length = kBulkLimits[limits >> 4];
  config.limits.max_request_bytes = kRequestLimits[limits & 15];
  const std::string data = (flags & 8) != 0 ? Expand(raw) : std::string(raw);
  // FNV-1a of the input seeds the chunk sizes, so every input replays the same way.
  config.seed = 14695981039346656037ULL;
  for (size_t i = 0; i < size; ++i) config.seed = (config.seed ^ bytes[i]) * 1099511628211ULL;

  const Outcome whole = ParseWhole(data, config);
  const Outcome chunked = ParseChunked(data, config);
  Check(whole.requests == chunked.requests, "chunking changed the requests");
  Check(whole.inline_flags == chunked.inline_flags, "chunking changed the inline flags");
  Check(whole.error == chunked.error, "chunking changed the error");
  Check(whole.message == chunked.message, "chunking changed the error message");
  return 0;
}
