// libFuzzer target for ReplyParser and ReplyWriter. First it reads the input as replies, whole and
// in chunks, and aborts if the two readings differ or a reply breaks the reader's limits. Then it
// builds a reply tree from the same bytes, writes it with ReplyWriter in RESP2 or RESP3, and
// checks that the reader gets back exactly what the writer meant, after Redis's RESP2 downgrades.
//
// Input layout: byte 0 picks the reader limits and chunk sizes (bits 0-1 depth, 2-3 bulk length,
// 4-5 aggregate and line length, 6-7 chunk size); the rest is the data.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "common/numbers.h"
#include "protocol/reply_writer.h"
#include "protocol/resp_value.h"

namespace {

using prefixd::Bytes;
using prefixd::FormatDouble;
using prefixd::protocol::ReaderLimits;
using prefixd::protocol::ReadResult;
using prefixd::protocol::ReadStatus;
using prefixd::protocol::ReplyParser;
using prefixd::protocol::ReplyWriter;
using prefixd::protocol::RespType;
using prefixd::protocol::RespValue;
using prefixd::protocol::ToDebugString;

constexpr int kDepths[4] = {1, 2, 8, 64};
constexpr int64_t kBulkLimits[4] = {0, 5, 100, int64_t{512} << 20};
constexpr int64_t kAggregateLimits[4] = {0, 3, 100, int64_t{1} << 32};
constexpr size_t kLineLimits[4] = {0, 4, 100, 1 << 20};
constexpr size_t kChunkSizes[4] = {1, 3, 17, 0};
// Long inputs are cut into at most about this many chunks, to keep runs fast.
constexpr size_t kMaxChunks = 512;

void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "invariant broken: %s\n", what);
  std::abort();
}

uint64_t NextRandom(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// ---- Reading arbitrary input -------------------------------------------------------------------

struct ReadOutcome {
  std::vector<RespValue> values;
  std::string error;  // empty unless the input was malformed
};

int NestingDepth(const RespValue& v) {
  int deepest = 0;
  for (const RespValue& c : v.children) deepest = std::max(deepest, NestingDepth(c));
  // Empty aggregates never occupy a level of the reader's stack.
  return v.children.empty() ? 0 : deepest + 1;
}

void CheckShape(const RespValue& v, const ReaderLimits& limits) {
  switch (v.type) {
    case RespType::kBulk:
    case RespType::kVerbatim:
      Check(static_cast<int64_t>(v.str.size()) <= limits.max_bulk_length, "payload over limit");
      break;
    case RespType::kMap:
      Check(v.children.size() % 2 == 0, "a map with an odd number of children");
      break;
    case RespType::kAttribute:
      Check(v.children.size() % 2 == 1, "an attribute without its annotated reply");
      break;
    default:
      break;
  }
  if (v.type == RespType::kVerbatim) Check(v.format.size() == 3, "verbatim format not 3 bytes");
  for (const RespValue& c : v.children) CheckShape(c, limits);
}

// Takes a finished value, checking what the reader promised about it.
void Collect(ReplyParser& reader, const ReaderLimits& limits, ReadOutcome& out) {
  Check(reader.has_value(), "kComplete without a value");
  RespValue v = reader.TakeValue();
  Check(!reader.has_value(), "a value is still ready after TakeValue");
  Check(NestingDepth(v) <= limits.max_depth, "nesting deeper than max_depth");
  CheckShape(v, limits);
  Check(!ToDebugString(v).empty(), "an empty debug string");
  out.values.push_back(std::move(v));
}

void CheckResult(const ReplyParser& reader, ReadResult r, size_t offered) {
  Check(r.consumed <= offered, "consumed more than offered");
  if (r.status == ReadStatus::kNeedMore) Check(r.consumed == offered, "need-more left input");
  Check((r.status == ReadStatus::kMalformed) == reader.failed(), "status disagrees with failed()");
}

void RecordError(ReplyParser& reader, ReadOutcome& out) {
  out.error = reader.error();
  Check(!out.error.empty(), "malformed without an error");
  ReadResult again = reader.Feed("+OK\r\n");
  Check(again.status == ReadStatus::kMalformed && again.consumed == 0, "a failed reader went on");
}

ReadOutcome ReadWhole(std::string_view data, const ReaderLimits& limits) {
  ReplyParser reader(limits);
  ReadOutcome out;
  size_t pos = 0;
  while (pos < data.size()) {
    ReadResult r = reader.Feed(data.substr(pos));
    CheckResult(reader, r, data.size() - pos);
    pos += r.consumed;
    if (r.status == ReadStatus::kComplete) {
      Check(reader.Feed(data.substr(pos)).consumed == 0, "read past a complete value");
      Collect(reader, limits, out);
    } else if (r.status == ReadStatus::kMalformed) {
      RecordError(reader, out);
      break;
    }
  }
  return out;
}

ReadOutcome ReadChunked(std::string_view data, const ReaderLimits& limits, size_t max_chunk,
                        uint64_t seed) {
  ReplyParser reader(limits);
  ReadOutcome out;
  std::string pending;
  size_t pos = 0;
  while (pos < data.size() || !pending.empty()) {
    if (pending.empty()) {
      size_t chunk = data.size() - pos;
      if (max_chunk != 0) {
        const size_t limit = std::max(max_chunk, data.size() / kMaxChunks);
        chunk = std::min(chunk, 1 + static_cast<size_t>(NextRandom(seed) % limit));
      }
      pending.assign(data.substr(pos, chunk));
      pos += chunk;
    }
    ReadResult r = reader.Feed(pending);
    CheckResult(reader, r, pending.size());
    pending.erase(0, r.consumed);
    if (r.status == ReadStatus::kComplete) {
      Collect(reader, limits, out);
    } else if (r.status == ReadStatus::kMalformed) {
      RecordError(reader, out);
      break;
    }
  }
  return out;
}

// ---- Writer round trip -------------------------------------------------------------------------

class ByteSource {
 public:
  explicit ByteSource(std::string_view data) : data_(data) {}
  bool empty() const { return pos_ >= data_.size(); }
  uint8_t Byte() { return empty() ? 0 : static_cast<uint8_t>(data_[pos_++]); }
  uint64_t Bits64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | Byte();
    return v;
  }
  std::string Text(size_t max) {
    size_t n = std::min<size_t>(Byte() % (max + 1), data_.size() - std::min(pos_, data_.size()));
    std::string s(data_.substr(pos_, n));
    pos_ += n;
    return s;
  }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

// What to write; leaves first so that a spent budget can pick among them alone.
enum class Kind {
  kSimple,
  kError,
  kInteger,
  kBulk,
  kLargeBulk,
  kNull,
  kNullArray,
  kDouble,
  kBool,
  kVerbatim,
  kBignum,
  kArray,
  kMap,
  kSet,
  kPush,
  kAttribute,
};
constexpr int kLeafKinds = static_cast<int>(Kind::kBignum) + 1;
constexpr int kAllKinds = static_cast<int>(Kind::kAttribute) + 1;

struct Node {
  Kind kind = Kind::kNull;
  std::string text;
  std::string format;
  int64_t integer = 0;
  double number = 0;
  Bytes large;
  std::vector<Node> children;  // map and attribute: key, value pairs (attribute: then the reply)
};

struct Budget {
  int nodes = 64;
  int large = 3;
};

Node Build(ByteSource& src, int depth, Budget& budget) {
  --budget.nodes;
  const bool leaf = depth >= 6 || budget.nodes <= 0 || src.empty();
  Node n;
  n.kind = static_cast<Kind>(src.Byte() % (leaf ? kLeafKinds : kAllKinds));
  switch (n.kind) {
    case Kind::kSimple:
      n.text = src.Text(20);
      // Simple strings carry no line breaks; callers of ReplyWriter::Simple guarantee it.
      std::replace(n.text.begin(), n.text.end(), '\r', ' ');
      std::replace(n.text.begin(), n.text.end(), '\n', ' ');
      break;
    case Kind::kError:
    case Kind::kBulk:
      n.text = src.Text(40);
      break;
    case Kind::kLargeBulk: {
      if (budget.large-- <= 0) {
        n.kind = Kind::kBulk;
        break;
      }
      const size_t size = ReplyWriter::kReferenceThreshold + src.Byte() * 64 + src.Byte();
      n.large = Bytes::Allocate(size);
      std::memset(n.large.mutable_data(), src.Byte(), size);
      break;
    }
    case Kind::kInteger:
      n.integer = static_cast<int64_t>(src.Bits64());
      break;
    case Kind::kDouble: {
      const uint64_t bits = src.Bits64();
      std::memcpy(&n.number, &bits, sizeof bits);
      break;
    }
    case Kind::kBool:
      n.integer = src.Byte() & 1;
      break;
    case Kind::kVerbatim:
      n.format = {static_cast<char>(src.Byte()), static_cast<char>(src.Byte()),
                  static_cast<char>(src.Byte())};
      n.text = src.Text(40);
      break;
    case Kind::kBignum: {
      if (src.Byte() & 1) n.text.push_back('-');
      const size_t digits = 1 + src.Byte() % 40;
      for (size_t i = 0; i < digits; ++i) {
        n.text.push_back(static_cast<char>('0' + src.Byte() % 10));
      }
      break;
    }
    case Kind::kNull:
    case Kind::kNullArray:
      break;
    case Kind::kArray:
    case Kind::kSet:
    case Kind::kPush: {
      const int count = src.Byte() % 5;
      for (int i = 0; i < count; ++i) n.children.push_back(Build(src, depth + 1, budget));
      break;
    }
    case Kind::kMap:
    case Kind::kAttribute: {
      const int pairs = src.Byte() % 4;
      for (int i = 0; i < 2 * pairs; ++i) n.children.push_back(Build(src, depth + 1, budget));
      if (n.kind == Kind::kAttribute) n.children.push_back(Build(src, depth + 1, budget));
      break;
    }
  }
  return n;
}

void Write(const Node& n, ReplyWriter& w) {
  const bool resp3 = w.protocol() >= 3;
  switch (n.kind) {
    case Kind::kSimple:
      w.Simple(n.text);
      break;
    case Kind::kError:
      w.Error(n.text);
      break;
    case Kind::kInteger:
      w.Integer(n.integer);
      break;
    case Kind::kBulk:
      w.Bulk(n.text);
      break;
    case Kind::kLargeBulk:
      w.Bulk(n.large);
      break;
    case Kind::kNull:
      w.Null();
      break;
    case Kind::kNullArray:
      w.NullArray();
      break;
    case Kind::kDouble:
      w.Double(n.number);
      break;
    case Kind::kBool:
      w.Bool(n.integer != 0);
      break;
    case Kind::kVerbatim:
      w.Verbatim(n.text, n.format);
      break;
    case Kind::kBignum:
      // The writer has no verb for big numbers; RESP2 has no type for them either.
      if (resp3) {
        w.Raw("(" + n.text + "\r\n");
      } else {
        w.Bulk(n.text);
      }
      break;
    case Kind::kArray:
      w.ArrayLen(n.children.size());
      break;
    case Kind::kMap:
      w.MapLen(n.children.size() / 2);
      break;
    case Kind::kSet:
      w.SetLen(n.children.size());
      break;
    case Kind::kPush:
      if (resp3) {
        w.Raw(">" + std::to_string(n.children.size()) + "\r\n");
      } else {
        w.ArrayLen(n.children.size());
      }
      break;
    case Kind::kAttribute:
      // RESP2 drops attributes and keeps the reply they annotate.
      if (!resp3) return Write(n.children.back(), w);
      w.Raw("|" + std::to_string(n.children.size() / 2) + "\r\n");
      break;
  }
  for (const Node& c : n.children) Write(c, w);
}

// The reply a reader should see for `n` written in `protocol`.
RespValue Expected(const Node& n, int protocol) {
  const bool resp3 = protocol >= 3;
  std::vector<RespValue> children;
  for (const Node& c : n.children) children.push_back(Expected(c, protocol));
  switch (n.kind) {
    case Kind::kSimple:
      return RespValue::Simple(n.text);
    case Kind::kError: {
      std::string text = n.text;
      std::replace(text.begin(), text.end(), '\r', ' ');
      std::replace(text.begin(), text.end(), '\n', ' ');
      return RespValue::Error(text);
    }
    case Kind::kInteger:
      return RespValue::Integer(n.integer);
    case Kind::kBulk:
      return RespValue::Bulk(n.text);
    case Kind::kLargeBulk:
      return RespValue::Bulk(n.large.view());
    case Kind::kNull:
    case Kind::kNullArray:
      return RespValue::Null();
    case Kind::kDouble:
      return resp3 ? RespValue::Double(n.number) : RespValue::Bulk(FormatDouble(n.number));
    case Kind::kBool:
      return resp3 ? RespValue::Boolean(n.integer != 0) : RespValue::Integer(n.integer);
    case Kind::kVerbatim:
      return resp3 ? RespValue::Verbatim(n.format, n.text) : RespValue::Bulk(n.text);
    case Kind::kBignum:
      return resp3 ? RespValue::Bignum(n.text) : RespValue::Bulk(n.text);
    case Kind::kArray:
      return RespValue::Array(std::move(children));
    case Kind::kMap:
      return resp3 ? RespValue::Map(std::move(children)) : RespValue::Array(std::move(children));
    case Kind::kSet:
      return resp3 ? RespValue::Set(std::move(children)) : RespValue::Array(std::move(children));
    case Kind::kPush:
      return resp3 ? RespValue::Push(std::move(children)) : RespValue::Array(std::move(children));
    case Kind::kAttribute: {
      if (!resp3) return std::move(children.back());
      RespValue annotated = std::move(children.back());
      children.pop_back();
      return RespValue::Attribute(std::move(children), std::move(annotated));
    }
  }
  return RespValue::Null();
}

void CollectLarge(const Node& n, std::vector<const uint8_t*>& out) {
  if (n.kind == Kind::kLargeBulk) out.push_back(n.large.data());
  for (const Node& c : n.children) CollectLarge(c, out);
}

void RoundTrip(std::string_view data, size_t max_chunk, uint64_t seed) {
  ByteSource src(data);
  const int protocol = (src.Byte() & 1) ? 3 : 2;
  Budget budget;
  std::vector<Node> replies;
  const int count = 1 + src.Byte() % 3;
  for (int i = 0; i < count; ++i) replies.push_back(Build(src, 0, budget));

  ReplyWriter writer(protocol);
  for (const Node& n : replies) Write(n, writer);
  std::string wire;
  std::vector<const uint8_t*> starts;
  for (auto b : writer.Buffers()) {
    wire.append(reinterpret_cast<const char*>(b.data()), b.size());
    starts.push_back(b.data());
  }
  Check(wire.size() == writer.pending_bytes(), "pending_bytes differs from the buffers");
  Check(writer.held_bytes() >= writer.pending_bytes(), "holds less than it will send");
  std::vector<const uint8_t*> large;
  for (const Node& n : replies) CollectLarge(n, large);
  for (const uint8_t* p : large) {
    // RESP2 drops attributes, and with them any large value inside one.
    if (protocol >= 3) {
      Check(std::find(starts.begin(), starts.end(), p) != starts.end(), "a large value was copied");
    }
  }

  ReadOutcome read = ReadChunked(wire, ReaderLimits{}, max_chunk, seed);
  if (!read.error.empty()) {
    std::fprintf(stderr, "reader rejected writer output: %s\n", read.error.c_str());
    std::abort();
  }
  Check(read.values.size() == replies.size(), "round trip changed the number of replies");
  for (size_t i = 0; i < replies.size(); ++i) {
    const RespValue expected = Expected(replies[i], protocol);
    if (!(read.values[i] == expected)) {
      std::fprintf(stderr, "RESP%d round trip differs:\n  wrote %s\n  read  %s\n", protocol,
                   ToDebugString(expected).c_str(), ToDebugString(read.values[i]).c_str());
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size < 1) return 0;
  const uint8_t config = bytes[0];
  std::string_view data(reinterpret_cast<const char*>(bytes) + 1, size - 1);

  ReaderLimits limits;
  limits.max_depth = kDepths[config & 3];
  limits.max_bulk_length = kBulkLimits[(config >> 2) & 3];
  limits.max_aggregate_length = kAggregateLimits[(config >> 4) & 3];
  limits.max_line_length = kLineLimits[(config >> 4) & 3];
  const size_t max_chunk = kChunkSizes[config >> 6];
  uint64_t seed = 14695981039346656037ULL;
  for (size_t i = 0; i < size; ++i) seed = (seed ^ bytes[i]) * 1099511628211ULL;

  const ReadOutcome whole = ReadWhole(data, limits);
  const ReadOutcome chunked = ReadChunked(data, limits, max_chunk, seed);
  Check(whole.error == chunked.error, "chunking changed the error");
  Check(whole.values == chunked.values, "chunking changed the values");

  RoundTrip(data, max_chunk, seed);
  return 0;
}
