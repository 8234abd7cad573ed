// Tests of RequestParser against Redis 7's exact protocol behaviour (shared/reference
// redis-behaviour.md section 3), its limits, and its independence from how input is split.

#include "protocol/resp_parser.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/limits.h"
#include "protocol/reply_writer.h"
#include "protocol/request.h"

namespace prefixd::protocol {
namespace {

using Args = std::vector<std::string>;

struct Outcome {
  std::vector<Args> requests;
  std::vector<bool> inline_flags;
  ParseError error = ParseError::kNone;
  std::string message;
  size_t consumed = 0;  // over all Feed calls
};

Args ArgsOf(const Request& r) {
  Args out;
  for (size_t i = 0; i < r.size(); ++i) out.emplace_back(r[i]);
  return out;
}

// Feeds `chunks` one after another the way a connection would: bytes a Feed call leaves behind
// are kept and fed again, ahead of the next chunk.
Outcome ParseChunks(const std::vector<std::string_view>& chunks, ParserLimits limits = {}) {
  RequestParser parser(limits);
  Outcome out;
  std::string pending;
  Request request;
  for (std::string_view chunk : chunks) {
    pending.append(chunk);
    while (true) {
      size_t n = parser.Feed(pending);
      EXPECT_LE(n, pending.size());
      out.consumed += n;
      pending.erase(0, n);
      if (parser.has_request()) {
        parser.TakeRequest(request);
        out.requests.push_back(ArgsOf(request));
        out.inline_flags.push_back(request.is_inline());
        continue;
      }
      if (parser.error() != ParseError::kNone) {
        out.error = parser.error();
        out.message = parser.ErrorMessage();
        return out;
      }
      EXPECT_TRUE(pending.empty()) << "an incomplete request must consume all of its input";
      break;
    }
  }
  return out;
}

Outcome Parse(std::string_view input, ParserLimits limits = {}) {
  return ParseChunks({input}, limits);
}

ParserLimits Unauthenticated() {
  ParserLimits limits;
  limits.authenticated = false;
  return limits;
}

// A multibulk frame with the given arguments.
std::string Multibulk(const Args& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const std::string& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return out;
}

void ExpectError(std::string_view input, std::string_view message, ParserLimits limits = {}) {
  Outcome out = Parse(input, limits);
  EXPECT_NE(out.error, ParseError::kNone) << "input: " << input.substr(0, 80);
  EXPECT_EQ(out.message, message) << "input: " << input.substr(0, 80);
}

constexpr std::string_view kInvalidMultibulk = "ERR Protocol error: invalid multibulk length";
constexpr std::string_view kInvalidBulk = "ERR Protocol error: invalid bulk length";

// The gate sees the arguments before a large one; a refusal drops the rest of the request byte by
// byte (in any split), holds none of it, and leaves the parser in step for the next request.
TEST(RequestParserTest, ARefusedRequestIsReadToItsEndWithoutKeepingItsLargeArguments) {
  const std::string large(kLargeArgument * 3, 'v');
  const std::string input = Multibulk({"STORE", "elsewhere", large, "tail", large}) +
                            Multibulk({"STORE", "here", large}) + Multibulk({"PING"});
  for (size_t step : {size_t{1} << 20, size_t{4096}, size_t{7}}) {
    RequestParser parser;
    std::vector<Args> seen;
    parser.set_large_argument_gate([&](const Request& partial) -> std::string {
      seen.push_back(ArgsOf(partial));
      return partial[1] == "elsewhere" ? "MOVED 1 127.0.0.1:7000" : "";
    });
    std::vector<std::pair<std::string, Args>> out;  // (refusal, arguments kept)
    size_t most_held = 0;
    Request request;
    for (size_t pos = 0; pos < input.size();) {
      std::string_view chunk = std::string_view(input).substr(pos, step);
      size_t n = parser.Feed(chunk);
      pos += n;
      most_held = std::max(most_held, parser.buffer_bytes());
      if (parser.has_request()) {
        std::string refusal = parser.TakeRefusal();
        parser.TakeRequest(request);
        out.emplace_back(refusal, ArgsOf(request));
      }
      ASSERT_EQ(parser.error(), ParseError::kNone);
    }
    ASSERT_EQ(out.size(), 3u) << "step " << step;
    EXPECT_EQ(out[0].first, "MOVED 1 127.0.0.1:7000");
    EXPECT_EQ(out[0].second, (Args{"STORE", "elsewhere"}));
    EXPECT_EQ(out[1].first, "");
    EXPECT_EQ(out[1].second, (Args{"STORE", "here", large}));
    EXPECT_EQ(out[2], (std::pair<std::string, Args>{"", {"PING"}}));
    // Asked once for the refused request (its first large argument), once for the served one.
    EXPECT_EQ(seen, (std::vector<Args>{{"STORE", "elsewhere"}, {"STORE", "here"}}));
    EXPECT_LE(most_held, large.size() + 4096) << "the refused request's arguments were held";
  }
}

TEST(RequestParserTest, MultibulkRequest) {
  Outcome out = Parse("*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n");
  ASSERT_EQ(out.error, ParseError::kNone);
  ASSERT_EQ(out.requests.size(), 1u);
  EXPECT_EQ(out.requests[0], (Args{"ECHO", "hello"}));
  EXPECT_FALSE(out.inline_flags[0]);
  EXPECT_EQ(out.consumed, 25u);
}

TEST(RequestParserTest, EmptyAndNegativeMultibulkAreSkipped) {
  Outcome out = Parse("*0\r\n*-1\r\n*-10\r\n*1\r\n$4\r\nPING\r\n");
  EXPECT_EQ(out.error, ParseError::kNone);
  ASSERT_EQ(out.requests.size(), 1u);
  EXPECT_EQ(out.requests[0], Args{"PING"});
}

TEST(RequestParserTest, InvalidMultibulkLength) {
  for (std::string_view input : {"*3000000000\r\n", "*abc\r\n", "*+1\r\n", "*01\r\n", "*\r\n",
                                 "*-0\r\n", "*2147483648\r\n", "*1 \r\n", "* 1\r\n"}) {
    ExpectError(input, kInvalidMultibulk);
  }
}

TEST(RequestParserTest, MultibulkLengthAtIntMaxIsAccepted) {
  RequestParser parser;
  EXPECT_EQ(parser.Feed("*2147483647\r\n"), 13u);
  EXPECT_EQ(parser.error(), ParseError::kNone);
  EXPECT_FALSE(parser.has_request());
}

TEST(RequestParserTest, ExpectedDollar) {
  ExpectError("*1\r\nfoo\r\n", "ERR Protocol error: expected '$', got 'f'");
  ExpectError("*2\r\n$1\r\na\r\n:1\r\n", "ERR Protocol error: expected '$', got ':'");
}

TEST(RequestParserTest, ExpectedDollarOnEmptyLineBecomesSpaceOnTheWire) {
  // Redis prints the '\r' it found; addReplyErrorFormat turns it into a space.
  Outcome out = Parse("*1\r\n\r\n");
  EXPECT_EQ(out.message, "ERR Protocol error: expected '$', got '\r'");
  ReplyWriter writer;
  writer.Error(out.message);
  auto buffers = writer.Buffers();
  ASSERT_EQ(buffers.size(), 1u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(buffers[0].data()), buffers[0].size()),
            "-ERR Protocol error: expected '$', got ' '\r\n");
}

TEST(RequestParserTest, InvalidBulkLength) {
  for (std::string_view input :
       {"*1\r\n$-10\r\n", "*1\r\n$blabla\r\n", "*1\r\n$\r\n", "*1\r\n$2000000000\r\n",
        "*1\r\n$-1\r\n", "*1\r\n$+1\r\n", "*1\r\n$01\r\n", "*1\r\n$-0\r\n",
        "*1\r\n$99999999999999999999\r\n"}) {
    ExpectError(input, kInvalidBulk);
  }
}

TEST(RequestParserTest, BulkAtMaxBulkLength) {
  ParserLimits limits;
  limits.max_bulk_length = 100;
  Outcome ok = Parse(Multibulk({"SET", std::string(100, 'v')}), limits);
  EXPECT_EQ(ok.error, ParseError::kNone);
  ASSERT_EQ(ok.requests.size(), 1u);
  EXPECT_EQ(ok.requests[0][1], std::string(100, 'v'));
  ExpectError(Multibulk({"SET", std::string(101, 'v')}), kInvalidBulk, limits);
}

TEST(RequestParserTest, LargeBulkAtMaxBulkLength) {
  // The same boundary on the large-argument path.
  ParserLimits limits;
  limits.max_bulk_length = 40000;
  Outcome ok = Parse(Multibulk({"SET", std::string(40000, 'v')}), limits);
  EXPECT_EQ(ok.error, ParseError::kNone);
  ASSERT_EQ(ok.requests.size(), 1u);
  EXPECT_EQ(ok.requests[0][1].size(), 40000u);
  ExpectError(Multibulk({"SET", std::string(40001, 'v')}), kInvalidBulk, limits);
}

TEST(RequestParserTest, TooBigInlineRequest) {
  const std::string at_limit = "ECHO " + std::string(kInlineMax - 5, 'a');
  ASSERT_EQ(at_limit.size(), kInlineMax);

  // A line of exactly kInlineMax bytes, without its terminator, is accepted.
  Outcome ok = Parse(at_limit + "\n");
  EXPECT_EQ(ok.error, ParseError::kNone);
  ASSERT_EQ(ok.requests.size(), 1u);
  EXPECT_EQ(ok.requests[0][1].size(), kInlineMax - 5);

  // The parser waits while the unterminated line is at the limit, and fails one byte past it.
  RequestParser parser;
  EXPECT_EQ(parser.Feed(at_limit), kInlineMax);
  EXPECT_EQ(parser.error(), ParseError::kNone);
  parser.Feed("a");
  EXPECT_EQ(parser.ErrorMessage(), "ERR Protocol error: too big inline request");

  ExpectError(at_limit + "a\n", "ERR Protocol error: too big inline request");
  ExpectError(std::string(70000, 'x'), "ERR Protocol error: too big inline request");
}

TEST(RequestParserTest, TooBigMultibulkCountString) {
  const std::string at_limit = "*" + std::string(kInlineMax - 1, '1');
  RequestParser parser;
  EXPECT_EQ(parser.Feed(at_limit), kInlineMax);
  EXPECT_EQ(parser.error(), ParseError::kNone);
  parser.Feed("1");
  EXPECT_EQ(parser.ErrorMessage(), "ERR Protocol error: too big mbulk count string");

  ExpectError("*" + std::string(70000, '1'), "ERR Protocol error: too big mbulk count string");
  // A count line at the limit that does end is just an invalid number.
  ExpectError(at_limit + "\r\n", kInvalidMultibulk);
}

TEST(RequestParserTest, TooBigBulkCountString) {
  const std::string at_limit = "*1\r\n$" + std::string(kInlineMax - 1, '1');
  RequestParser parser;
  EXPECT_EQ(parser.Feed(at_limit), at_limit.size());
  EXPECT_EQ(parser.error(), ParseError::kNone);
  parser.Feed("1");
  EXPECT_EQ(parser.ErrorMessage(), "ERR Protocol error: too big bulk count string");

  ExpectError("*1\r\n$" + std::string(70000, '1'), "ERR Protocol error: too big bulk count string");
}

TEST(RequestParserTest, UnbalancedQuotes) {
  for (std::string_view input : {"set \"\"\"test-key\"\"\" test-value\r\n", "echo \"a\"b\r\n",
                                 "echo \"abc\r\n", "echo 'abc\r\n", "echo 'a'b\r\n"}) {
    ExpectError(input, "ERR Protocol error: unbalanced quotes in request");
  }
}

TEST(RequestParserTest, InlineEscapesAreDecoded) {
  Outcome out = Parse("echo \"a b\\x41\\n\"\r\n");
  ASSERT_EQ(out.requests.size(), 1u);
  EXPECT_EQ(out.requests[0], (Args{"echo", "a bA\n"}));
  EXPECT_TRUE(out.inline_flags[0]);

  out = Parse("set 'it\\'s' \"q\\\"\\t\\r\\a\\b\\z\" x\r\n");
  ASSERT_EQ(out.requests.size(), 1u);
  EXPECT_EQ(out.requests[0], (Args{"set", "it's", "q\"\t\r\a\bz", "x"}));
}

TEST(RequestParserTest, InlineWithLineFeedOnly) {
  Outcome out = Parse("PING\npInG\r\n");
  EXPECT_EQ(out.error, ParseError::kNone);
  EXPECT_EQ(out.requests, (std::vector<Args>{{"PING"}, {"pInG"}}));
}

TEST(RequestParserTest, EmptyAndBlankLinesAreSkipped) {
  Outcome out = Parse("\r\n\n   \t\r\nPING\r\n");
  EXPECT_EQ(out.error, ParseError::kNone);
  EXPECT_EQ(out.requests, std::vector<Args>{{"PING"}});
}

TEST(RequestParserTest, InlineStopsAtNul) {
  // The parser splits the line as a C string, as sdssplitargs does. Real Redis differs earlier:
  // it finds the '\n' with strchr, which stops at the NUL, so it never sees the line end and
  // waits until 64 KiB pile up ("too big inline request"). Replying is the saner choice.
  Outcome out = Parse(std::string_view("ECHO a\0b c\r\n", 12));
  ASSERT_EQ(out.requests.size(), 1u);
  EXPECT_EQ(out.requests[0], (Args{"ECHO", "a"}));
}

TEST(RequestParserTest, BytesAfterBulkAreSkippedUnchecked) {
  RequestParser parser;
  std::string_view input = "*1\r\n$2\r\nhiXY*1\r\n$4\r\nPING\r\n";
  EXPECT_EQ(parser.Feed(input), 12u);
  ASSERT_TRUE(parser.has_request());
  Request r;
  parser.TakeRequest(r);
  EXPECT_EQ(ArgsOf(r), Args{"hi"});
  EXPECT_EQ(parser.Feed(input.substr(12)), 14u);
  ASSERT_TRUE(parser.has_request());
  parser.TakeRequest(r);
  EXPECT_EQ(ArgsOf(r), Args{"PING"});
}

TEST(RequestParserTest, UnauthenticatedArgumentCount) {
  Outcome ok = Parse(Multibulk(Args(10, "a")), Unauthenticated());
  EXPECT_EQ(ok.error, ParseError::kNone);
  ASSERT_EQ(ok.requests.size(), 1u);
  EXPECT_EQ(ok.requests[0].size(), 10u);
  ExpectError("*11\r\n", "ERR Protocol error: unauthenticated multibulk length", Unauthenticated());
  // Redis checks the number first: an invalid one is still "invalid multibulk length".
  ExpectError("*3000000000\r\n", kInvalidMultibulk, Unauthenticated());
  EXPECT_EQ(Parse("*-1\r\n", Unauthenticated()).error, ParseError::kNone);
}

TEST(RequestParserTest, UnauthenticatedBulkLength) {
  Outcome ok = Parse(Multibulk({"AUTH", std::string(16384, 'p')}), Unauthenticated());
  EXPECT_EQ(ok.error, ParseError::kNone);
  ASSERT_EQ(ok.requests.size(), 1u);
  EXPECT_EQ(ok.requests[0][1].size(), 16384u);
  ExpectError("*2\r\n$4\r\nAUTH\r\n$16385\r\n", "ERR Protocol error: unauthenticated bulk length",
              Unauthenticated());
}

TEST(RequestParserTest, LimitsApplyFromTheNextLength) {
  RequestParser parser(Unauthenticated());
  const std::string auth = Multibulk({"AUTH", "secret"});
  ASSERT_EQ(parser.Feed(auth), auth.size());
  Request r;
  parser.TakeRequest(r);
  ParserLimits limits;
  limits.authenticated = true;
  parser.set_limits(limits);
  const std::string big = Multibulk(Args(11, std::string(20000, 'x')));
  EXPECT_EQ(parser.Feed(big), big.size());
  ASSERT_TRUE(parser.has_request());
  parser.TakeRequest(r);
  EXPECT_EQ(r.size(), 11u);
}

TEST(RequestParserTest, RequestTooLarge) {
  // Each argument counts its length plus kArgumentOverhead.
  ParserLimits limits;
  limits.max_request_bytes = 100 + 2 * kArgumentOverhead;
  Outcome ok = Parse(Multibulk({std::string(50, 'a'), std::string(50, 'b')}), limits);
  EXPECT_EQ(ok.error, ParseError::kNone);
  EXPECT_EQ(ok.requests.size(), 1u);

  Outcome bad = Parse("*2\r\n$50\r\n" + std::string(50, 'a') + "\r\n$51\r\n", limits);
  EXPECT_EQ(bad.error, ParseError::kRequestTooLarge);
  EXPECT_EQ(bad.message, "ERR Protocol error: request exceeds client-query-buffer-limit");

  // The budget is per request.
  std::string two = Multibulk({std::string(100, 'a')}) + Multibulk({std::string(100, 'b')});
  Outcome both = Parse(two, limits);
  EXPECT_EQ(both.error, ParseError::kNone);
  EXPECT_EQ(both.requests.size(), 2u);
}

TEST(RequestParserTest, EmptyArgumentFloodIsBounded) {
  // Empty arguments carry no payload but still cost memory: the limit must stop them.
  ParserLimits limits;
  limits.max_request_bytes = 10 * kArgumentOverhead;
  std::string ten = "*100\r\n";
  for (int i = 0; i < 10; ++i) ten += "$0\r\n\r\n";
  EXPECT_EQ(Parse(ten, limits).error, ParseError::kNone);
  EXPECT_EQ(Parse(ten + "$0\r\n", limits).error, ParseError::kRequestTooLarge);
}

TEST(RequestParserTest, LargeArgumentThroughFeed) {
  const std::string value(40 * 1024, 'z');
  RequestParser parser;
  const std::string frame = Multibulk({"SET", "k", value});
  EXPECT_EQ(parser.Feed(frame), frame.size());
  ASSERT_TRUE(parser.has_request());
  Request r;
  parser.TakeRequest(r);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[2], value);
  EXPECT_EQ(r.TakeBytes(2).view(), value);
  EXPECT_EQ(r.payload_bytes(), 4 + value.size());
}

TEST(RequestParserTest, LargeArgumentThroughDirectTarget) {
  const size_t size = 40 * 1024;
  RequestParser parser;
  const std::string header = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$" + std::to_string(size) + "\r\n";
  EXPECT_EQ(parser.Feed(header), header.size());
  auto target = parser.DirectTarget();
  ASSERT_EQ(target.size(), size);
  const uint8_t* start = target.data();

  // Part of the value through Feed, the rest straight into the buffer in two steps.
  EXPECT_EQ(parser.Feed(std::string(1000, 'a')), 1000u);
  // The request so far: "SET", "k" and 1000 bytes of the value.
  EXPECT_EQ(parser.pending_bytes(), 1004u);
  target = parser.DirectTarget();
  ASSERT_EQ(target.size(), size - 1000);
  EXPECT_EQ(target.data(), start + 1000);
  std::memset(target.data(), 'b', 5000);
  parser.CommitDirect(5000);
  target = parser.DirectTarget();
  ASSERT_EQ(target.size(), size - 6000);
  std::memset(target.data(), 'c', target.size());
  parser.CommitDirect(target.size());
  EXPECT_TRUE(parser.DirectTarget().empty());
  EXPECT_FALSE(parser.has_request());

  EXPECT_EQ(parser.Feed("\r\n"), 2u);
  ASSERT_TRUE(parser.has_request());
  Request r;
  parser.TakeRequest(r);
  ASSERT_EQ(r.size(), 3u);
  const std::string expected =
      std::string(1000, 'a') + std::string(5000, 'b') + std::string(size - 6000, 'c');
  EXPECT_EQ(r[2], expected);
  // The request holds the very buffer the socket bytes went into.
  EXPECT_EQ(r.TakeBytes(2).data(), start);
}

TEST(RequestParserTest, LargeArgumentThreshold) {
  RequestParser parser;
  const std::string small_header = "*2\r\n$" + std::to_string(kLargeArgument - 1) + "\r\n";
  EXPECT_EQ(parser.Feed(small_header), small_header.size());
  EXPECT_TRUE(parser.DirectTarget().empty());
  RequestParser large;
  large.Feed("*2\r\n$" + std::to_string(kLargeArgument) + "\r\n");
  EXPECT_EQ(large.DirectTarget().size(), kLargeArgument);
}

TEST(RequestParserTest, PipelinedRequestsStopAfterEachOne) {
  const std::string first = "PING\r\n";
  const std::string second = Multibulk({"ECHO", "x"});
  const std::string third = "GET k\n";
  const std::string input = first + second + third;
  RequestParser parser;
  Request r;

  EXPECT_EQ(parser.Feed(input), first.size());
  ASSERT_TRUE(parser.has_request());
  // A ready request blocks further parsing until it is taken.
  EXPECT_EQ(parser.Feed(std::string_view(input).substr(first.size())), 0u);
  parser.TakeRequest(r);
  EXPECT_EQ(ArgsOf(r), Args{"PING"});
  EXPECT_TRUE(r.is_inline());

  size_t pos = first.size();
  EXPECT_EQ(parser.Feed(std::string_view(input).substr(pos)), second.size());
  parser.TakeRequest(r);
  EXPECT_EQ(ArgsOf(r), (Args{"ECHO", "x"}));
  EXPECT_FALSE(r.is_inline());

  pos += second.size();
  EXPECT_EQ(parser.Feed(std::string_view(input).substr(pos)), third.size());
  parser.TakeRequest(r);
  EXPECT_EQ(ArgsOf(r), (Args{"GET", "k"}));
  EXPECT_FALSE(parser.has_request());
}

TEST(RequestParserTest, RequestsBeforeAnErrorAreDelivered) {
  Outcome out = Parse("PING\r\n*1\r\n$4\r\nPING\r\n*abc\r\nPING\r\n");
  EXPECT_EQ(out.requests, (std::vector<Args>{{"PING"}, {"PING"}}));
  EXPECT_EQ(out.message, kInvalidMultibulk);
}

TEST(RequestParserTest, ErroredParserStops) {
  RequestParser parser;
  parser.Feed("*abc\r\n");
  ASSERT_EQ(parser.error(), ParseError::kInvalidMultibulkLength);
  EXPECT_EQ(parser.Feed("PING\r\n"), 0u);
  EXPECT_FALSE(parser.has_request());
  EXPECT_EQ(parser.error(), ParseError::kInvalidMultibulkLength);
}

TEST(RequestParserTest, TakeRequestReusesStorage) {
  RequestParser parser;
  Request r;
  r.AddSmall("stale");
  parser.Feed("*1\r\n$4\r\nPING\r\n");
  parser.TakeRequest(r);
  EXPECT_EQ(ArgsOf(r), Args{"PING"});
  parser.Feed("ECHO hi\r\n");
  parser.TakeRequest(r);
  EXPECT_EQ(ArgsOf(r), (Args{"ECHO", "hi"}));
  EXPECT_EQ(r.payload_bytes(), 6u);
}

TEST(RequestParserTest, SplitInlineArgs) {
  Request r;
  EXPECT_TRUE(SplitInlineArgs("  a  \"b c\"\t'd' ", r));
  EXPECT_EQ(ArgsOf(r), (Args{"a", "b c", "d"}));
  Request empty;
  EXPECT_TRUE(SplitInlineArgs("", empty));
  EXPECT_TRUE(empty.empty());
  Request bad;
  EXPECT_FALSE(SplitInlineArgs("\"open", bad));
}

// Frames whose parse must not depend on how the bytes arrive.
std::vector<std::string> SplitFrames() {
  return {
      Multibulk({"SET", "key", "value"}),
      Multibulk({"SET", "", "x", ""}),
      Multibulk({"SET", "k", std::string(40 * 1024, 'L')}),
      "set \"a b\" 'c d' e\\x41 \"\\x41\\n\"\r\n",
      "PING\n\r\n*0\r\n" + Multibulk({"ECHO", "hi"}) + "GET k\r\n",
      "*1\r\n$2\r\nhiXY",
  };
}

TEST(RequestParserTest, EverySplitIntoTwoChunksGivesTheSameRequests) {
  for (const std::string& frame : SplitFrames()) {
    const Outcome whole = Parse(frame);
    ASSERT_EQ(whole.error, ParseError::kNone);
    ASSERT_FALSE(whole.requests.empty());
    std::string_view f = frame;
    for (size_t cut = 0; cut <= frame.size(); ++cut) {
      Outcome split = ParseChunks({f.substr(0, cut), f.substr(cut)});
      ASSERT_EQ(split.error, ParseError::kNone) << "cut at " << cut;
      ASSERT_EQ(split.requests, whole.requests) << "cut at " << cut;
      ASSERT_EQ(split.inline_flags, whole.inline_flags) << "cut at " << cut;
      ASSERT_EQ(split.consumed, frame.size()) << "cut at " << cut;
    }
  }
}

TEST(RequestParserTest, ByteByByteGivesTheSameRequests) {
  for (const std::string& frame : SplitFrames()) {
    const Outcome whole = Parse(frame);
    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < frame.size(); ++i) bytes.push_back(std::string_view(frame).substr(i, 1));
    Outcome split = ParseChunks(bytes);
    EXPECT_EQ(split.error, ParseError::kNone);
    EXPECT_EQ(split.requests, whole.requests);
    EXPECT_EQ(split.inline_flags, whole.inline_flags);
  }
}

TEST(RequestParserTest, ErrorsDoNotDependOnSplits) {
  for (std::string_view frame :
       {"*1\r\nfoo\r\n", "*1\r\n$-10\r\n", "echo \"a\"b\r\n", "*+1\r\n", "PING\r\n*1\r\n$x\r\n"}) {
    const Outcome whole = Parse(frame);
    ASSERT_NE(whole.error, ParseError::kNone);
    for (size_t cut = 0; cut <= frame.size(); ++cut) {
      Outcome split = ParseChunks({frame.substr(0, cut), frame.substr(cut)});
      EXPECT_EQ(split.requests, whole.requests) << frame << " cut at " << cut;
      EXPECT_EQ(split.message, whole.message) << frame << " cut at " << cut;
    }
  }
}

// A whole request in one Feed takes the one-pass path; byte by byte never does. Each frame here
// sits at one of the one-pass path's edges (it must hand the frame to the state machine, or
// agree with it), under limits at and one past the lengths the frame declares.
TEST(RequestParserTest, OnePassAndByteByByteAgreeAtEveryEdge) {
  const std::string arg9(9, 'x'), big(kLargeArgument - 1, 'b'), large(kLargeArgument, 'L');
  const std::vector<std::string> frames = {
      "*1\r\n$0\r\n\r\n",                   // an empty argument
      "*2\r\n$3\r\nGET\r\n$03\r\nabc\r\n",  // a leading zero: invalid bulk length
      "*02\r\n$3\r\nGET\r\n$1\r\na\r\n",    // a leading zero in the count: invalid
      "*-1\r\n*1\r\n$4\r\nPING\r\n",        // a skipped null multibulk, then a request
      "*0\r\n*1\r\n$4\r\nPING\r\n",         // a skipped empty one
      "*1\r\n$+4\r\nPING\r\n",              // a sign: invalid bulk length
      "*1\r\n$4\rXPING\r\n",                // the byte after '\r' is skipped unseen
      "*1\r\n$4\r\nPINGzz",                 // so are the two after the argument
      "*1\r\n$4\r\nPING\r",                 // incomplete: the last byte is missing
      "*2\r\n$4\r\nECHO\r\n$9\r\n" + arg9 + "\r\n",
      "*2\r\n$4\r\nECHO\r\n$1000000000\r\n",  // ten digits
      "*1000000000\r\n$4\r\nPING\r\n",        // a count of ten digits
      "*2\r\n$4\r\nECHO\r\n$" + std::to_string(big.size()) + "\r\n" + big + "\r\n",
      "*2\r\n$4\r\nECHO\r\n$" + std::to_string(large.size()) + "\r\n" + large + "\r\n",
      "*11\r\n" +
          [] {
            std::string eleven;
            for (int i = 0; i < 11; ++i) eleven += "$1\r\na\r\n";
            return eleven;
          }(),
      "*2\r\n$4\r\nECHO\r\n$16385\r\n" + std::string(16385, 'u') + "\r\n",
      "*1\r\n:4\r\nPING\r\n",  // not a '$'
      "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*1\r\n$4\r\nPING\r\n",
  };
  std::vector<ParserLimits> limits(1);
  limits.push_back(Unauthenticated());
  for (int64_t bulk : {int64_t{8}, int64_t{9}, int64_t{10}}) {
    ParserLimits l;
    l.max_bulk_length = bulk;
    limits.push_back(l);
  }
  for (int64_t request : {int64_t{2 * kArgumentOverhead + 12}, int64_t{2 * kArgumentOverhead + 13},
                          int64_t{2 * kArgumentOverhead + 14}}) {
    ParserLimits l;
    l.max_request_bytes = request;
    limits.push_back(l);
  }
  for (const std::string& frame : frames) {
    for (const ParserLimits& l : limits) {
      const Outcome whole = Parse(frame, l);
      std::vector<std::string_view> bytes;
      for (size_t i = 0; i < frame.size(); ++i)
        bytes.push_back(std::string_view(frame).substr(i, 1));
      const Outcome split = ParseChunks(bytes, l);
      const std::string what = frame.substr(0, 40) + " (bulk limit " +
                               std::to_string(l.max_bulk_length) + ", request limit " +
                               std::to_string(l.max_request_bytes) + ")";
      EXPECT_EQ(whole.requests, split.requests) << what;
      EXPECT_EQ(whole.message, split.message) << what;
      EXPECT_EQ(whole.consumed, split.consumed) << what;
    }
  }
  // And what the one-pass path decided, spelled out for a few of them.
  EXPECT_EQ(Parse(frames[0]).requests, std::vector<Args>{Args{""}});
  EXPECT_EQ(Parse(frames[1]).message, kInvalidBulk);
  EXPECT_EQ(Parse(frames[2]).message, kInvalidMultibulk);
  EXPECT_EQ(Parse(frames[6]).requests, std::vector<Args>{Args{"PING"}});
  EXPECT_EQ(Parse(frames[17]).requests, (std::vector<Args>{Args{"SET", "k", "v"}, Args{"PING"}}));
  EXPECT_EQ(Parse(frames[14], Unauthenticated()).message,
            "ERR Protocol error: unauthenticated multibulk length");
  ParserLimits nine;
  nine.max_bulk_length = 9;
  EXPECT_EQ(Parse(frames[9], nine).requests, (std::vector<Args>{Args{"ECHO", arg9}}));
  nine.max_bulk_length = 8;
  EXPECT_EQ(Parse(frames[9], nine).message, kInvalidBulk);
}

}  // namespace
}  // namespace prefixd::protocol
