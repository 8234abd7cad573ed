// Checks SSM.PREFIX.* against the real server through hiredis, raw sockets, a unix socket and
// redis-cli: bit-exact blobs from 0 B to 300 MB, overwrite, drop, nil encodings, ranged fetch,
// multi-layer store/fetch, session-id and layer limits, and concurrent clients.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

enum class Pattern { kRandom, kZero, kOnes };

std::string PatternName(Pattern p) {
  switch (p) {
    case Pattern::kRandom:
      return "random";
    case Pattern::kZero:
      return "zero";
    case Pattern::kOnes:
      return "0xFF";
  }
  return "?";
}

std::string MakeBlob(size_t size, Pattern pattern, uint64_t seed = 1) {
  if (pattern == Pattern::kZero) return std::string(size, '\0');
  if (pattern == Pattern::kOnes) return std::string(size, '\xFF');
  std::string out(size, '\0');
  std::mt19937_64 rng(seed);
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  for (; i < size; ++i) out[i] = static_cast<char>(rng());
  return out;
}

std::string Bulk(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}

// Where two equally long byte strings first differ, for failure messages.
std::string FirstDifference(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return "sizes differ: " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return "first difference at byte " + std::to_string(i);
  }
  return "equal";
}

// Runs `write` on one thread and `read` on `readers` others for `how_long`, then sets `stop` and
// joins them all: the shape of the races below.
void Race(std::chrono::milliseconds how_long, std::atomic<bool>& stop, int readers,
          const std::function<void()>& write, const std::function<void()>& read) {
  std::thread writer(write);
  std::vector<std::thread> reading;
  for (int t = 0; t < readers; ++t) reading.emplace_back(read);
  std::this_thread::sleep_for(how_long);
  stop = true;
  writer.join();
  for (std::thread& r : reading) r.join();
}

class SsmTest : public ServerTest {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartServer()); }

  RedisContext Connect() {
    std::string error;
    auto ctx = ConnectHiredis(server_.port(), 60s, &error);
    EXPECT_NE(ctx, nullptr) << error;
    return ctx;
  }

  std::unique_ptr<RawConnection> ConnectRaw() {
    auto c = RawConnection::Tcp(server_.port());
    EXPECT_NE(c, nullptr);
    return c;
  }

  // Runs a command that must answer +OK.
  void ExpectOk(redisContext* ctx, const std::vector<std::string_view>& args) {
    auto r = HiredisCommand(ctx, args);
    ASSERT_NE(r, nullptr) << ctx->errstr;
    EXPECT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
    EXPECT_EQ(std::string(r->str, r->len), "OK") << DescribeReply(r.get());
  }

  void ExpectError(redisContext* ctx, const std::vector<std::string_view>& args,
                   std::string_view message) {
    auto r = HiredisCommand(ctx, args);
    ASSERT_NE(r, nullptr) << ctx->errstr;
    ASSERT_EQ(r->type, REDIS_REPLY_ERROR) << DescribeReply(r.get());
    EXPECT_EQ(std::string(r->str, r->len), message);
  }

  // FETCH that must return exactly `expected`.
  void ExpectBlob(redisContext* ctx, std::string_view sid, std::string_view layer,
                  std::string_view expected) {
    auto r = HiredisCommand(ctx, {"SSM.PREFIX.FETCH", sid, layer});
    ASSERT_NE(r, nullptr) << ctx->errstr;
    ASSERT_EQ(r->type, REDIS_REPLY_STRING) << DescribeReply(r.get());
    std::string_view got(r->str, r->len);
    EXPECT_TRUE(got == expected) << FirstDifference(got, expected) << " (sid "
                                 << ::testing::PrintToString(std::string(sid)) << ", layer "
                                 << layer << ")";
  }

  void ExpectNil(redisContext* ctx, std::string_view sid, std::string_view layer) {
    auto r = HiredisCommand(ctx, {"SSM.PREFIX.FETCH", sid, layer});
    ASSERT_NE(r, nullptr) << ctx->errstr;
    EXPECT_EQ(r->type, REDIS_REPLY_NIL) << DescribeReply(r.get());
  }
};

// ---------------------------------------------------------------------------------------------
// Bit-exact round trips.

TEST_F(SsmTest, RoundTripsEverySizeAndPatternBitExactly) {
  auto ctx = Connect();
  ASSERT_NE(ctx, nullptr);
  const size_t kSizes[] = {0, 1, 1024, 1024 * 1024, 64 * 1024 * 1024};
  int layer = 0;
  for (size_t size : kSizes) {
    for (Pattern p : {Pattern::kRandom, Pattern::kZero, Pattern::kOnes}) {
      SCOPED_TRACE(std::to_string(size) + " bytes, " + PatternName(p));
      std::string blob = MakeBlob(size, p, size + 17);
      std::string l = std::to_string(layer++);
      ASSERT_NO_FATAL_FAILURE(ExpectOk(ctx.get(), {"SSM.PREFIX.STORE", "rt", l, blob}));
      ASSERT_NO_FATAL_FAILURE(ExpectBlob(ctx.get(), "rt", l, blob));
      // Large values are dropped again to keep the server's memory small.
      if (size >= 1024 * 1024) ExpectOk(ctx.get(), {"SSM.PREFIX.DROP", "rt", l});
    }
  }
}

TEST_F(SsmTest, EmptyBlobIsAnEmptyBulkNotNil) {
  auto c = ConnectRaw();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.STORE", "e", "0", ""})), "+OK\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "e", "0"})), "$0\r\n\r\n");
  EXPECT_EQ(c->Call("HELLO 3\r\n").substr(0, 3), "%7\r");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "e", "0"})), "$0\r\n\r\n");
}

TEST_F(SsmTest, RoundTrips300MegabyteBlobs) {
  constexpr size_t kSize = 300u * 1024 * 1024;
  for (Pattern p : {Pattern::kRandom, Pattern::kOnes}) {
    SCOPED_TRACE(PatternName(p));
    auto ctx = Connect();
    ASSERT_NE(ctx, nullptr);
    auto t0 = Clock::now();
    {
      std::string blob = MakeBlob(kSize, p, 300);
      ASSERT_NO_FATAL_FAILURE(ExpectOk(ctx.get(), {"SSM.PREFIX.STORE", "huge", "7", blob}));
      ASSERT_NO_FATAL_FAILURE(ExpectBlob(ctx.get(), "huge", "7", blob));
    }
    ASSERT_NO_FATAL_FAILURE(ExpectOk(ctx.get(), {"SSM.PREFIX.DROP", "huge"}));
    ASSERT_NO_FATAL_FAILURE(ExpectNil(ctx.get(), "huge", "7"));
    RecordProperty(
        "seconds_300mb_" + PatternName(p),
        static_cast<int>(
            std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - t0).count()));
  }
}

TEST_F(SsmTest, StoreOverwrites) {
  auto ctx = Connect();
  ASSERT_NE(ctx, nullptr);
  std::string first = MakeBlob(100000, Pattern::kRandom, 1);
  std::string second = MakeBlob(777, Pattern::kRandom, 2);
  std::string third = MakeBlob(200000, Pattern::kOnes);
  ExpectOk(ctx.get(), {"SSM.PREFIX.STORE", "ow", "3", first});
  ExpectBlob(ctx.get(), "ow", "3", first);
  ExpectOk(ctx.get(), {"SSM.PREFIX.STORE", "ow", "3", second});
  ExpectBlob(ctx.get(), "ow", "3", second);
  ExpectOk(ctx.get(), {"SSM.PREFIX.STORE", "ow", "3", third});
  ExpectBlob(ctx.get(), "ow", "3", third);
  ExpectOk(ctx.get(), {"SSM.PREFIX.STORE", "ow", "3", ""});
  ExpectBlob(ctx.get(), "ow", "3", "");
}

TEST_F(SsmTest, DropOneLayerAndAllLayers) {
  auto ctx = Connect();
  ASSERT_NE(ctx, nullptr);
  for (std::string_view l : {"0", "1", "2"}) {
    ExpectOk(ctx.get(), {"SSM.PREFIX.STORE", "d", l, std::string("v") + std::string(l)});
  }
  ExpectOk(ctx.get(), {"SSM.PREFIX.STORE", "other", "1", "keep"});
  ExpectOk(ctx.get(), {"SSM.PREFIX.DROP", "d", "1"});
  ExpectNil(ctx.get(), "d", "1");
  ExpectBlob(ctx.get(), "d", "0", "v0");
  ExpectBlob(ctx.get(), "d", "2", "v2");
  // Dropping what is not there is not an error.
  ExpectOk(ctx.get(), {"SSM.PREFIX.DROP", "d", "1"});
  ExpectOk(ctx.get(), {"SSM.PREFIX.DROP", "d"});
  ExpectNil(ctx.get(), "d", "0");
  ExpectNil(ctx.get(), "d", "2");
  ExpectBlob(ctx.get(), "other", "1", "keep");
  ExpectOk(ctx.get(), {"SSM.PREFIX.DROP", "never-stored"});
  ExpectError(ctx.get(), {"SSM.PREFIX.DROP", "d", "x"},
              "ERR invalid layer 'x': must be an integer from 0 to 2147483647");
  ExpectError(ctx.get(), {"SSM.PREFIX.DROP", "d", "1", "2"}, "ERR syntax error");
  auto c = ConnectRaw();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.LAYERS", "d"})), "*0\r\n");
}

TEST_F(SsmTest, MissIsNilInResp2AndResp3) {
  auto c = ConnectRaw();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "missing", "0"})), "$-1\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "missing", "0", "RANGE", "0", "5"})), "$-1\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MFETCH", "missing", "0", "1"})), "*2\r\n$-1\r\n$-1\r\n");
  EXPECT_EQ(c->Call("HELLO 3\r\n").substr(0, 3), "%7\r");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "missing", "0"})), "_\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "missing", "0", "RANGE", "0", "5"})), "_\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MFETCH", "missing", "0", "1"})), "*2\r\n_\r\n_\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.LAYERS", "missing"})), "%0\r\n");
}

// A small session lives in its keyspace entry and FETCH/MFETCH read it there in one lookup,
// before the registry's type check: the type, expiry, error order and output limit it skips
// must come out as on the general way.
TEST_F(SsmTest, ASmallSessionsFastReadKeepsTypeExpiryErrorsAndLimit) {
  auto c = ConnectRaw();
  ASSERT_NE(c, nullptr);
  const std::string wrongtype =
      "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
  ASSERT_EQ(c->Call(Multibulk({"SET", "str", "v"})), "+OK\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "str", "0"})), wrongtype);
  // The type is checked before the layer, as it always was.
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "str", "-1"})), wrongtype);
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MFETCH", "str", "0", "x"})), wrongtype);

  ASSERT_EQ(c->Call(Multibulk({"SSM.PREFIX.STORE", "small", "0", "abc"})), "+OK\r\n");
  ASSERT_EQ(c->Call(Multibulk({"SSM.PREFIX.STORE", "small", "1", "de"})), "+OK\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "small", "0"})), "$3\r\nabc\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "small", "5"})), "$-1\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "small", "0", "RANGE", "1", "5"})),
            "$2\r\nbc\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MFETCH", "small", "1", "7", "0"})),
            "*3\r\n$2\r\nde\r\n$-1\r\n$3\r\nabc\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "small", "01"})),
            "-ERR invalid layer '01': must be an integer from 0 to 2147483647\r\n");

  // Past its expiry a small session is gone for both reads, and from the keyspace.
  ASSERT_EQ(c->Call(Multibulk({"PEXPIRE", "small", "30"})), ":1\r\n");
  std::this_thread::sleep_for(80ms);
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MFETCH", "small", "0"})), "*1\r\n$-1\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "small", "0"})), "$-1\r\n");
  EXPECT_EQ(c->Call(Multibulk({"EXISTS", "small"})), ":0\r\n");

  // The output limit: each 100-byte layer costs 116; exactly 100 fit under 11600.
  ASSERT_EQ(c->Call(Multibulk({"SSM.PREFIX.STORE", "limit", "0", std::string(100, 'l')})),
            "+OK\r\n");
  ASSERT_EQ(c->Call(Multibulk({"CONFIG", "SET", "client-output-buffer-limit", "11600"})),
            "+OK\r\n");
  auto mfetch = [](int n) {
    std::vector<std::string> args = {"SSM.PREFIX.MFETCH", "limit"};
    for (int i = 0; i < n; ++i) args.push_back("0");
    return args;
  };
  EXPECT_EQ(c->Call(Multibulk(mfetch(100))).substr(0, 6), "*100\r\n");
  EXPECT_EQ(c->Call(Multibulk(mfetch(101))),
            "-ERR SSM.PREFIX.MFETCH: a reply of 11716 bytes would exceed "
            "client-output-buffer-limit (11600); fetch fewer layers per call\r\n");
}

// MFETCH frames a small session's reply on the stack: nil layers as the protocol spells them,
// a reply past the stack's buffer framed the general way, and every layer counted as a keyspace
// hit or miss, as FETCH counts its one.
TEST_F(SsmTest, ASmallSessionsMFetchFramesNilsAndCountsEachLayer) {
  auto c = ConnectRaw();
  ASSERT_NE(c, nullptr);
  auto stat = [&](const std::string& name) {
    const std::string info = c->Call(Multibulk({"INFO", "stats"}));
    const size_t at = info.find(name + ":");
    return at == std::string::npos ? -1L : std::stol(info.substr(at + name.size() + 1));
  };
  ASSERT_EQ(c->Call(Multibulk({"SSM.PREFIX.MSTORE", "s", "0", "abc", "2", std::string(100, 'x')})),
            "+OK\r\n");
  const long hits = stat("keyspace_hits"), misses = stat("keyspace_misses");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MFETCH", "s", "0", "1", "0"})),
            "*3\r\n$3\r\nabc\r\n$-1\r\n$3\r\nabc\r\n");
  EXPECT_EQ(stat("keyspace_hits"), hits + 2);
  EXPECT_EQ(stat("keyspace_misses"), misses + 1);
  // Three 100-byte layers (a small session's are at most 128) outgrow the stack's 256 bytes.
  const std::string big = "$100\r\n" + std::string(100, 'x') + "\r\n";
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MFETCH", "s", "2", "9", "2", "2"})),
            "*4\r\n" + big + "$-1\r\n" + big + big);
  EXPECT_EQ(stat("keyspace_hits"), hits + 5);
  EXPECT_EQ(stat("keyspace_misses"), misses + 2);
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "s", "7"})), "$-1\r\n");
  EXPECT_EQ(stat("keyspace_misses"), misses + 3);
  EXPECT_EQ(c->Call("HELLO 3\r\n").substr(0, 3), "%7\r");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MFETCH", "s", "1", "0"})), "*2\r\n_\r\n$3\r\nabc\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MFETCH", "s", "9", "2"})), "*2\r\n_\r\n" + big);
}

// ---------------------------------------------------------------------------------------------
// FETCH ... RANGE.

TEST_F(SsmTest, FetchRangeSlices) {
  auto c = ConnectRaw();
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->Call(Multibulk({"SSM.PREFIX.STORE", "r", "0", "0123456789"})), "+OK\r\n");
  auto range = [&](std::string offset, std::string length) {
    return c->Call(Multibulk({"SSM.PREFIX.FETCH", "r", "0", "RANGE", offset, length}));
  };
  EXPECT_EQ(range("2", "3"), Bulk("234"));
  EXPECT_EQ(range("0", "10"), Bulk("0123456789"));
  EXPECT_EQ(range("8", "100"), Bulk("89"));  // clamped at the end
  EXPECT_EQ(range("0", "9223372036854775807"), Bulk("0123456789"));
  EXPECT_EQ(range("9", "1"), Bulk("9"));
  EXPECT_EQ(range("10", "5"), "$0\r\n\r\n");   // offset at the end
  EXPECT_EQ(range("100", "1"), "$0\r\n\r\n");  // offset past the end
  EXPECT_EQ(range("3", "0"), "$0\r\n\r\n");    // length 0
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "r", "0", "range", "1", "2"})), Bulk("12"));
  EXPECT_EQ(range("-1", "2"), "-ERR invalid offset '-1': must be a non-negative integer\r\n");
  EXPECT_EQ(range("abc", "2"), "-ERR invalid offset 'abc': must be a non-negative integer\r\n");
  EXPECT_EQ(range("01", "2"), "-ERR invalid offset '01': must be a non-negative integer\r\n");
  EXPECT_EQ(range("1", "-2"), "-ERR invalid length '-2': must be a non-negative integer\r\n");
  EXPECT_EQ(range("1", "x"), "-ERR invalid length 'x': must be a non-negative integer\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "r", "0", "RANGX", "0", "1"})),
            "-ERR syntax error\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "r", "0", "RANGE", "1"})),
            "-ERR syntax error\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "r", "0", "RANGE", "1", "2", "3"})),
            "-ERR syntax error\r\n");
}

TEST_F(SsmTest, FetchRangeOfALargeBlob) {
  auto ctx = Connect();
  ASSERT_NE(ctx, nullptr);
  std::string blob = MakeBlob(3 * 1024 * 1024 + 11, Pattern::kRandom, 99);
  ExpectOk(ctx.get(), {"SSM.PREFIX.STORE", "lr", "5", blob});
  struct Case {
    size_t offset, length;
  };
  for (Case k : {Case{0, 1}, Case{500000, 100000}, Case{1024 * 1024 - 1, 2 * 1024 * 1024},
                 Case{blob.size() - 10, 1000}, Case{blob.size(), 1}}) {
    SCOPED_TRACE(std::to_string(k.offset) + "+" + std::to_string(k.length));
    std::string off = std::to_string(k.offset), len = std::to_string(k.length);
    auto r = HiredisCommand(ctx.get(), {"SSM.PREFIX.FETCH", "lr", "5", "RANGE", off, len});
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->type, REDIS_REPLY_STRING) << DescribeReply(r.get());
    std::string expected = blob.substr(std::min(k.offset, blob.size()), k.length);
    EXPECT_TRUE(std::string_view(r->str, r->len) == expected)
        << FirstDifference(std::string_view(r->str, r->len), expected);
  }
}

// ---------------------------------------------------------------------------------------------
// MSTORE / MFETCH / LAYERS.

TEST_F(SsmTest, MstoreMfetchLayers) {
  auto c = ConnectRaw();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MSTORE", "m", "0", "a", "1", "bb", "5", "ccc"})),
            "+OK\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MFETCH", "m", "0", "1", "2", "5"})),
            "*4\r\n$1\r\na\r\n$2\r\nbb\r\n$-1\r\n$3\r\nccc\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MFETCH", "m", "5"})), "*1\r\n$3\r\nccc\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.LAYERS", "m"})),
            "*6\r\n:0\r\n:1\r\n:1\r\n:2\r\n:5\r\n:3\r\n");
  // MSTORE overwrites only the layers it names.
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MSTORE", "m", "1", "", "9", "nine"})), "+OK\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MFETCH", "m", "0", "1", "5", "9"})),
            "*4\r\n$1\r\na\r\n$0\r\n\r\n$3\r\nccc\r\n$4\r\nnine\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "m", "9"})), Bulk("nine"));
  // Errors: odd pairs, a bad layer (nothing is stored), arity.
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MSTORE", "m", "0", "a", "1"})),
            "-ERR wrong number of arguments for 'ssm.prefix.mstore' command\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MSTORE", "m", "0", "new", "x", "y"})),
            "-ERR invalid layer 'x': must be an integer from 0 to 2147483647\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.FETCH", "m", "0"})), Bulk("a"));
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MSTORE", "m", "0"})),
            "-ERR wrong number of arguments for 'ssm.prefix.mstore' command\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MFETCH", "m"})),
            "-ERR wrong number of arguments for 'ssm.prefix.mfetch' command\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MFETCH", "m", "0", "-1"})),
            "-ERR invalid layer '-1': must be an integer from 0 to 2147483647\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.LAYERS"})),
            "-ERR wrong number of arguments for 'ssm.prefix.layers' command\r\n");
  // RESP3: LAYERS is a map from layer to size.
  EXPECT_EQ(c->Call("HELLO 3\r\n").substr(0, 3), "%7\r");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.LAYERS", "m"})),
            "%4\r\n:0\r\n:1\r\n:1\r\n:0\r\n:5\r\n:3\r\n:9\r\n:4\r\n");
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.MFETCH", "m", "1", "2"})), "*2\r\n$0\r\n\r\n_\r\n");
}

TEST_F(SsmTest, MstoreMfetchLargeBlobsBitExactly) {
  auto ctx = Connect();
  ASSERT_NE(ctx, nullptr);
  std::vector<std::string> blobs;
  std::vector<std::string> names;
  std::vector<std::string_view> args = {"SSM.PREFIX.MSTORE", "big-m"};
  for (int i = 0; i < 6; ++i) {
    blobs.push_back(MakeBlob(static_cast<size_t>(i) * 700000 + 3, Pattern::kRandom, 1000 + i));
    names.push_back(std::to_string(i * 10));
  }
  for (int i = 0; i < 6; ++i) {
    args.push_back(names[i]);
    args.push_back(blobs[i]);
  }
  ExpectOk(ctx.get(), args);
  std::vector<std::string_view> fetch = {"SSM.PREFIX.MFETCH", "big-m"};
  for (int i = 5; i >= 0; --i) fetch.push_back(names[i]);
  auto r = HiredisCommand(ctx.get(), fetch);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY) << DescribeReply(r.get());
  ASSERT_EQ(r->elements, 6u);
  for (int i = 0; i < 6; ++i) {
    const redisReply* e = r->element[5 - i];
    ASSERT_EQ(e->type, REDIS_REPLY_STRING) << DescribeReply(e);
    EXPECT_TRUE(std::string_view(e->str, e->len) == blobs[i]) << "layer " << names[i];
  }
}

// ---------------------------------------------------------------------------------------------
// Session ids and layers.

TEST_F(SsmTest, SessionIdsAreBinarySafe) {
  auto ctx = Connect();
  ASSERT_NE(ctx, nullptr);
  const std::vector<std::string> sids = {std::string("a\0b", 3),
                                         std::string("a\0c", 3),
                                         "a",
                                         std::string("\0", 1),
                                         std::string("\0\0", 2),
                                         "with space",
                                         "cr\r\nlf",
                                         "\xFF\xFE\x80",
                                         ""};
  for (size_t i = 0; i < sids.size(); ++i) {
    ExpectOk(ctx.get(), {"SSM.PREFIX.STORE", sids[i], "0", "value-" + std::to_string(i)});
  }
  for (size_t i = 0; i < sids.size(); ++i) {
    SCOPED_TRACE(::testing::PrintToString(sids[i]));
    ExpectBlob(ctx.get(), sids[i], "0", "value-" + std::to_string(i));
  }
  ExpectOk(ctx.get(), {"SSM.PREFIX.DROP", sids[0]});
  ExpectNil(ctx.get(), sids[0], "0");
  ExpectBlob(ctx.get(), sids[1], "0", "value-1");
  ExpectBlob(ctx.get(), sids[2], "0", "value-2");
}

TEST_F(SsmTest, MaxSidLenIsEnforcedAtTheLimit) {
  auto ctx = Connect();
  ASSERT_NE(ctx, nullptr);
  std::string at_limit(1024, 's');
  std::string past(1025, 's');
  ExpectOk(ctx.get(), {"SSM.PREFIX.STORE", at_limit, "0", "ok"});
  ExpectBlob(ctx.get(), at_limit, "0", "ok");
  const std::string kPast = "ERR invalid sid: 1025 bytes is longer than max-sid-len (1024)";
  ExpectError(ctx.get(), {"SSM.PREFIX.STORE", past, "0", "no"}, kPast);
  ExpectError(ctx.get(), {"SSM.PREFIX.FETCH", past, "0"}, kPast);
  ExpectError(ctx.get(), {"SSM.PREFIX.MSTORE", past, "0", "no"}, kPast);
  ExpectError(ctx.get(), {"SSM.PREFIX.MFETCH", past, "0"}, kPast);
  ExpectError(ctx.get(), {"SSM.PREFIX.DROP", past}, kPast);
  ExpectError(ctx.get(), {"SSM.PREFIX.LAYERS", past}, kPast);
  // The limit is a setting.
  ExpectOk(ctx.get(), {"CONFIG", "SET", "max-sid-len", "8"});
  ExpectOk(ctx.get(), {"SSM.PREFIX.STORE", "12345678", "0", "eight"});
  ExpectError(ctx.get(), {"SSM.PREFIX.STORE", "123456789", "0", "nine"},
              "ERR invalid sid: 9 bytes is longer than max-sid-len (8)");
}

TEST_F(SsmTest, LayerNumbersAreCheckedStrictly) {
  auto ctx = Connect();
  ASSERT_NE(ctx, nullptr);
  ExpectOk(ctx.get(), {"SSM.PREFIX.STORE", "l", "0", "zero"});
  ExpectOk(ctx.get(), {"SSM.PREFIX.STORE", "l", "2147483647", "max"});
  ExpectBlob(ctx.get(), "l", "0", "zero");
  ExpectBlob(ctx.get(), "l", "2147483647", "max");
  for (std::string bad :
       {"-1", "2147483648", "abc", "01", "", "+1", " 1", "1.0", "-0", "99999999999999999999999"}) {
    SCOPED_TRACE(::testing::PrintToString(bad));
    std::string message =
        "ERR invalid layer '" + bad + "': must be an integer from 0 to 2147483647";
    ExpectError(ctx.get(), {"SSM.PREFIX.STORE", "l", bad, "x"}, message);
    ExpectError(ctx.get(), {"SSM.PREFIX.FETCH", "l", bad}, message);
  }
  auto c = ConnectRaw();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Call(Multibulk({"SSM.PREFIX.LAYERS", "l"})),
            "*4\r\n:0\r\n:4\r\n:2147483647\r\n:3\r\n");
}

// ---------------------------------------------------------------------------------------------
// Concurrency.

TEST_F(SsmTest, ConcurrentClientsOnDistinctSessionsNeverBleed) {
  constexpr int kClients = 64;
  constexpr int kRounds = 12;
  std::atomic<int> failures{0};
  std::vector<std::string> errors(kClients);
  std::vector<std::vector<std::string>> last(kClients, std::vector<std::string>(4));
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      std::string error;
      auto ctx = ConnectHiredis(server_.port(), 30s, &error);
      if (!ctx) {
        errors[t] = "connect: " + error;
        ++failures;
        return;
      }
      std::mt19937_64 rng(static_cast<uint64_t>(t) * 7919 + 1);
      std::string sid = "session-" + std::to_string(t);
      for (int round = 0; round < kRounds; ++round) {
        std::string layer = std::to_string(round % 4);
        // A header naming the session makes any bleed obvious, random bytes make it bit-exact.
        std::string blob = sid + "/" + std::to_string(round) + "/" +
                           MakeBlob(rng() % (96 * 1024), Pattern::kRandom, rng());
        auto w = HiredisCommand(ctx.get(), {"SSM.PREFIX.STORE", sid, layer, blob});
        if (!w || w->type != REDIS_REPLY_STATUS) {
          errors[t] = "STORE: " + (w ? DescribeReply(w.get()) : std::string(ctx->errstr));
          ++failures;
          return;
        }
        auto r = HiredisCommand(ctx.get(), {"SSM.PREFIX.FETCH", sid, layer});
        if (!r || r->type != REDIS_REPLY_STRING || std::string_view(r->str, r->len) != blob) {
          errors[t] = "FETCH " + sid + " " + layer + " returned " +
                      (r ? DescribeReply(r.get()) : std::string(ctx->errstr));
          ++failures;
          return;
        }
        last[t][round % 4] = std::move(blob);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kClients; ++t) EXPECT_EQ(errors[t], "") << "client " << t;
  ASSERT_EQ(failures.load(), 0);
  // Afterwards every session holds exactly its own last writes.
  auto ctx = Connect();
  ASSERT_NE(ctx, nullptr);
  for (int t = 0; t < kClients; ++t) {
    std::string sid = "session-" + std::to_string(t);
    for (int l = 0; l < 4; ++l) ExpectBlob(ctx.get(), sid, std::to_string(l), last[t][l]);
  }
}

TEST_F(SsmTest, MfetchNeverSeesHalfOfAnMstore) {
  constexpr int kLayers = 8;
  constexpr size_t kBlobSize = 64 * 1024;
  const std::string gen_a(kBlobSize, 'A'), gen_b(kBlobSize, 'B');
  auto writer_ctx = Connect();
  ASSERT_NE(writer_ctx, nullptr);
  auto store_generation = [&](redisContext* ctx, const std::string& blob) {
    std::vector<std::string> names;
    for (int l = 0; l < kLayers; ++l) names.push_back(std::to_string(l));
    std::vector<std::string_view> args = {"SSM.PREFIX.MSTORE", "race"};
    for (int l = 0; l < kLayers; ++l) {
      args.push_back(names[l]);
      args.push_back(blob);
    }
    auto r = HiredisCommand(ctx, args);
    return r && r->type == REDIS_REPLY_STATUS;
  };
  ASSERT_TRUE(store_generation(writer_ctx.get(), gen_a));

  std::atomic<bool> stop{false};
  std::atomic<int> writes{0}, reads{0}, torn{0}, broken{0};
  std::string first_problem;
  std::mutex problem_mu;
  auto report = [&](std::string what) {
    std::lock_guard lock(problem_mu);
    if (first_problem.empty()) first_problem = std::move(what);
  };
  const auto write = [&] {
    for (int i = 0; !stop; ++i) {
      if (!store_generation(writer_ctx.get(), i % 2 ? gen_a : gen_b)) {
        ++broken;
        report("MSTORE failed");
        return;
      }
      ++writes;
    }
  };
  const auto read = [&] {
    auto ctx = ConnectHiredis(server_.port(), 30s);
    if (!ctx) {
      ++broken;
      return;
    }
    while (!stop) {
      auto r = HiredisCommand(
          ctx.get(), {"SSM.PREFIX.MFETCH", "race", "0", "1", "2", "3", "4", "5", "6", "7"});
      if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != kLayers) {
        ++broken;
        report("MFETCH returned " + DescribeReply(r.get()));
        return;
      }
      std::string mix;
      for (size_t l = 0; l < kLayers; ++l) {
        const redisReply* e = r->element[l];
        if (e->type != REDIS_REPLY_STRING || e->len != kBlobSize) {
          ++broken;
          report("layer " + std::to_string(l) + ": " + DescribeReply(e));
          return;
        }
        std::string_view v(e->str, e->len);
        if (v != gen_a && v != gen_b) {
          ++broken;
          report("layer " + std::to_string(l) + " is neither all A nor all B");
          return;
        }
        mix += v[0];
      }
      if (mix != std::string(kLayers, 'A') && mix != std::string(kLayers, 'B')) {
        ++torn;
        report("MFETCH saw generations " + mix);
      }
      ++reads;
    }
  };
  Race(2500ms, stop, 3, write, read);
  EXPECT_EQ(broken.load(), 0) << first_problem;
  EXPECT_EQ(torn.load(), 0) << first_problem << " (" << torn << " of " << reads << " reads)";
  EXPECT_GT(writes.load(), 10);
  EXPECT_GT(reads.load(), 10);
  RecordProperty("mstore_writes", writes.load());
  RecordProperty("mfetch_reads", reads.load());
}

// A small session lives in its key's entry and moves to the store when it grows (docs/cache-
// design.md, "Small SSM sessions in their keyspace entry"). Readers racing a writer that creates
// sessions small, grows them past the entry and deletes them see each MSTORE whole or not at all.
TEST_F(SsmTest, MfetchSeesWholeMstoresWhileSessionsMoveOutOfTheirEntry) {
  constexpr int kLayers = 4;
  const std::string small_a(16, 'a'), small_b(16, 'b'), large(200, 'L');
  auto writer_ctx = Connect();
  ASSERT_NE(writer_ctx, nullptr);
  const auto mstore = [&](const std::string& blob) {
    std::vector<std::string_view> args = {"SSM.PREFIX.MSTORE", "moving"};
    static const char* kNames[] = {"0", "1", "2", "3"};
    for (int l = 0; l < kLayers; ++l) {
      args.push_back(kNames[l]);
      args.push_back(blob);
    }
    auto r = HiredisCommand(writer_ctx.get(), args);
    return r && r->type == REDIS_REPLY_STATUS;
  };
  std::atomic<bool> stop{false};
  std::atomic<int> cycles{0}, reads{0}, bad{0};
  std::string first_problem;
  std::mutex problem_mu;
  const auto report = [&](std::string what) {
    std::lock_guard lock(problem_mu);
    if (first_problem.empty()) first_problem = std::move(what);
    ++bad;
  };
  const auto write = [&] {
    for (int i = 0; !stop; ++i) {
      // Small (in the entry), small again (rewritten there), large (moved to the store), gone.
      if (!mstore(i % 2 ? small_a : small_b) || !mstore(i % 2 ? small_b : small_a) ||
          !mstore(large)) {
        return report("MSTORE failed");
      }
      auto r = HiredisCommand(writer_ctx.get(), {"DEL", "moving"});
      if (!r || r->type != REDIS_REPLY_INTEGER) return report("DEL failed");
      ++cycles;
    }
  };
  const auto read = [&] {
    auto ctx = ConnectHiredis(server_.port(), 30s);
    if (!ctx) return report("no connection");
    while (!stop) {
      auto r = HiredisCommand(ctx.get(), {"SSM.PREFIX.MFETCH", "moving", "0", "1", "2", "3"});
      if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != kLayers) {
        return report("MFETCH returned " + DescribeReply(r.get()));
      }
      std::string seen;
      for (size_t l = 0; l < kLayers; ++l) {
        const redisReply* e = r->element[l];
        if (e->type == REDIS_REPLY_NIL) {
          seen += '-';
        } else if (std::string_view v(e->str, e->len); v == small_a || v == small_b || v == large) {
          seen += v[0];
        } else {
          return report("layer " + std::to_string(l) + " holds none of the values written");
        }
      }
      if (seen != std::string(kLayers, seen[0])) return report("MFETCH saw " + seen);
      ++reads;
    }
  };
  Race(2000ms, stop, 2, write, read);
  EXPECT_EQ(bad.load(), 0) << first_problem;
  EXPECT_GT(cycles.load(), 10);
  EXPECT_GT(reads.load(), 10);
}

// ---------------------------------------------------------------------------------------------
// Other transports and clients.

class SsmUnixSocketTest : public ServerTest {};

TEST_F(SsmUnixSocketTest, HiredisAndRawOverAUnixSocket) {
  ASSERT_NO_FATAL_FAILURE(StartServer({.unix_socket = true}));
  ASSERT_TRUE(std::filesystem::exists(server_.unix_socket_path()));
  std::string error;
  auto ctx = ConnectHiredisUnix(server_.unix_socket_path(), 30s, &error);
  ASSERT_NE(ctx, nullptr) << error;
  std::string blob = MakeBlob(2 * 1024 * 1024 + 5, Pattern::kRandom, 5);
  auto r = HiredisCommand(ctx.get(), {"SSM.PREFIX.STORE", "unix", "1", blob});
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
  r = HiredisCommand(ctx.get(), {"SSM.PREFIX.FETCH", "unix", "1"});
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->type, REDIS_REPLY_STRING) << DescribeReply(r.get());
  EXPECT_TRUE(std::string_view(r->str, r->len) == blob);

  auto raw = RawConnection::Unix(server_.unix_socket_path(), &error);
  ASSERT_NE(raw, nullptr) << error;
  EXPECT_EQ(raw->Call("PING\r\n"), "+PONG\r\n");
  EXPECT_EQ(raw->Call(Multibulk({"SSM.PREFIX.FETCH", "unix", "1", "RANGE", "0", "4"})),
            Bulk(blob.substr(0, 4)));
  // The same store is reachable over TCP.
  auto tcp = RawConnection::Tcp(server_.port());
  ASSERT_NE(tcp, nullptr);
  EXPECT_EQ(tcp->Call(Multibulk({"SSM.PREFIX.LAYERS", "unix"})),
            "*2\r\n:1\r\n:" + std::to_string(blob.size()) + "\r\n");
  std::string info = raw->Call("CLIENT INFO\r\n");
  EXPECT_NE(info.find("addr=" + server_.unix_socket_path() + ":0 "), std::string::npos) << info;
}

// Runs a shell command; returns its exit status.
int Shell(const std::string& command) {
  int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST_F(SsmTest, RedisCliStoresAndFetchesBinaryBlobs) {
  if (Shell("command -v redis-cli >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "redis-cli is not installed (apt-get install redis-tools)";
  }
  std::string dir = server_.root();
  std::string in_path = dir + "/blob.bin", out_path = dir + "/fetched.bin";
  std::string blob = MakeBlob(1024 * 1024 + 7, Pattern::kRandom, 31);
  blob[0] = '\0';
  blob[1] = '\n';
  blob[blob.size() - 1] = '\r';
  {
    std::ofstream out(in_path, std::ios::binary);
    out.write(blob.data(), static_cast<std::streamsize>(blob.size()));
  }
  std::string cli = "timeout 60 redis-cli -h 127.0.0.1 -p " + std::to_string(server_.port());
  std::string ok_path = dir + "/store.out";
  ASSERT_EQ(Shell(cli + " -x SSM.PREFIX.STORE cli-sid 0 < " + in_path + " > " + ok_path), 0);
  EXPECT_EQ(ReadWhole(ok_path), "OK\n");
  ASSERT_EQ(Shell(cli + " --raw SSM.PREFIX.FETCH cli-sid 0 > " + out_path), 0);
  // redis-cli ends its output with a newline; everything before it must be the blob, bit-exact.
  std::string expected_path = dir + "/expected.bin";
  {
    std::ofstream out(expected_path, std::ios::binary);
    out.write(blob.data(), static_cast<std::streamsize>(blob.size()));
    out.put('\n');
  }
  EXPECT_EQ(Shell("cmp " + expected_path + " " + out_path), 0)
      << "redis-cli fetched different bytes than it stored";
  // And the server holds exactly the file's bytes.
  auto ctx = Connect();
  ASSERT_NE(ctx, nullptr);
  ExpectBlob(ctx.get(), "cli-sid", "0", blob);
  // A miss prints an empty line; an error prints its text (redis-cli adds a blank line).
  std::string miss_path = dir + "/miss.out";
  ASSERT_EQ(Shell(cli + " --raw SSM.PREFIX.FETCH cli-sid 1 > " + miss_path), 0);
  EXPECT_EQ(ReadWhole(miss_path), "\n");
  std::string err_path = dir + "/err.out";
  Shell(cli + " SSM.PREFIX.FETCH cli-sid nope > " + err_path + " 2>&1");
  EXPECT_EQ(ReadWhole(err_path),
            "ERR invalid layer 'nope': must be an integer from 0 to 2147483647\n\n");
}

}  // namespace
}  // namespace prefixd::it
