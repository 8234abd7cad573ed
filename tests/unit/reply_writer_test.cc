// Tests of ReplyWriter's exact bytes in RESP2 and RESP3, of ReplyParser on its own, and of
// writer -> reader round trips for nested replies.

#include "protocol/reply_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "protocol/resp_value.h"

namespace prefixd::protocol {

// Lets gtest print replies readably in failure messages.
void PrintTo(const RespValue& value, std::ostream* os) { *os << ToDebugString(value); }

namespace {

std::string Flatten(const ReplyWriter& writer) {
  std::string out;
  for (auto b : writer.Buffers()) out.append(reinterpret_cast<const char*>(b.data()), b.size());
  return out;
}

// Runs `write` on a writer speaking `protocol` and returns the bytes it queued.
template <typename F>
std::string Written(int protocol, F write) {
  ReplyWriter writer(protocol);
  write(writer);
  EXPECT_EQ(writer.pending_bytes(), Flatten(writer).size());
  return Flatten(writer);
}

// Reads every reply in `bytes`, feeding it in chunks of `chunk` bytes (0: all at once).
std::vector<RespValue> ReadAll(std::string_view bytes, size_t chunk = 0, ReaderLimits limits = {}) {
  ReplyParser reader(limits);
  std::vector<RespValue> out;
  std::string pending;
  size_t pos = 0;
  while (pos < bytes.size() || !pending.empty()) {
    if (pos < bytes.size()) {
      const size_t n = chunk == 0 ? bytes.size() : std::min(chunk, bytes.size() - pos);
      pending.append(bytes.substr(pos, n));
      pos += n;
    }
    while (!pending.empty()) {
      ReadResult r = reader.Feed(pending);
      pending.erase(0, r.consumed);
      if (r.status == ReadStatus::kComplete) {
        out.push_back(reader.TakeValue());
      } else {
        EXPECT_EQ(r.status, ReadStatus::kNeedMore) << reader.error();
        if (r.status == ReadStatus::kMalformed) return out;
        EXPECT_TRUE(pending.empty());
      }
    }
  }
  EXPECT_FALSE(reader.has_value());
  return out;
}

// Reads exactly one reply that fills `bytes`.
RespValue ReadOne(std::string_view bytes) {
  ReplyParser reader;
  ReadResult r = reader.Feed(bytes);
  EXPECT_EQ(r.status, ReadStatus::kComplete) << reader.error();
  EXPECT_EQ(r.consumed, bytes.size());
  return reader.TakeValue();
}

// The error the reader reports for `bytes`, or "" when it does not fail.
std::string MalformedError(std::string_view bytes, ReaderLimits limits = {}) {
  ReplyParser reader(limits);
  ReadResult r = reader.Feed(bytes);
  if (r.status != ReadStatus::kMalformed) return "";
  EXPECT_TRUE(reader.failed());
  return reader.error();
}

// ---- Exact bytes -------------------------------------------------------------------------------

TEST(ReplyWriterTest, ScalarsAreTheSameInBothProtocols) {
  for (int protocol : {2, 3}) {
    SCOPED_TRACE(protocol);
    EXPECT_EQ(Written(protocol, [](ReplyWriter& w) { w.Simple("OK"); }), "+OK\r\n");
    EXPECT_EQ(Written(protocol, [](ReplyWriter& w) { w.Error("ERR syntax error"); }),
              "-ERR syntax error\r\n");
    EXPECT_EQ(Written(protocol, [](ReplyWriter& w) { w.Integer(0); }), ":0\r\n");
    EXPECT_EQ(Written(protocol, [](ReplyWriter& w) { w.Integer(-42); }), ":-42\r\n");
    EXPECT_EQ(
        Written(protocol, [](ReplyWriter& w) { w.Integer(std::numeric_limits<int64_t>::min()); }),
        ":-9223372036854775808\r\n");
    EXPECT_EQ(
        Written(protocol, [](ReplyWriter& w) { w.Integer(std::numeric_limits<int64_t>::max()); }),
        ":9223372036854775807\r\n");
    EXPECT_EQ(Written(protocol, [](ReplyWriter& w) { w.Bulk("hello"); }), "$5\r\nhello\r\n");
    EXPECT_EQ(Written(protocol, [](ReplyWriter& w) { w.Bulk(""); }), "$0\r\n\r\n");
    EXPECT_EQ(Written(protocol, [](ReplyWriter& w) { w.Bulk(std::string_view("a\r\nb", 4)); }),
              "$4\r\na\r\nb\r\n");
    EXPECT_EQ(Written(protocol, [](ReplyWriter& w) { w.ArrayLen(3); }), "*3\r\n");
    EXPECT_EQ(Written(protocol, [](ReplyWriter& w) { w.ArrayLen(0); }), "*0\r\n");
    EXPECT_EQ(Written(protocol, [](ReplyWriter& w) { w.Raw("|1\r\n+k\r\n+v\r\n"); }),
              "|1\r\n+k\r\n+v\r\n");
  }
}

TEST(ReplyWriterTest, ErrorTextLosesLineBreaks) {
  EXPECT_EQ(Written(2, [](ReplyWriter& w) { w.Error("ERR bad\r\nthing\nhere\r"); }),
            "-ERR bad  thing here \r\n");
}

TEST(ReplyWriterTest, Null) {
  EXPECT_EQ(Written(2, [](ReplyWriter& w) { w.Null(); }), "$-1\r\n");
  EXPECT_EQ(Written(3, [](ReplyWriter& w) { w.Null(); }), "_\r\n");
  EXPECT_EQ(Written(2, [](ReplyWriter& w) { w.NullArray(); }), "*-1\r\n");
  EXPECT_EQ(Written(3, [](ReplyWriter& w) { w.NullArray(); }), "_\r\n");
}

TEST(ReplyWriterTest, MapDowngradesToFlatArray) {
  EXPECT_EQ(Written(3, [](ReplyWriter& w) { w.MapLen(2); }), "%2\r\n");
  EXPECT_EQ(Written(2, [](ReplyWriter& w) { w.MapLen(2); }), "*4\r\n");
  EXPECT_EQ(Written(2, [](ReplyWriter& w) { w.MapLen(0); }), "*0\r\n");
}

TEST(ReplyWriterTest, SetDowngradesToArray) {
  EXPECT_EQ(Written(3, [](ReplyWriter& w) { w.SetLen(3); }), "~3\r\n");
  EXPECT_EQ(Written(2, [](ReplyWriter& w) { w.SetLen(3); }), "*3\r\n");
}

TEST(ReplyWriterTest, DoubleDowngradesToBulk) {
  EXPECT_EQ(Written(3, [](ReplyWriter& w) { w.Double(3.141); }), ",3.141\r\n");
  EXPECT_EQ(Written(2, [](ReplyWriter& w) { w.Double(3.141); }), "$5\r\n3.141\r\n");
  EXPECT_EQ(Written(3, [](ReplyWriter& w) { w.Double(10); }), ",10\r\n");
  // Redis 7.0 formats with %.17g.
  EXPECT_EQ(Written(3, [](ReplyWriter& w) { w.Double(0.1); }), ",0.10000000000000001\r\n");
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(Written(3, [&](ReplyWriter& w) { w.Double(inf); }), ",inf\r\n");
  EXPECT_EQ(Written(3, [&](ReplyWriter& w) { w.Double(-inf); }), ",-inf\r\n");
  EXPECT_EQ(Written(2, [&](ReplyWriter& w) { w.Double(inf); }), "$3\r\ninf\r\n");
  EXPECT_EQ(Written(2, [&](ReplyWriter& w) { w.Double(-inf); }), "$4\r\n-inf\r\n");
}

TEST(ReplyWriterTest, BoolDowngradesToInteger) {
  EXPECT_EQ(Written(3, [](ReplyWriter& w) { w.Bool(true); }), "#t\r\n");
  EXPECT_EQ(Written(3, [](ReplyWriter& w) { w.Bool(false); }), "#f\r\n");
  EXPECT_EQ(Written(2, [](ReplyWriter& w) { w.Bool(true); }), ":1\r\n");
  EXPECT_EQ(Written(2, [](ReplyWriter& w) { w.Bool(false); }), ":0\r\n");
}

TEST(ReplyWriterTest, VerbatimDowngradesToBulkWithoutFormat) {
  // The INFO shape captured from Redis: the length counts "txt:".
  EXPECT_EQ(Written(3, [](ReplyWriter& w) { w.Verbatim("# Keyspace\r\n"); }),
            "=16\r\ntxt:# Keyspace\r\n\r\n");
  EXPECT_EQ(Written(2, [](ReplyWriter& w) { w.Verbatim("# Keyspace\r\n"); }),
            "$12\r\n# Keyspace\r\n\r\n");
  EXPECT_EQ(Written(3, [](ReplyWriter& w) { w.Verbatim("*hi*", "mkd"); }), "=8\r\nmkd:*hi*\r\n");
  EXPECT_EQ(Written(2, [](ReplyWriter& w) { w.Verbatim("*hi*", "mkd"); }), "$4\r\n*hi*\r\n");
}

TEST(ReplyWriterTest, RepliesQueueInOrder) {
  std::string out = Written(3, [](ReplyWriter& w) {
    w.MapLen(1);
    w.Bulk("k");
    w.ArrayLen(2);
    w.Integer(1);
    w.Null();
    w.Simple("OK");
  });
  EXPECT_EQ(out, "%1\r\n$1\r\nk\r\n*2\r\n:1\r\n_\r\n+OK\r\n");
}

TEST(ReplyWriterTest, ProtocolCanChange) {
  ReplyWriter writer;
  EXPECT_EQ(writer.protocol(), 2);
  writer.Null();
  writer.set_protocol(3);
  EXPECT_EQ(writer.protocol(), 3);
  writer.Null();
  EXPECT_EQ(Flatten(writer), "$-1\r\n_\r\n");
}

TEST(ReplyWriterTest, ClearEmptiesTheWriter) {
  ReplyWriter writer;
  writer.Bulk("abc");
  writer.Bulk(Bytes::CopyOf(std::string(20000, 'x')));
  writer.Simple("after");
  EXPECT_FALSE(writer.empty());
  writer.Clear();
  EXPECT_TRUE(writer.empty());
  EXPECT_EQ(writer.pending_bytes(), 0u);
  EXPECT_EQ(writer.held_bytes(), 0u);
  EXPECT_TRUE(writer.Buffers().empty());
  writer.Simple("OK");
  EXPECT_EQ(Flatten(writer), "+OK\r\n");

  ReplyWriter reference_first;
  reference_first.Bulk(Bytes::CopyOf(std::string(20000, 'x')));
  reference_first.Clear();
  EXPECT_TRUE(reference_first.Buffers().empty());
  reference_first.Integer(7);
  EXPECT_EQ(Flatten(reference_first), ":7\r\n");
}

TEST(ReplyWriterTest, LargeBytesAreReferencedNotCopied) {
  const Bytes value = Bytes::CopyOf(std::string(ReplyWriter::kReferenceThreshold, 'v'));
  ReplyWriter writer;
  writer.Simple("OK");
  writer.Bulk(value);
  writer.Integer(1);
  auto buffers = writer.Buffers();
  ASSERT_EQ(buffers.size(), 3u);
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(buffers[0].data()), buffers[0].size()),
            "+OK\r\n$16384\r\n");
  EXPECT_EQ(buffers[1].data(), value.data());
  EXPECT_EQ(buffers[1].size(), value.size());
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(buffers[2].data()), buffers[2].size()),
            "\r\n:1\r\n");
  EXPECT_EQ(writer.pending_bytes(), 5 + 8 + value.size() + 2 + 4);
  // The referenced value counts as held: it stays pinned until the reply is written.
  EXPECT_EQ(writer.held_bytes(), writer.pending_bytes());
}

// Counts up from `first`, one byte at a time, as the writer asks for them.
class CountingProducer : public ReplyProducer {
 public:
  explicit CountingProducer(uint64_t size, int* asked) : size_(size), asked_(asked) {}
  void Produce(std::span<uint8_t> out) override {
    ++*asked_;
    EXPECT_LE(made_ + out.size(), size_);
    for (auto& b : out) b = static_cast<uint8_t>(made_++ % 251);
  }
  size_t pinned_bytes() const override { return 100; }

 private:
  uint64_t size_;
  uint64_t made_ = 0;
  int* asked_;
};

std::string Drain(ReplyWriter& writer, size_t* most = nullptr) {
  std::string out;
  std::vector<std::span<const uint8_t>> run;
  while (writer.NextWrite(run)) {
    size_t bytes = 0;
    for (auto b : run) {
      out.append(reinterpret_cast<const char*>(b.data()), b.size());
      bytes += b.size();
    }
    if (most != nullptr) *most = std::max(*most, bytes);
  }
  return out;
}

TEST(ReplyWriterTest, ProducedBulkIsMadeOneWindowAtATime) {
  const uint64_t size = 3 * ReplyWriter::kProduceWindow + 5;
  int asked = 0;
  ReplyWriter writer;
  writer.Simple("OK");
  writer.BulkProduced(size, std::make_unique<CountingProducer>(size, &asked));
  writer.Integer(1);
  EXPECT_EQ(asked, 0);  // nothing is made before it is written
  EXPECT_EQ(writer.pending_bytes(), 5 + 10 + size + 2 + 4);
  EXPECT_EQ(writer.held_bytes(), 5 + 10 + 2 + 4 + 100u);  // copied bytes + what it pins
  size_t most = 0;
  std::string out = Drain(writer, &most);
  EXPECT_EQ(asked, 4);
  EXPECT_LE(most, ReplyWriter::kProduceWindow + 64);
  ASSERT_EQ(out.size(), writer.pending_bytes());
  EXPECT_EQ(out.substr(0, 15), "+OK\r\n$3145733\r\n");
  for (uint64_t i = 0; i < size; i += 4099) {
    ASSERT_EQ(static_cast<uint8_t>(out[15 + i]), i % 251) << i;
  }
  EXPECT_EQ(out.substr(15 + size), "\r\n:1\r\n");
  EXPECT_EQ(writer.held_bytes(), 5 + 10 + 2 + 4 + ReplyWriter::kProduceWindow);  // the scratch
  writer.Clear();
  EXPECT_EQ(writer.held_bytes(), 0u);
}

// A producer that says when it is destroyed (and so has let go of what it pinned).
class TrackedProducer : public ReplyProducer {
 public:
  explicit TrackedProducer(bool* destroyed) : destroyed_(destroyed) {}
  ~TrackedProducer() override { *destroyed_ = true; }
  void Produce(std::span<uint8_t> out) override { std::fill(out.begin(), out.end(), 'p'); }
  size_t pinned_bytes() const override { return 5000; }

 private:
  bool* destroyed_;
};

TEST(ReplyWriterTest, RewindDropsAPartialReplyAcrossEveryPieceKind) {
  ReplyWriter writer;
  writer.Simple("OK");
  const auto mark = writer.GetMark();
  const size_t pending = writer.pending_bytes();
  const size_t held = writer.held_bytes();
  // A failing request's partial reply: copied bytes in the same chunk, a referenced value, a
  // produced body and a large copied bulk that grows a chunk far past kOwnedChunk.
  const Bytes stored = Bytes::CopyOf(std::string(ReplyWriter::kReferenceThreshold, 'r'));
  bool destroyed = false;
  writer.ArrayLen(3);
  writer.Bulk(stored);
  writer.BulkProduced(3 * ReplyWriter::kProduceWindow,
                      std::make_unique<TrackedProducer>(&destroyed));
  writer.Bulk(std::string(4 * ReplyWriter::kOwnedChunk, 'c'));
  EXPECT_GT(writer.held_bytes(), held + stored.size() + 5000);

  writer.RewindTo(mark);
  EXPECT_TRUE(destroyed);  // the produced piece's pins are released now, not at Clear
  EXPECT_EQ(writer.pending_bytes(), pending);
  EXPECT_EQ(writer.held_bytes(), held);
  writer.Error("ERR failed");
  EXPECT_EQ(writer.held_bytes(), writer.pending_bytes());
  EXPECT_EQ(Drain(writer), "+OK\r\n-ERR failed\r\n");
}

TEST(ReplyWriterTest, RewindKeepsWhatCameBeforeTheMark) {
  bool destroyed = false;
  ReplyWriter writer;
  writer.Integer(1);
  writer.BulkProduced(10, std::make_unique<TrackedProducer>(&destroyed));
  const Bytes stored = Bytes::CopyOf(std::string(20000, 'r'));
  writer.Bulk(stored);
  const auto mark = writer.GetMark();
  const size_t held = writer.held_bytes();
  EXPECT_EQ(held, 4 + 5 + 2 + 5000 + 8 + stored.size() + 2);
  writer.Simple("partial");
  writer.Bulk(stored);
  writer.RewindTo(mark);
  EXPECT_FALSE(destroyed);  // queued before the mark: still to be written
  EXPECT_EQ(writer.held_bytes(), held);
  writer.Simple("next");
  EXPECT_EQ(Drain(writer),
            ":1\r\n$10\r\npppppppppp\r\n$20000\r\n" + std::string(stored.view()) + "\r\n+next\r\n");
  EXPECT_TRUE(destroyed);  // made and released once written

  // A mark on an empty writer (after Clear) rewinds to nothing at all.
  writer.Clear();
  const auto empty = writer.GetMark();
  destroyed = false;
  writer.BulkProduced(10, std::make_unique<TrackedProducer>(&destroyed));
  writer.RewindTo(empty);
  EXPECT_TRUE(destroyed);
  EXPECT_TRUE(writer.empty());
  EXPECT_EQ(writer.held_bytes(), 0u);
  EXPECT_EQ(Drain(writer), "");
}

TEST(ReplyWriterTest, ManySmallRepliesNeverRegrowOneString) {
  ReplyWriter writer;
  const std::string value(16000, 'v');
  for (int i = 0; i < 100; ++i) writer.Bulk(value);
  // Chunks are sealed at kOwnedChunk: held memory is the bytes, not a doubled string.
  EXPECT_EQ(writer.held_bytes(), writer.pending_bytes());
  auto buffers = writer.Buffers();
  EXPECT_GE(buffers.size(), writer.pending_bytes() / (ReplyWriter::kOwnedChunk + 16001));
  for (auto b : buffers) EXPECT_LT(b.size(), ReplyWriter::kOwnedChunk + 16100);
  EXPECT_GT(writer.Clear(), writer.pending_bytes() / 2);  // reports what it freed
}

TEST(ReplyWriterTest, SmallBytesAreCopied) {
  const Bytes value = Bytes::CopyOf(std::string(ReplyWriter::kReferenceThreshold - 1, 'v'));
  ReplyWriter writer;
  writer.Bulk(value);
  auto buffers = writer.Buffers();
  ASSERT_EQ(buffers.size(), 1u);
  EXPECT_NE(buffers[0].data(), value.data());
  EXPECT_EQ(writer.held_bytes(), writer.pending_bytes());
  EXPECT_EQ(Flatten(writer), "$16383\r\n" + std::string(value.view()) + "\r\n");
}

TEST(ReplyWriterTest, ConsecutiveLargeValuesStaySeparate) {
  const Bytes a = Bytes::CopyOf(std::string(20000, 'a'));
  const Bytes b = Bytes::CopyOf(std::string(30000, 'b'));
  ReplyWriter writer(3);
  writer.ArrayLen(2);
  writer.Bulk(a);
  writer.Bulk(b);
  auto buffers = writer.Buffers();
  ASSERT_EQ(buffers.size(), 5u);
  EXPECT_EQ(buffers[1].data(), a.data());
  EXPECT_EQ(buffers[3].data(), b.data());
  auto values = ReadAll(Flatten(writer));
  ASSERT_EQ(values.size(), 1u);
  EXPECT_EQ(values[0], RespValue::Array({RespValue::Bulk(a.view()), RespValue::Bulk(b.view())}));
}

// ---- ReplyParser on its own --------------------------------------------------------------------

TEST(ReplyReaderTest, ReadsEveryType) {
  EXPECT_EQ(ReadOne("+OK\r\n"), RespValue::Simple("OK"));
  EXPECT_EQ(ReadOne("-ERR x\r\n"), RespValue::Error("ERR x"));
  EXPECT_EQ(ReadOne("!5\r\nERR x\r\n"), RespValue::Error("ERR x"));
  EXPECT_EQ(ReadOne(":-7\r\n"), RespValue::Integer(-7));
  EXPECT_EQ(ReadOne("$3\r\na\nb\r\n"), RespValue::Bulk("a\nb"));
  EXPECT_EQ(ReadOne("$-1\r\n"), RespValue::Null());
  EXPECT_EQ(ReadOne("*-1\r\n"), RespValue::Null());
  EXPECT_EQ(ReadOne("_\r\n"), RespValue::Null());
  EXPECT_EQ(ReadOne("*2\r\n:1\r\n+a\r\n"),
            RespValue::Array({RespValue::Integer(1), RespValue::Simple("a")}));
  EXPECT_EQ(ReadOne("%1\r\n+k\r\n:1\r\n"),
            RespValue::Map({RespValue::Simple("k"), RespValue::Integer(1)}));
  EXPECT_EQ(ReadOne("~1\r\n#t\r\n"), RespValue::Set({RespValue::Boolean(true)}));
  EXPECT_EQ(ReadOne(">2\r\n+message\r\n$1\r\nx\r\n"),
            RespValue::Push({RespValue::Simple("message"), RespValue::Bulk("x")}));
  EXPECT_EQ(ReadOne(",3.141\r\n"), RespValue::Double(3.141));
  EXPECT_EQ(ReadOne(",-1.5e3\r\n"), RespValue::Double(-1500));
  EXPECT_EQ(ReadOne(",10\r\n"), RespValue::Double(10));
  EXPECT_EQ(ReadOne(",inf\r\n"), RespValue::Double(std::numeric_limits<double>::infinity()));
  EXPECT_EQ(ReadOne(",-inf\r\n"), RespValue::Double(-std::numeric_limits<double>::infinity()));
  EXPECT_TRUE(std::isnan(ReadOne(",nan\r\n").number));
  EXPECT_EQ(ReadOne("#f\r\n"), RespValue::Boolean(false));
  EXPECT_EQ(ReadOne("=16\r\ntxt:# Keyspace\r\n\r\n"), RespValue::Verbatim("txt", "# Keyspace\r\n"));
  EXPECT_EQ(ReadOne("(-12345678901234567890123\r\n"),
            RespValue::Bignum("-12345678901234567890123"));
  EXPECT_EQ(ReadOne("*0\r\n"), RespValue::Array({}));
  EXPECT_EQ(ReadOne("%0\r\n"), RespValue::Map({}));
}

TEST(ReplyReaderTest, AttributeWrapsTheReplyItAnnotates) {
  RespValue v = ReadOne("|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n*2\r\n:2\r\n:3\r\n");
  const RespValue expected =
      RespValue::Attribute({RespValue::Simple("key-popularity"),
                            RespValue::Map({RespValue::Bulk("a"), RespValue::Double(0.19)})},
                           RespValue::Array({RespValue::Integer(2), RespValue::Integer(3)}));
  EXPECT_EQ(v, expected) << ToDebugString(v);
  EXPECT_EQ(v.Unwrapped(), RespValue::Array({RespValue::Integer(2), RespValue::Integer(3)}));

  // Inside an aggregate the attribute does not count as an element.
  RespValue nested = ReadOne("*2\r\n|1\r\n+a\r\n+b\r\n:1\r\n:2\r\n");
  ASSERT_EQ(nested.children.size(), 2u);
  EXPECT_EQ(nested.children[0].Unwrapped(), RespValue::Integer(1));
  EXPECT_EQ(nested.children[1], RespValue::Integer(2));
}

TEST(ReplyReaderTest, StreamedStringsAndAggregates) {
  EXPECT_EQ(ReadOne("$?\r\n;4\r\nHell\r\n;5\r\no wor\r\n;2\r\nld\r\n;0\r\n"),
            RespValue::Bulk("Hello world"));
  EXPECT_EQ(ReadOne("*?\r\n:1\r\n*?\r\n.\r\n.\r\n"),
            RespValue::Array({RespValue::Integer(1), RespValue::Array({})}));
  EXPECT_EQ(ReadOne("%?\r\n+a\r\n:1\r\n.\r\n"),
            RespValue::Map({RespValue::Simple("a"), RespValue::Integer(1)}));
  EXPECT_NE(MalformedError("%?\r\n+a\r\n.\r\n"), "");
  EXPECT_NE(MalformedError(".\r\n"), "");
  EXPECT_NE(MalformedError("*1\r\n.\r\n"), "");
  EXPECT_NE(MalformedError("$?\r\n+x\r\n"), "");
  EXPECT_NE(MalformedError("|?\r\n"), "");
}

TEST(ReplyReaderTest, RejectsMalformedInput) {
  for (std::string_view bad :
       {"x\r\n",         "+OK\n",           "+OK\rX",  "+a\nb\r\n",      ":1.5\r\n",     ":+1\r\n",
        ":\r\n",         "$-2\r\n",         "$01\r\n", "$3\r\nabcX\r\n", "$3\r\nabc\rX", "*-2\r\n",
        "%-1\r\n",       "*x\r\n",          "_x\r\n",  ",\r\n",          ",.\r\n",       ",1e\r\n",
        ",0x10\r\n",     ",infinity\r\n",   "#x\r\n",  "#\r\n",          "(\r\n",        "(12a\r\n",
        "=3\r\ntxt\r\n", "=5\r\ntxt-a\r\n", ";1\r\n",  "!-1\r\n"}) {
    EXPECT_NE(MalformedError(bad), "") << bad;
  }
}

TEST(ReplyReaderTest, BoundsDepthAndDeclaredLengths) {
  ReaderLimits limits;
  limits.max_depth = 3;
  EXPECT_EQ(MalformedError("*1\r\n*1\r\n*1\r\n:1\r\n", limits), "");
  EXPECT_EQ(MalformedError("*1\r\n*1\r\n*1\r\n*1\r\n", limits), "aggregates nested too deeply");

  // The default depth bound stops a deep nest long before the stack does.
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "*1\r\n";
  EXPECT_EQ(MalformedError(deep), "aggregates nested too deeply");

  limits = {};
  limits.max_bulk_length = 10;
  EXPECT_EQ(MalformedError("$10\r\n", limits), "");
  EXPECT_EQ(MalformedError("$11\r\n", limits), "invalid length");
  EXPECT_EQ(MalformedError("$?\r\n;6\r\naaaaaa\r\n;5\r\n", limits),
            "invalid streamed string chunk length");
  limits.max_aggregate_length = 4;
  EXPECT_EQ(MalformedError("*4\r\n", limits), "");
  EXPECT_EQ(MalformedError("*5\r\n", limits), "invalid aggregate length");
  EXPECT_EQ(MalformedError("%2\r\n", limits), "");
  EXPECT_EQ(MalformedError("%3\r\n", limits), "invalid aggregate length");
  EXPECT_EQ(MalformedError("~?\r\n:1\r\n:1\r\n:1\r\n:1\r\n:1\r\n", limits),
            "streamed aggregate too long");
  limits.max_line_length = 4;
  EXPECT_EQ(MalformedError("+abcd", limits), "");
  EXPECT_EQ(MalformedError("+abcde", limits), "line too long");

  // Huge declared lengths are accepted without allocating for them.
  ReplyParser reader;
  EXPECT_EQ(reader.Feed("$536870912\r\nabc").status, ReadStatus::kNeedMore);
  ReplyParser array_reader;
  EXPECT_EQ(array_reader.Feed("*2000000000\r\n:1\r\n").status, ReadStatus::kNeedMore);
}

TEST(ReplyReaderTest, StopsAfterEachReplyAndAfterAnError) {
  ReplyParser reader;
  std::string_view input = "+a\r\n:1\r\n";
  ReadResult r = reader.Feed(input);
  EXPECT_EQ(r.status, ReadStatus::kComplete);
  EXPECT_EQ(r.consumed, 4u);
  // A complete reply blocks the reader until it is taken.
  EXPECT_EQ(reader.Feed(input.substr(4)).consumed, 0u);
  EXPECT_EQ(reader.TakeValue(), RespValue::Simple("a"));
  r = reader.Feed(input.substr(4));
  EXPECT_EQ(r.consumed, 4u);
  EXPECT_EQ(reader.TakeValue(), RespValue::Integer(1));

  r = reader.Feed("?\r\n+OK\r\n");
  EXPECT_EQ(r.status, ReadStatus::kMalformed);
  EXPECT_EQ(reader.Feed("+OK\r\n").status, ReadStatus::kMalformed);
  EXPECT_EQ(reader.Feed("+OK\r\n").consumed, 0u);
}

TEST(ReplyReaderTest, EverySplitGivesTheSameValues) {
  const std::string input =
      "*3\r\n$5\r\nhello\r\n%1\r\n+k\r\n~2\r\n,1.5\r\n#t\r\n_\r\n"
      "|1\r\n+a\r\n:1\r\n=7\r\ntxt:abc\r\n$?\r\n;2\r\nab\r\n;0\r\n*?\r\n(12\r\n.\r\n"
      "-ERR x\r\n!3\r\nERR\r\n>1\r\n$0\r\n\r\n$-1\r\n*-1\r\n";
  const std::vector<RespValue> whole = ReadAll(input);
  ASSERT_EQ(whole.size(), 9u);
  std::string_view in = input;
  for (size_t cut = 0; cut <= input.size(); ++cut) {
    ReplyParser reader;
    std::vector<RespValue> got;
    std::string pending;
    for (std::string_view chunk : {in.substr(0, cut), in.substr(cut)}) {
      pending.append(chunk);
      while (!pending.empty()) {
        ReadResult r = reader.Feed(pending);
        pending.erase(0, r.consumed);
        ASSERT_NE(r.status, ReadStatus::kMalformed) << reader.error();
        if (r.status == ReadStatus::kNeedMore) break;
        got.push_back(reader.TakeValue());
      }
    }
    ASSERT_EQ(got, whole) << "cut at " << cut;
  }
  EXPECT_EQ(ReadAll(input, 1), whole);
  EXPECT_EQ(ReadAll(input, 7), whole);
}

TEST(ReplyReaderTest, DebugString) {
  RespValue v = RespValue::Map(
      {RespValue::Bulk("a\r\n\x01"),
       RespValue::Array({RespValue::Integer(1), RespValue::Null(), RespValue::Double(2.5),
                         RespValue::Set({RespValue::Boolean(true)}), RespValue::Simple("OK"),
                         RespValue::Error("ERR e"), RespValue::Verbatim("txt", "v"),
                         RespValue::Bignum("9"), RespValue::Push({})})});
  EXPECT_EQ(ToDebugString(v),
            "{\"a\\r\\n\\x01\": [:1, null, ,2.5, ~[#t], +OK, -ERR e, =txt:\"v\", (9, >[]]}");
  EXPECT_EQ(ToDebugString(RespValue::Attribute({RespValue::Simple("k"), RespValue::Integer(1)},
                                               RespValue::Bulk("x"))),
            "|{+k: :1} \"x\"");
  EXPECT_EQ(ToDebugString(RespValue::Bulk(std::string(300, 'a'))),
            "\"" + std::string(200, 'a') + "...(300 bytes)\"");
}

// ---- Writer -> reader round trips --------------------------------------------------------------

// A nested reply exercising every verb, written through the writer.
void WriteNested(ReplyWriter& w, const Bytes& large) {
  w.MapLen(3);
  w.Bulk("scalars");
  w.ArrayLen(9);
  w.Simple("OK");
  w.Error("ERR a\r\nb");
  w.Integer(-1);
  w.Bulk("");
  w.Null();
  w.NullArray();
  w.Double(2.5);
  w.Bool(true);
  w.Verbatim("line\r\n");
  w.Bulk("nested");
  w.ArrayLen(2);
  w.SetLen(2);
  w.Bulk("x");
  w.Integer(2);
  w.MapLen(1);
  w.Simple("deep");
  w.ArrayLen(1);
  w.ArrayLen(0);
  w.Bulk("large");
  w.Bulk(large);
}

TEST(ReplyRoundTripTest, NestedRepliesInResp3) {
  const Bytes large = Bytes::CopyOf(std::string(40000, 'L'));
  const std::string bytes = Written(3, [&](ReplyWriter& w) { WriteNested(w, large); });
  const RespValue expected = RespValue::Map({
      RespValue::Bulk("scalars"),
      RespValue::Array({RespValue::Simple("OK"), RespValue::Error("ERR a  b"),
                        RespValue::Integer(-1), RespValue::Bulk(""), RespValue::Null(),
                        RespValue::Null(), RespValue::Double(2.5), RespValue::Boolean(true),
                        RespValue::Verbatim("txt", "line\r\n")}),
      RespValue::Bulk("nested"),
      RespValue::Array(
          {RespValue::Set({RespValue::Bulk("x"), RespValue::Integer(2)}),
           RespValue::Map({RespValue::Simple("deep"), RespValue::Array({RespValue::Array({})})})}),
      RespValue::Bulk("large"),
      RespValue::Bulk(large.view()),
  });
  for (size_t chunk : {0, 1, 3, 1000}) {
    auto values = ReadAll(bytes, chunk);
    ASSERT_EQ(values.size(), 1u);
    EXPECT_EQ(values[0], expected) << ToDebugString(values[0]) << "\n" << ToDebugString(expected);
  }
}

TEST(ReplyRoundTripTest, NestedRepliesInResp2) {
  const Bytes large = Bytes::CopyOf(std::string(40000, 'L'));
  const std::string bytes = Written(2, [&](ReplyWriter& w) { WriteNested(w, large); });
  // Maps become flat arrays, sets arrays, doubles bulks, booleans integers, verbatim bulks.
  const RespValue expected = RespValue::Array({
      RespValue::Bulk("scalars"),
      RespValue::Array({RespValue::Simple("OK"), RespValue::Error("ERR a  b"),
                        RespValue::Integer(-1), RespValue::Bulk(""), RespValue::Null(),
                        RespValue::Null(), RespValue::Bulk("2.5"), RespValue::Integer(1),
                        RespValue::Bulk("line\r\n")}),
      RespValue::Bulk("nested"),
      RespValue::Array({RespValue::Array({RespValue::Bulk("x"), RespValue::Integer(2)}),
                        RespValue::Array({RespValue::Simple("deep"),
                                          RespValue::Array({RespValue::Array({})})})}),
      RespValue::Bulk("large"),
      RespValue::Bulk(large.view()),
  });
  for (size_t chunk : {0, 1, 3, 1000}) {
    auto values = ReadAll(bytes, chunk);
    ASSERT_EQ(values.size(), 1u);
    EXPECT_EQ(values[0], expected) << ToDebugString(values[0]) << "\n" << ToDebugString(expected);
  }
}

TEST(ReplyRoundTripTest, DoublesSurviveExactly) {
  const double values[] = {0.0,
                           -0.0,
                           1.0,
                           0.1,
                           -2.5e-300,
                           1e300,
                           3.141592653589793,
                           std::numeric_limits<double>::max(),
                           std::numeric_limits<double>::denorm_min(),
                           std::numeric_limits<double>::infinity()};
  for (double d : values) {
    const std::string bytes = Written(3, [&](ReplyWriter& w) { w.Double(d); });
    RespValue v = ReadOne(bytes);
    EXPECT_EQ(v, RespValue::Double(d)) << bytes;
    EXPECT_EQ(std::signbit(v.number), std::signbit(d)) << bytes;
  }
}

TEST(ReplyRoundTripTest, PipelinedReplies) {
  const std::string bytes = Written(3, [](ReplyWriter& w) {
    w.Simple("PONG");
    w.Raw(">2\r\n+message\r\n$2\r\nhi\r\n");
    w.Raw("|1\r\n+ttl\r\n:5\r\n");
    w.Bulk("v");
    w.Integer(3);
  });
  auto values = ReadAll(bytes, 2);
  ASSERT_EQ(values.size(), 4u);
  EXPECT_EQ(values[0], RespValue::Simple("PONG"));
  EXPECT_EQ(values[1], RespValue::Push({RespValue::Simple("message"), RespValue::Bulk("hi")}));
  EXPECT_EQ(values[2], RespValue::Attribute({RespValue::Simple("ttl"), RespValue::Integer(5)},
                                            RespValue::Bulk("v")));
  EXPECT_EQ(values[3], RespValue::Integer(3));
}

}  // namespace
}  // namespace prefixd::protocol
