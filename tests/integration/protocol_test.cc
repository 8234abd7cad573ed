// Checks the real server's wire behaviour byte for byte against Redis 7.0.15
// (shared/reference/redis-behaviour.md §3): protocol errors and whether the connection closes,
// inline parsing, command-level errors, AUTH/HELLO, SELECT, CONFIG, CLIENT, maxclients and a
// client that never reads its replies.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string Repeat(std::string_view s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

std::string Bulk(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}

// The payload of a RESP2 bulk or RESP3 verbatim reply (without its header and final CRLF).
std::string BulkBody(const std::string& reply) {
  size_t header_end = reply.find("\r\n");
  if (reply.size() < 2 || header_end == std::string::npos || header_end + 4 > reply.size())
    return {};
  return reply.substr(header_end + 2, reply.size() - header_end - 4);
}

// HELLO's reply, exactly as Redis 7.0.15 shapes it, for a connection with id `id`.
std::string HelloReply(int proto, int64_t id) {
  return std::string(proto == 3 ? "%7\r\n" : "*14\r\n") +
         "$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:" +
         std::to_string(proto) + "\r\n$2\r\nid\r\n:" + std::to_string(id) +
         "\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n"
         "*0\r\n";
}

const std::string kNoAuth = "-NOAUTH Authentication required.\r\n";
const std::string kWrongPass = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";

class ProtocolTest : public ServerTest {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartServer()); }

  std::unique_ptr<RawConnection> Connect() {
    std::string error;
    auto c = RawConnection::Tcp(server_.port(), &error);
    EXPECT_NE(c, nullptr) << "connect to 127.0.0.1:" << server_.port() << ": " << error;
    return c;
  }

  int64_t ClientId(RawConnection& c) {
    std::string reply = c.Call("CLIENT ID\r\n");
    EXPECT_EQ(reply.substr(0, 1), ":") << reply;
    return reply.size() > 1 ? std::stoll(reply.substr(1)) : -1;
  }

  // Sends `request` on a fresh connection and expects exactly `reply`, then the server to close.
  void ExpectReplyThenClosed(std::string_view request, std::string_view reply) {
    auto c = Connect();
    ASSERT_NE(c, nullptr);
    c->Send(request);
    std::string got;
    bool closed = c->WaitClosed(3s, &got);
    EXPECT_EQ(got, reply) << "request: "
                          << ::testing::PrintToString(std::string(request.substr(0, 120)));
    EXPECT_TRUE(closed) << "the connection stayed open after "
                        << ::testing::PrintToString(std::string(request.substr(0, 120)));
  }

  // Sends `request` and expects exactly `reply`, then that the connection still serves:
  // a PING gets `probe_reply` (so no stray bytes came in between).
  void ExpectReplyThenOpen(RawConnection& c, std::string_view request, std::string_view reply,
                           std::string_view probe_reply = "+PONG\r\n") {
    ASSERT_TRUE(c.Send(request));
    EXPECT_EQ(c.Read(reply.size(), 3s), reply)
        << "request: " << ::testing::PrintToString(std::string(request.substr(0, 120)));
    ASSERT_TRUE(c.Send("PING\r\n"));
    EXPECT_EQ(c.Read(probe_reply.size(), 3s), probe_reply)
        << "connection not usable after " << ::testing::PrintToString(std::string(request));
  }

  void ExpectReplyThenOpen(std::string_view request, std::string_view reply,
                           std::string_view probe_reply = "+PONG\r\n") {
    auto c = Connect();
    ASSERT_NE(c, nullptr);
    ExpectReplyThenOpen(*c, request, reply, probe_reply);
  }
};

// ---------------------------------------------------------------------------------------------
// Parsing that keeps the connection open.

TEST_F(ProtocolTest, EmptyLinesAreSkipped) {
  ExpectReplyThenOpen("\r\n", "");
  ExpectReplyThenOpen("\r\nPING\r\n", "+PONG\r\n");
  ExpectReplyThenOpen("\n\n\nPING\n", "+PONG\r\n");
  ExpectReplyThenOpen("PING\r\n\r\n\r\nPING\r\n", "+PONG\r\n+PONG\r\n");
  ExpectReplyThenOpen("   \r\n", "");
}

TEST_F(ProtocolTest, InlineCommandsLfOnlyAndAnyCase) {
  ExpectReplyThenOpen("PING\n", "+PONG\r\n");
  ExpectReplyThenOpen("pInG\r\n", "+PONG\r\n");
  ExpectReplyThenOpen("  PING  \r\n", "+PONG\r\n");
  ExpectReplyThenOpen("ECHO hello\n", Bulk("hello"));
  ExpectReplyThenOpen("PING \"\"\r\n", "$0\r\n\r\n");
}

TEST_F(ProtocolTest, InlineEscapesAreDecoded) {
  ExpectReplyThenOpen("echo \"a b\\x41\\n\"\r\n", "$5\r\na bA\n\r\n");
  ExpectReplyThenOpen("echo \"\\t\\x4a\"\r\n", "$2\r\n\tJ\r\n");
  ExpectReplyThenOpen("echo 'it\\'s'\r\n", "$4\r\nit's\r\n");
  ExpectReplyThenOpen("echo \"\"\r\n", "$0\r\n\r\n");
}

TEST_F(ProtocolTest, ZeroAndNegativeMultibulkCountsAreSkipped) {
  ExpectReplyThenOpen("*0\r\n", "");
  ExpectReplyThenOpen("*-1\r\n", "");
  ExpectReplyThenOpen("*-10\r\n*0\r\nPING\r\n", "+PONG\r\n");
  ExpectReplyThenOpen("*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n", "+PONG\r\n");
}

TEST_F(ProtocolTest, BytesAfterBulkAreSkippedUnchecked) {
  ExpectReplyThenOpen("*2\r\n$4\r\necho\r\n$2\r\nhiXY", "$2\r\nhi\r\n");
  ExpectReplyThenOpen("*2\r\n$4\r\necho\r\n$2\r\nhiXY*1\r\n$4\r\nPING\r\n",
                      "$2\r\nhi\r\n+PONG\r\n");
}

TEST_F(ProtocolTest, RequestsSplitAcrossReadsAreReassembled) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  // Split right after a CR, inside a count line, inside a bulk and inside the final CRLF.
  for (std::string_view piece : {"*1\r", "\n$4\r\nPI", "NG\r", "\n"}) {
    ASSERT_TRUE(c->Send(piece));
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(c->Read(7, 3s), "+PONG\r\n");
  // A large argument (read straight into its own buffer) sent in odd-sized pieces.
  std::mt19937 rng(7);
  std::string value(200 * 1024 + 3, '\0');
  for (char& ch : value) ch = static_cast<char>(rng());
  std::string request = Multibulk({"ECHO", value});
  std::uniform_int_distribution<size_t> size(1, 9000);
  for (size_t pos = 0; pos < request.size();) {
    size_t n = std::min(size(rng), request.size() - pos);
    ASSERT_TRUE(c->Send(std::string_view(request).substr(pos, n)));
    pos += n;
  }
  std::string expected = Bulk(value);
  EXPECT_TRUE(c->Read(expected.size(), 5s) == expected) << "200 KiB ECHO came back altered";
  // One byte at a time.
  for (char ch : std::string("*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\n")) {
    ASSERT_TRUE(c->Send(std::string_view(&ch, 1)));
  }
  EXPECT_EQ(c->Read(9, 3s), "$3\r\nabc\r\n");
}

// A large argument's last bytes are read together with what follows them: its two closing bytes
// (skipped unchecked, as Redis does, whatever they are), then the next requests, small and large,
// in one send. Every reply comes back in order and exact, and the connection stays in step.
TEST_F(ProtocolTest, WhatFollowsALargeArgumentInTheSameReadIsServedInOrder) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  std::mt19937 rng(11);
  auto random_value = [&](size_t size) {
    std::string v(size, '\0');
    for (char& ch : v) ch = static_cast<char>(rng());
    return v;
  };
  const std::string first = random_value(300 * 1024 + 1), second = random_value(100 * 1024);
  std::string request = Multibulk({"ECHO", first});
  request.replace(request.size() - 2, 2, "XY");  // not a CRLF: skipped all the same
  request += Multibulk({"ECHO", "small"}) + "PING\r\n" + Multibulk({"ECHO", second}) +
             Multibulk({"ECHO", first}) + Multibulk({"ECHO", "last"});
  const std::string expected =
      Bulk(first) + Bulk("small") + "+PONG\r\n" + Bulk(second) + Bulk(first) + Bulk("last");
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(c->Send(request));
    EXPECT_TRUE(c->Read(expected.size(), 10s) == expected) << "round " << round;
  }
  // The value's end and the next request's start in one piece, the rest later.
  const std::string tail = Multibulk({"ECHO", second});
  const std::string both = Multibulk({"ECHO", first}) + tail;
  const size_t cut = both.size() - tail.size() + 7;
  ASSERT_TRUE(c->Send(std::string_view(both).substr(0, cut)));
  std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(c->Send(std::string_view(both).substr(cut)));
  const std::string expected_both = Bulk(first) + Bulk(second);
  EXPECT_TRUE(c->Read(expected_both.size(), 10s) == expected_both);
  EXPECT_EQ(c->Call("PING\r\n"), "+PONG\r\n");
}

// A connection reads into a 64 KiB buffer borrowed for the read, and moves what fits its 1 KiB
// array there (server/connection_memory.h). Bursts of every size around both edges, sent at once,
// with requests that straddle them, come back whole and in order.
TEST_F(ProtocolTest, BurstsAroundTheInputBuffersEdgesAreServedWhole) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  std::mt19937 rng(5);
  std::uniform_int_distribution<size_t> length(0, 300);
  auto echo = [](size_t n) { return Multibulk({"ECHO", std::string(n, 'v')}); };
  for (size_t total : {size_t{1023}, size_t{1024}, size_t{1025}, size_t{2049}, size_t{65535},
                       size_t{65536}, size_t{65537}, size_t{65536 + 1024}, size_t{131073}}) {
    std::string burst, expected;
    while (total - burst.size() > 400) {
      const size_t n = length(rng);
      burst += echo(n);
      expected += Bulk(std::string(n, 'v'));
    }
    // The last request, inline (7 bytes and its argument), ends the burst on its exact size.
    const std::string last(total - burst.size() - 7, 'v');
    burst += "ECHO " + last + "\r\n";
    expected += Bulk(last);
    ASSERT_EQ(burst.size(), total);
    ASSERT_TRUE(c->Send(burst));
    EXPECT_TRUE(c->Read(expected.size(), 5s) == expected) << "a burst of " << total << " bytes";
  }
  EXPECT_EQ(c->Call("PING\r\n"), "+PONG\r\n");
}

TEST_F(ProtocolTest, LongPipelineGetsEveryReplyInOrder) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  constexpr int kCount = 10000;
  std::string request, expected;
  for (int i = 0; i < kCount; ++i) {
    std::string n = std::to_string(i);
    request += i % 2 ? "PING\r\n" : Multibulk({"ECHO", n});
    expected += i % 2 ? "+PONG\r\n" : Bulk(n);
  }
  ASSERT_TRUE(c->Send(request));
  EXPECT_TRUE(c->Read(expected.size(), 10s) == expected);
}

// ---------------------------------------------------------------------------------------------
// Protocol errors: exact reply, then the connection is closed.

TEST_F(ProtocolTest, InvalidMultibulkLengthCloses) {
  const std::string kReply = "-ERR Protocol error: invalid multibulk length\r\n";
  for (std::string_view request : {"*3000000000\r\n", "*2147483648\r\n", "*abc\r\n", "*+1\r\n",
                                   "*01\r\n", "*\r\n", "*1a\r\n"}) {
    SCOPED_TRACE(::testing::PrintToString(std::string(request)));
    ExpectReplyThenClosed(request, kReply);
  }
}

TEST_F(ProtocolTest, LargestMultibulkCountIsAcceptedWithoutCommittingMemory) {
  int64_t rss_before = server_.RssKib();
  std::vector<std::unique_ptr<RawConnection>> conns;
  for (int i = 0; i < 8; ++i) {
    conns.push_back(Connect());
    ASSERT_NE(conns.back(), nullptr);
    ASSERT_TRUE(conns.back()->Send("*2147483647\r\n$4\r\nECHO\r\n"));
  }
  for (auto& c : conns) EXPECT_EQ(c->ReadQuiet(100ms), "") << "INT_MAX arguments are allowed";
  for (auto& c : conns) EXPECT_FALSE(c->peer_closed());
  EXPECT_LT(server_.RssKib() - rss_before, 64 * 1024)
      << "declaring 2147483647 arguments made the server commit memory for them";
  auto other = Connect();
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->Call("PING\r\n"), "+PONG\r\n");
}

TEST_F(ProtocolTest, ExpectedDollarCloses) {
  ExpectReplyThenClosed("*1\r\nfoo\r\n", "-ERR Protocol error: expected '$', got 'f'\r\n");
  ExpectReplyThenClosed("*2\r\n$4\r\nECHO\r\n:1\r\n",
                        "-ERR Protocol error: expected '$', got ':'\r\n");
}

TEST_F(ProtocolTest, InvalidBulkLengthCloses) {
  const std::string kReply = "-ERR Protocol error: invalid bulk length\r\n";
  for (std::string_view request :
       {"*1\r\n$-10\r\n", "*1\r\n$blabla\r\n", "*1\r\n$\r\n", "*1\r\n$2000000000\r\n",
        "*1\r\n$+1\r\n", "*1\r\n$01\r\n", "*1\r\n$-1\r\n"}) {
    SCOPED_TRACE(::testing::PrintToString(std::string(request)));
    ExpectReplyThenClosed(request, kReply);
  }
}

TEST_F(ProtocolTest, TooBigInlineRequestCloses) {
  ExpectReplyThenClosed(std::string(70000, 'a'), "-ERR Protocol error: too big inline request\r\n");
}

TEST_F(ProtocolTest, TooBigCountStringsClose) {
  ExpectReplyThenClosed("*" + std::string(70000, '1'),
                        "-ERR Protocol error: too big mbulk count string\r\n");
  ExpectReplyThenClosed("*1\r\n$" + std::string(70000, '1'),
                        "-ERR Protocol error: too big bulk count string\r\n");
}

TEST_F(ProtocolTest, UnbalancedQuotesClose) {
  const std::string kReply = "-ERR Protocol error: unbalanced quotes in request\r\n";
  ExpectReplyThenClosed("set \"\"\"test-key\"\"\" test-value\r\n", kReply);
  ExpectReplyThenClosed("echo \"a\"b\r\n", kReply);
  ExpectReplyThenClosed("echo \"abc\r\n", kReply);
  ExpectReplyThenClosed("echo 'abc\r\n", kReply);
}

TEST_F(ProtocolTest, CommandsBeforeABadFrameStillGetReplies) {
  ExpectReplyThenClosed("PING\r\n*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\n*1\r\nfoo\r\n",
                        "+PONG\r\n$3\r\nabc\r\n-ERR Protocol error: expected '$', got 'f'\r\n");
  ExpectReplyThenClosed("*1\r\n$4\r\nPING\r\n*abc\r\n",
                        "+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n");
  // A write pipelined before the bad frame is executed, not just answered.
  std::string blob(100 * 1024, 'q');
  ExpectReplyThenClosed(Multibulk({"SSM.PREFIX.STORE", "pipelined", "0", blob}) + "*1\r\n$x\r\n",
                        "+OK\r\n-ERR Protocol error: invalid bulk length\r\n");
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->Call(Multibulk({"SSM.PREFIX.FETCH", "pipelined", "0"})) == Bulk(blob));
}

// ---------------------------------------------------------------------------------------------
// Command-level errors keep the connection open.

TEST_F(ProtocolTest, UnknownCommand) {
  ExpectReplyThenOpen("FOO a b\r\n",
                      "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n");
  ExpectReplyThenOpen("FOO\r\n", "-ERR unknown command 'FOO', with args beginning with: \r\n");
  ExpectReplyThenOpen("*1\r\n$3\r\nfOo\r\n",
                      "-ERR unknown command 'fOo', with args beginning with: \r\n");
  // CR and LF inside the message become spaces.
  ExpectReplyThenOpen(Multibulk({"FoO", "a\r\nb", "c\nd"}),
                      "-ERR unknown command 'FoO', with args beginning with: 'a  b' 'c d' \r\n");
  // Arguments are printed as C strings: up to the first NUL.
  ExpectReplyThenOpen(Multibulk({"FOO", std::string("a\0b", 3), "c"}),
                      "-ERR unknown command 'FOO', with args beginning with: 'a' 'c' \r\n");
}

TEST_F(ProtocolTest, UnknownCommandTruncatesLongText) {
  ExpectReplyThenOpen(
      Multibulk({"FOO", std::string(200, 'x')}),
      "-ERR unknown command 'FOO', with args beginning with: '" + std::string(128, 'x') + "' \r\n");
  ExpectReplyThenOpen(
      Multibulk({std::string(200, 'F'), "a"}),
      "-ERR unknown command '" + std::string(128, 'F') + "', with args beginning with: 'a' \r\n");
  std::string y50(50, 'y');
  ExpectReplyThenOpen(Multibulk({"FOO", y50, y50, y50, y50, y50}),
                      "-ERR unknown command 'FOO', with args beginning with: '" + y50 + "' '" +
                          y50 + "' '" + std::string(22, 'y') + "' \r\n");
  std::vector<std::string> args = {"FOO"};
  for (int i = 0; i < 20; ++i) args.push_back(std::string(10, 'z'));
  ExpectReplyThenOpen(Multibulk(args), "-ERR unknown command 'FOO', with args beginning with: " +
                                           Repeat("'zzzzzzzzzz' ", 10) + "\r\n");
}

TEST_F(ProtocolTest, WrongArityNamesTheCommandInLowerCase) {
  ExpectReplyThenOpen("ECHO\r\n", "-ERR wrong number of arguments for 'echo' command\r\n");
  ExpectReplyThenOpen("EcHo a b\r\n", "-ERR wrong number of arguments for 'echo' command\r\n");
  ExpectReplyThenOpen("PING a b c\r\n", "-ERR wrong number of arguments for 'ping' command\r\n");
  ExpectReplyThenOpen("SELECT\r\n", "-ERR wrong number of arguments for 'select' command\r\n");
  ExpectReplyThenOpen("CONFIG\r\n", "-ERR wrong number of arguments for 'config' command\r\n");
  ExpectReplyThenOpen("CLIENT\r\n", "-ERR wrong number of arguments for 'client' command\r\n");
  ExpectReplyThenOpen("CONFIG GET\r\n",
                      "-ERR wrong number of arguments for 'config|get' command\r\n");
  ExpectReplyThenOpen("config SET foo\r\n",
                      "-ERR wrong number of arguments for 'config|set' command\r\n");
  ExpectReplyThenOpen("CLIENT SETNAME\r\n",
                      "-ERR wrong number of arguments for 'client|setname' command\r\n");
  ExpectReplyThenOpen("CLIENT GETNAME extra\r\n",
                      "-ERR wrong number of arguments for 'client|getname' command\r\n");
  ExpectReplyThenOpen("AUTH\r\n", "-ERR wrong number of arguments for 'auth' command\r\n");
  ExpectReplyThenOpen("SSM.PREFIX.STORE s\r\n",
                      "-ERR wrong number of arguments for 'ssm.prefix.store' command\r\n");
}

TEST_F(ProtocolTest, UnknownSubcommand) {
  ExpectReplyThenOpen("CLIENT FOO\r\n", "-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n");
  ExpectReplyThenOpen("client foo bar\r\n", "-ERR unknown subcommand 'foo'. Try CLIENT HELP.\r\n");
  ExpectReplyThenOpen("CONFIG FOO\r\n", "-ERR unknown subcommand 'FOO'. Try CONFIG HELP.\r\n");
}

TEST_F(ProtocolTest, FlushallSyntaxError) {
  ExpectReplyThenOpen("FLUSHALL FOO\r\n", "-ERR syntax error\r\n");
}

// ---------------------------------------------------------------------------------------------
// AUTH and HELLO.

TEST_F(ProtocolTest, AuthWithoutRequirepass) {
  ExpectReplyThenOpen("AUTH x\r\n",
                      "-ERR AUTH <password> called without any password configured for the "
                      "default user. Are you sure your configuration is correct?\r\n");
  ExpectReplyThenOpen("AUTH a b c\r\n", "-ERR syntax error\r\n");
  // The default user has no password: any password is accepted, as Redis's nopass user does.
  ExpectReplyThenOpen("AUTH default anything\r\n", "+OK\r\n");
}

TEST_F(ProtocolTest, HelloErrors) {
  ExpectReplyThenOpen("HELLO 4\r\n", "-NOPROTO unsupported protocol version\r\n");
  ExpectReplyThenOpen("HELLO 1\r\n", "-NOPROTO unsupported protocol version\r\n");
  ExpectReplyThenOpen("HELLO x\r\n", "-ERR Protocol version is not an integer or out of range\r\n");
  ExpectReplyThenOpen("HELLO 3 FOO\r\n", "-ERR Syntax error in HELLO option 'FOO'\r\n");
  ExpectReplyThenOpen("HELLO 3 SETNAME\r\n", "-ERR Syntax error in HELLO option 'SETNAME'\r\n");
  ExpectReplyThenOpen(
      "HELLO 2 SETNAME \"a b\"\r\n",
      "-ERR Client names cannot contain spaces, newlines or special characters.\r\n");
}

TEST_F(ProtocolTest, HelloShapesAndNullEncoding) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  int64_t id = ClientId(*c);
  EXPECT_EQ(c->Call("HELLO\r\n"), HelloReply(2, id));
  EXPECT_EQ(c->Call("HELLO 3\r\n"), HelloReply(3, id));
  // RESP3: null is `_`, CONFIG GET is a map.
  EXPECT_EQ(c->Call("CLIENT GETNAME\r\n"), "_\r\n");
  EXPECT_EQ(c->Call("CONFIG GET maxclients\r\n"), "%1\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "nosuch", "0"})), "_\r\n");
  // INFO is a verbatim string whose length counts "txt:" (the store is still empty).
  EXPECT_EQ(c->Call("INFO keyspace\r\n"), "=16\r\ntxt:# Keyspace\r\n\r\n");
  EXPECT_EQ(c->Call("HELLO 2\r\n"), HelloReply(2, id));
  // RESP2: null bulk is `$-1`, CONFIG GET is a flat array.
  EXPECT_EQ(c->Call("CLIENT GETNAME\r\n"), "$-1\r\n");
  EXPECT_EQ(c->Call("CONFIG GET maxclients\r\n"), "*2\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "nosuch", "0"})), "$-1\r\n");
  EXPECT_EQ(c->Call("INFO keyspace\r\n"), "$12\r\n# Keyspace\r\n\r\n");
  // HELLO with SETNAME names the connection.
  EXPECT_EQ(c->Call("HELLO 3 SETNAME worker-1\r\n"), HelloReply(3, id));
  EXPECT_EQ(c->Call("CLIENT GETNAME\r\n"), Bulk("worker-1"));
}

TEST_F(ProtocolTest, QuitRepliesOkClosesAndSkipsTheRest) {
  ExpectReplyThenClosed("QUIT\r\nPING\r\n", "+OK\r\n");
  ExpectReplyThenClosed("QUIT extra\r\nPING\r\n", "+OK\r\n");
  ExpectReplyThenClosed("*1\r\n$4\r\nQUIT\r\n*abc\r\n", "+OK\r\n");
  ExpectReplyThenClosed("QUIT\r\n" + Multibulk({"SSM.PREFIX.STORE", "after-quit", "0", "v"}),
                        "+OK\r\n");
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "after-quit", "0"})), "$-1\r\n")
      << "a command pipelined after QUIT was executed";
}

// ---------------------------------------------------------------------------------------------
// SELECT, CONFIG, CLIENT.

TEST_F(ProtocolTest, Select) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Call("SELECT 0\r\n"), "+OK\r\n");
  EXPECT_EQ(c->Call("SELECT 15\r\n"), "+OK\r\n");
  EXPECT_EQ(c->Call("SELECT 16\r\n"), "-ERR DB index is out of range\r\n");
  EXPECT_EQ(c->Call("SELECT -1\r\n"), "-ERR DB index is out of range\r\n");
  EXPECT_EQ(c->Call("SELECT x\r\n"), "-ERR value is not an integer or out of range\r\n");
  EXPECT_EQ(c->Call("SELECT 01\r\n"), "-ERR value is not an integer or out of range\r\n");
  EXPECT_EQ(c->Call("PING\r\n"), "+PONG\r\n");
}

TEST_F(ProtocolTest, SelectBeyondIntRangeMatchesRedis) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Call("SELECT 2147483648\r\n"),
            "-ERR value is out of range, value must between -2147483648 and 2147483647\r\n");
}

TEST_F(ProtocolTest, ConfigGetSetRoundTripAndErrors) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Call("CONFIG SET maxclients 77\r\n"), "+OK\r\n");
  EXPECT_EQ(c->Call("CONFIG GET maxclients\r\n"), "*2\r\n$10\r\nmaxclients\r\n$2\r\n77\r\n");
  EXPECT_EQ(c->Call("CONFIG SET maxclients 78 timeout 5\r\n"), "+OK\r\n");
  EXPECT_EQ(c->Call("CONFIG GET timeout\r\n"), "*2\r\n$7\r\ntimeout\r\n$1\r\n5\r\n");
  EXPECT_EQ(c->Call("CONFIG GET nosuch\r\n"), "*0\r\n");
  EXPECT_EQ(c->Call("CONFIG SET foo bar\r\n"),
            "-ERR Unknown option or number of arguments for CONFIG SET - 'foo'\r\n");
  EXPECT_EQ(c->Call("CONFIG SET maxclients 50 nosuch 1\r\n"),
            "-ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'\r\n");
  EXPECT_EQ(c->Call("CONFIG SET maxclients abc\r\n"),
            "-ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument "
            "couldn't be parsed into an integer\r\n");
  // All or nothing: a bad pair leaves the good one unapplied.
  EXPECT_EQ(c->Call("CONFIG SET maxclients 50 timeout abc\r\n"),
            "-ERR CONFIG SET failed (possibly related to argument 'timeout') - argument "
            "couldn't be parsed into an integer\r\n");
  EXPECT_EQ(c->Call("CONFIG GET maxclients\r\n"), "*2\r\n$10\r\nmaxclients\r\n$2\r\n78\r\n");
  EXPECT_EQ(c->Call("CONFIG SET unixsocket /x\r\n"),
            "-ERR CONFIG SET failed (possibly related to argument 'unixsocket') - can't set "
            "immutable config\r\n");
  // A glob returns every match, as name/value pairs.
  std::string all = c->Call("CONFIG GET *\r\n");
  ASSERT_EQ(all.substr(0, 1), "*") << all;
  EXPECT_EQ(std::stoll(all.substr(1)) % 2, 0) << all;
  EXPECT_NE(all.find("$10\r\nmaxclients\r\n$2\r\n78\r\n"), std::string::npos) << all;
  EXPECT_NE(all.find("$18\r\nproto-max-bulk-len\r\n"), std::string::npos) << all;
}

TEST_F(ProtocolTest, ConfigSetOddArgumentCountIsSyntaxError) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Call("CONFIG SET maxclients 5 maxclients\r\n"), "-ERR syntax error\r\n");
}

TEST_F(ProtocolTest, ConfigGetEchoesAnExactNameAsGiven) {
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Call("CONFIG GET MAXCLIENTS\r\n"), "*2\r\n$10\r\nMAXCLIENTS\r\n$5\r\n10000\r\n");
}

TEST_F(ProtocolTest, ClientSetnameGetnameIdInfoList) {
  auto a = Connect();
  auto b = Connect();
  ASSERT_TRUE(a && b);
  int64_t id_a = ClientId(*a), id_b = ClientId(*b);
  EXPECT_GT(id_a, 0);
  EXPECT_NE(id_a, id_b);
  EXPECT_EQ(a->Call("CLIENT GETNAME\r\n"), "$-1\r\n");
  EXPECT_EQ(a->Call("CLIENT SETNAME alpha\r\n"), "+OK\r\n");
  EXPECT_EQ(a->Call("CLIENT GETNAME\r\n"), Bulk("alpha"));
  EXPECT_EQ(b->Call("client setname beta\r\n"), "+OK\r\n");
  EXPECT_EQ(a->Call("CLIENT SETNAME \"a b\"\r\n"),
            "-ERR Client names cannot contain spaces, newlines or special characters.\r\n");
  EXPECT_EQ(a->Call("CLIENT GETNAME\r\n"), Bulk("alpha"));

  std::string info = a->Call("CLIENT INFO\r\n");
  ASSERT_EQ(info.substr(0, 1), "$") << info;
  std::string body = BulkBody(info);
  ASSERT_FALSE(body.empty()) << info;
  EXPECT_EQ(std::stoul(info.substr(1)), body.size());
  EXPECT_EQ(body.rfind("id=" + std::to_string(id_a) + " addr=127.0.0.1:", 0), 0u) << body;
  EXPECT_NE(body.find(" laddr=127.0.0.1:" + std::to_string(server_.port()) + " "),
            std::string::npos)
      << body;
  EXPECT_NE(body.find(" name=alpha "), std::string::npos) << body;
  EXPECT_NE(body.find(" cmd=client|info "), std::string::npos) << body;
  EXPECT_NE(body.find(" resp=2"), std::string::npos) << body;
  EXPECT_EQ(body.back(), '\n');

  std::string list = a->Call("CLIENT LIST\r\n");
  ASSERT_EQ(list.substr(0, 1), "$") << list;
  EXPECT_NE(list.find("id=" + std::to_string(id_a) + " "), std::string::npos) << list;
  EXPECT_NE(list.find("id=" + std::to_string(id_b) + " "), std::string::npos) << list;
  EXPECT_NE(list.find(" name=alpha "), std::string::npos) << list;
  EXPECT_NE(list.find(" name=beta "), std::string::npos) << list;
  std::string only_b = a->Call("CLIENT LIST ID " + std::to_string(id_b) + "\r\n");
  EXPECT_EQ(only_b.find("name=alpha"), std::string::npos) << only_b;
  EXPECT_NE(only_b.find(" name=beta "), std::string::npos) << only_b;

  // RESP3: CLIENT INFO is a verbatim string whose length counts "txt:".
  ASSERT_FALSE(a->Call("HELLO 3\r\n").empty());
  std::string verbatim = a->Call("CLIENT INFO\r\n");
  ASSERT_EQ(verbatim.substr(0, 1), "=") << verbatim;
  std::string vbody = BulkBody(verbatim);
  ASSERT_FALSE(vbody.empty()) << verbatim;
  EXPECT_EQ(std::stoul(verbatim.substr(1)), vbody.size());
  EXPECT_EQ(vbody.rfind("txt:id=" + std::to_string(id_a) + " ", 0), 0u) << vbody;
  EXPECT_NE(vbody.find(" resp=3"), std::string::npos) << vbody;
}

TEST_F(ProtocolTest, ClientKillClosesTheOtherConnection) {
  auto a = Connect();
  auto b = Connect();
  auto c = Connect();
  ASSERT_TRUE(a && b && c);
  int64_t id_b = ClientId(*b);
  EXPECT_EQ(a->Call("CLIENT KILL ID " + std::to_string(id_b) + "\r\n"), ":1\r\n");
  std::string extra;
  EXPECT_TRUE(b->WaitClosed(3s, &extra)) << "CLIENT KILL ID left the connection open";
  EXPECT_EQ(extra, "");

  // The old form takes ip:port, as CLIENT INFO reports it.
  std::string info = c->Call("CLIENT INFO\r\n");
  size_t at = info.find(" addr=");
  ASSERT_NE(at, std::string::npos) << info;
  std::string addr = info.substr(at + 6, info.find(' ', at + 6) - at - 6);
  EXPECT_EQ(a->Call("CLIENT KILL " + addr + "\r\n"), "+OK\r\n");
  EXPECT_TRUE(c->WaitClosed(3s, &extra)) << "CLIENT KILL " << addr << " left it open";

  EXPECT_EQ(a->Call("CLIENT KILL ID 0\r\n"), "-ERR client-id should be greater than 0\r\n");
  EXPECT_EQ(a->Call("CLIENT KILL ID abc\r\n"), "-ERR client-id should be greater than 0\r\n");
  EXPECT_EQ(a->Call("CLIENT KILL ID 999999\r\n"), ":0\r\n");
  EXPECT_EQ(a->Call("CLIENT KILL 1.2.3.4:5\r\n"), "-ERR No such client\r\n");
  EXPECT_EQ(a->Call("CLIENT KILL ADDR 1.2.3.4:5\r\n"), ":0\r\n");
  EXPECT_EQ(a->Call("CLIENT KILL a b c\r\n"), "-ERR syntax error\r\n");
  // SKIPME defaults to yes: killing by our own id kills nobody.
  int64_t id_a = ClientId(*a);
  EXPECT_EQ(a->Call("CLIENT KILL ID " + std::to_string(id_a) + "\r\n"), ":0\r\n");
  EXPECT_EQ(a->Call("PING\r\n"), "+PONG\r\n");
}

// Connects until the server accepts (a just-closed connection may still hold a slot briefly).
std::unique_ptr<RawConnection> ConnectAccepted(int port) {
  auto deadline = Clock::now() + 5s;
  while (Clock::now() < deadline) {
    auto c = RawConnection::Tcp(port);
    if (c && c->Call("PING\r\n", 2s) == "+PONG\r\n") return c;
    std::this_thread::sleep_for(50ms);
  }
  return nullptr;
}

void WaitForClientCount(RawConnection& c, size_t n) {
  auto deadline = Clock::now() + 5s;
  size_t lines = 0;
  while (Clock::now() < deadline) {
    std::string list = BulkBody(c.Call("CLIENT LIST\r\n"));
    lines = static_cast<size_t>(std::count(list.begin(), list.end(), '\n'));
    if (lines == n) return;
    std::this_thread::sleep_for(20ms);
  }
  FAIL() << "CLIENT LIST shows " << lines << " clients, expected " << n;
}

TEST_F(ProtocolTest, MaxclientsSetAtRuntimeRefusesTheThirdClient) {
  auto a = ConnectAccepted(server_.port());
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->Call("CONFIG SET maxclients 2\r\n"), "+OK\r\n");
  auto b = ConnectAccepted(server_.port());
  ASSERT_NE(b, nullptr);
  ASSERT_NO_FATAL_FAILURE(WaitForClientCount(*a, 2));
  auto c = RawConnection::Tcp(server_.port());
  ASSERT_NE(c, nullptr);
  std::string got;
  EXPECT_TRUE(c->WaitClosed(3s, &got)) << "the third client was not disconnected";
  EXPECT_EQ(got, "-ERR max number of clients reached\r\n");
  // The first two still work; once one leaves, a new client gets in.
  EXPECT_EQ(a->Call("PING\r\n"), "+PONG\r\n");
  EXPECT_EQ(b->Call("PING\r\n"), "+PONG\r\n");
  b.reset();
  EXPECT_NE(ConnectAccepted(server_.port()), nullptr);
}

class MaxclientsFlagTest : public ServerTest {};

TEST_F(MaxclientsFlagTest, MaxclientsFlagRefusesTheThirdClient) {
  ASSERT_NO_FATAL_FAILURE(StartServer({.flags = {"--maxclients", "2"}}));
  auto a = ConnectAccepted(server_.port());
  auto b = ConnectAccepted(server_.port());
  ASSERT_TRUE(a && b);
  ASSERT_NO_FATAL_FAILURE(WaitForClientCount(*a, 2));
  auto c = RawConnection::Tcp(server_.port());
  ASSERT_NE(c, nullptr);
  std::string got;
  EXPECT_TRUE(c->WaitClosed(3s, &got));
  EXPECT_EQ(got, "-ERR max number of clients reached\r\n");
  EXPECT_EQ(a->Call("CONFIG GET maxclients\r\n"), "*2\r\n$10\r\nmaxclients\r\n$1\r\n2\r\n");
}

// ---------------------------------------------------------------------------------------------
// proto-max-bulk-len set low by flag.

class ProtoMaxBulkLenTest : public ServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartServer({.flags = {"--proto-max-bulk-len", "1mb"}}));
  }
};

TEST_F(ProtoMaxBulkLenTest, BulkAtTheLimitIsAcceptedOnePastIsRejected) {
  constexpr size_t kLimit = 1024 * 1024;
  auto c = RawConnection::Tcp(server_.port());
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Call("CONFIG GET proto-max-bulk-len\r\n"),
            "*2\r\n$18\r\nproto-max-bulk-len\r\n$7\r\n1048576\r\n");
  std::string value(kLimit, 'v');
  std::string reply = c->Call(Multibulk({"ECHO", value}), 10s);
  EXPECT_TRUE(reply == Bulk(value))
      << "a bulk of exactly proto-max-bulk-len was not echoed (" << reply.size() << " bytes back)";
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.STORE", "s", "0", value}), 10s), "+OK\r\n");

  auto d = RawConnection::Tcp(server_.port());
  ASSERT_NE(d, nullptr);
  // Only the header: the server must refuse before the payload arrives.
  d->Send("*2\r\n$4\r\nECHO\r\n$" + std::to_string(kLimit + 1) + "\r\n");
  std::string got;
  EXPECT_TRUE(d->WaitClosed(3s, &got));
  EXPECT_EQ(got, "-ERR Protocol error: invalid bulk length\r\n");

  // Raising it at runtime lets the same bulk through.
  EXPECT_EQ(c->Call("CONFIG SET proto-max-bulk-len 2mb\r\n"), "+OK\r\n");
  auto e = RawConnection::Tcp(server_.port());
  ASSERT_NE(e, nullptr);
  std::string bigger(kLimit + 1, 'w');
  EXPECT_TRUE(e->Call(Multibulk({"ECHO", bigger}), 10s) == Bulk(bigger));
}

// ---------------------------------------------------------------------------------------------
// With requirepass.

class AuthProtocolTest : public ProtocolTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartServer({.flags = {"--requirepass", "secret"}}));
  }
};

TEST_F(AuthProtocolTest, CommandsBeforeAuthGetNoauth) {
  ExpectReplyThenOpen("PING\r\n", kNoAuth, kNoAuth);
  ExpectReplyThenOpen("*1\r\n$4\r\nPING\r\n", kNoAuth, kNoAuth);
  ExpectReplyThenOpen("CLIENT SETNAME x\r\n", kNoAuth, kNoAuth);
  ExpectReplyThenOpen(Multibulk({"SSM.PREFIX.FETCH", "s", "0"}), kNoAuth, kNoAuth);
  // Unknown commands and wrong arity are reported as such, not as NOAUTH.
  ExpectReplyThenOpen("FOO bar\r\n",
                      "-ERR unknown command 'FOO', with args beginning with: 'bar' \r\n", kNoAuth);
  ExpectReplyThenOpen("ECHO\r\n", "-ERR wrong number of arguments for 'echo' command\r\n", kNoAuth);
}

TEST_F(AuthProtocolTest, AuthAndHelloTexts) {
  const std::string kHelloNoAuth =
      "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO "
      "AUTH <user> <pass> option can be used to authenticate the client and select the RESP "
      "protocol version at the same time\r\n";
  ExpectReplyThenOpen("HELLO 3\r\n", kHelloNoAuth, kNoAuth);
  ExpectReplyThenOpen("HELLO\r\n", kHelloNoAuth, kNoAuth);
  ExpectReplyThenOpen("HELLO 4\r\n", "-NOPROTO unsupported protocol version\r\n", kNoAuth);
  ExpectReplyThenOpen("HELLO 3 AUTH default wrong\r\n", kWrongPass, kNoAuth);
  ExpectReplyThenOpen("AUTH wrong\r\n", kWrongPass, kNoAuth);
  ExpectReplyThenOpen("AUTH default wrong\r\n", kWrongPass, kNoAuth);
  ExpectReplyThenOpen("AUTH nobody secret\r\n", kWrongPass, kNoAuth);
  ExpectReplyThenOpen("AUTH x y z\r\n", "-ERR syntax error\r\n", kNoAuth);
  ExpectReplyThenOpen("AUTH secret\r\n", "+OK\r\n");
  ExpectReplyThenOpen("AUTH default secret\r\n", "+OK\r\n");

  auto c = Connect();
  ASSERT_NE(c, nullptr);
  std::string hello = c->Call("HELLO 3 AUTH default secret\r\n");
  int64_t id = ClientId(*c);
  EXPECT_EQ(hello, HelloReply(3, id));
  EXPECT_EQ(c->Call("CLIENT GETNAME\r\n"), "_\r\n");
  // RESET drops the authentication again.
  EXPECT_EQ(c->Call("RESET\r\n"), "+RESET\r\n");
  EXPECT_EQ(c->Call("PING\r\n"), kNoAuth);
  EXPECT_EQ(c->Call("HELLO 2 AUTH default secret SETNAME me\r\n"), HelloReply(2, id));
  EXPECT_EQ(c->Call("CLIENT GETNAME\r\n"), Bulk("me"));
}

TEST_F(AuthProtocolTest, QuitWorksBeforeAuth) {
  ExpectReplyThenClosed("QUIT\r\nPING\r\n", "+OK\r\n");
}

TEST_F(AuthProtocolTest, UnauthenticatedMultibulkLimit) {
  ExpectReplyThenOpen("*10\r\n" + Repeat("$4\r\nPING\r\n", 10), kNoAuth, kNoAuth);
  ExpectReplyThenClosed("*11\r\n" + Repeat("$4\r\nPING\r\n", 11),
                        "-ERR Protocol error: unauthenticated multibulk length\r\n");
  ExpectReplyThenClosed("*11\r\n", "-ERR Protocol error: unauthenticated multibulk length\r\n");
  // Authenticated clients have no such limit.
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  ExpectReplyThenOpen(*c, "AUTH secret\r\n*11\r\n" + Repeat("$4\r\nPING\r\n", 11),
                      "+OK\r\n-ERR wrong number of arguments for 'ping' command\r\n");
}

TEST_F(AuthProtocolTest, UnauthenticatedBulkLimit) {
  ExpectReplyThenOpen(Multibulk({"ECHO", std::string(16384, 'x')}), kNoAuth, kNoAuth);
  ExpectReplyThenClosed("*2\r\n$4\r\nECHO\r\n$16385\r\n",
                        "-ERR Protocol error: unauthenticated bulk length\r\n");
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  std::string big(16385, 'y');
  ExpectReplyThenOpen(*c, "AUTH secret\r\n" + Multibulk({"ECHO", big}), "+OK\r\n" + Bulk(big));
}

// ---------------------------------------------------------------------------------------------
// A client that pipelines requests and never reads must not stall others or grow the server.

TEST_F(ProtocolTest, NonReadingClientDoesNotStallOthersOrGrowMemory) {
  auto setup = Connect();
  ASSERT_NE(setup, nullptr);
  std::string blob(1024 * 1024, '\0');
  std::mt19937_64 rng(42);
  for (size_t i = 0; i + 8 <= blob.size(); i += 8) {
    uint64_t v = rng();
    std::memcpy(blob.data() + i, &v, 8);
  }
  ASSERT_EQ(setup->Call(Multibulk({"SSM.PREFIX.STORE", "big", "0", blob})), "+OK\r\n");
  int64_t rss_before = server_.RssKib();
  ASSERT_GT(rss_before, 0);

  auto flooder = Connect();
  ASSERT_NE(flooder, nullptr);
  std::string one = Multibulk({"SSM.PREFIX.FETCH", "big", "0"});
  std::string chunk = Repeat(one, (1024 * 1024) / one.size());
  constexpr size_t kMaxBytes = 50u * 1024 * 1024;
  std::atomic<size_t> sent{0};
  std::atomic<bool> done{false};
  std::thread flood([&] {
    auto deadline = Clock::now() + 4s;
    while (sent < kMaxBytes && Clock::now() < deadline) {
      auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
      size_t n = flooder->SendFor(chunk, left);
      sent += n;
      if (n < chunk.size()) break;
    }
    done = true;
  });

  auto other = Connect();
  ASSERT_NE(other, nullptr);
  int64_t rss_peak = rss_before;
  Millis worst{0};
  int pings = 0;
  auto until = Clock::now() + 4s;
  while (Clock::now() < until) {
    auto t0 = Clock::now();
    std::string reply = other->Call("PING\r\n", 3s);
    auto took = std::chrono::duration_cast<Millis>(Clock::now() - t0);
    ASSERT_EQ(reply, "+PONG\r\n") << "another client was not served while one never read";
    worst = std::max(worst, took);
    ++pings;
    rss_peak = std::max(rss_peak, server_.RssKib());
    std::this_thread::sleep_for(50ms);
  }
  flood.join();
  EXPECT_TRUE(other->Call(Multibulk({"SSM.PREFIX.FETCH", "big", "0"}), 5s) == Bulk(blob));
  rss_peak = std::max(rss_peak, server_.RssKib());
  EXPECT_LT(worst, Millis(1000)) << "slowest PING while another client flooded";
  EXPECT_LT(rss_peak - rss_before, 200 * 1024)
      << "RSS grew from " << rss_before << " KiB to " << rss_peak << " KiB after the flooder sent "
      << sent << " bytes of FETCH requests without reading";
  RecordProperty("flood_bytes_sent", static_cast<int>(sent));
  RecordProperty("rss_growth_kib", static_cast<int>(rss_peak - rss_before));
  EXPECT_GT(pings, 10);

  // Dropping the flooder mid-reply leaves the server healthy.
  flooder.reset();
  EXPECT_EQ(other->Call("PING\r\n"), "+PONG\r\n");
  EXPECT_TRUE(server_.Running());
}

}  // namespace
}  // namespace prefixd::it
