// The V-store and KV.PREFIX.* against the real server: every command and its error replies
// (Pion's texts where Pion has them), round trips per tier, zero fill and nil, concurrent writers
// on distinct sessions, byte-identical fetches after a restart (clean, crash, snapshot), the
// Pion-style client flow, the value receipt and the C++ client calls.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "integration/server_fixture.h"
#include "prefixd/client.h"
#include "prefixd/float16.h"

namespace prefixd::it {
namespace {

using namespace std::chrono_literals;

const std::vector<std::string> kTiers = {"fp32", "fp16", "bf16", "int8", "fp8", "mlx4g32"};

std::vector<float> UnitNormal(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

template <typename T>
std::string AsString(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::vector<float> AsFloats(std::string_view bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

std::string ToFp16(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = Fp32ToFp16(v[i]);
  return AsString(h);
}

std::string ToBf16(const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = Fp32ToBf16(v[i]);
  return AsString(h);
}

// The documented max-abs error bands on unit-normal data (docs/vstore-tiers.md).
double Band(const std::string& tier) {
  if (tier == "int8") return 0.02;
  if (tier == "fp8") return 0.15;
  if (tier == "mlx4g32") return 0.30;
  if (tier == "bf16") return 0.016;
  if (tier == "fp16") return 0.002;
  return 0.0;
}

class VstoreTest : public ServerTest {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartServer()); }

  RedisContext Connect() {
    std::string error;
    auto ctx = ConnectHiredis(server_.port(), 60s, &error);
    EXPECT_NE(ctx, nullptr) << error;
    return ctx;
  }

  RedisReply Call(const std::vector<std::string_view>& args) {
    if (ctx_ == nullptr) ctx_ = Connect();
    auto r = HiredisCommand(ctx_.get(), args);
    EXPECT_NE(r, nullptr) << ctx_->errstr;
    return r;
  }

  void ExpectStatus(const std::vector<std::string_view>& args, std::string_view status) {
    auto r = Call(args);
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
    EXPECT_EQ(std::string(r->str, r->len), status);
  }
  void ExpectOk(const std::vector<std::string_view>& args) { ExpectStatus(args, "OK"); }

  void ExpectError(const std::vector<std::string_view>& args, std::string_view message) {
    auto r = Call(args);
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->type, REDIS_REPLY_ERROR) << DescribeReply(r.get());
    EXPECT_EQ(std::string(r->str, r->len), message);
  }

  // An error reply that starts with `prefix`.
  void ExpectErrorPrefix(const std::vector<std::string_view>& args, std::string_view prefix) {
    auto r = Call(args);
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->type, REDIS_REPLY_ERROR) << DescribeReply(r.get());
    EXPECT_TRUE(std::string_view(r->str, r->len).starts_with(prefix)) << r->str;
  }

  int64_t ExpectInteger(const std::vector<std::string_view>& args) {
    auto r = Call(args);
    EXPECT_NE(r, nullptr);
    if (r == nullptr) return -1;
    EXPECT_EQ(r->type, REDIS_REPLY_INTEGER) << DescribeReply(r.get());
    return r->integer;
  }

  std::string Bulk(const std::vector<std::string_view>& args) {
    auto r = Call(args);
    EXPECT_NE(r, nullptr);
    if (r == nullptr) return {};
    EXPECT_EQ(r->type, REDIS_REPLY_STRING) << DescribeReply(r.get());
    return r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : std::string();
  }

  void ExpectNil(const std::vector<std::string_view>& args) {
    auto r = Call(args);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->type, REDIS_REPLY_NIL) << DescribeReply(r.get());
  }

  std::map<std::string, std::string> InfoLines(const std::string& text) {
    std::map<std::string, std::string> out;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = text.find("\r\n", pos);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(pos, end - pos);
      if (auto colon = line.find(':'); colon != std::string::npos) {
        out[line.substr(0, colon)] = line.substr(colon + 1);
      }
      pos = end + 2;
    }
    return out;
  }

  RedisContext ctx_;
};

// ---------------------------------------------------------------------------------------------
// V.CREATE

TEST_F(VstoreTest, CreateReturnsAnIndexAndIsIdempotent) {
  const int64_t first = ExpectInteger({"V.CREATE", "a", "64"});
  const int64_t second = ExpectInteger({"V.CREATE", "b", "64", "VQUANT", "INT8"});
  EXPECT_NE(first, second);
  // An existing sid returns its index, its shape unchanged.
  EXPECT_EQ(ExpectInteger({"V.CREATE", "a", "128", "VQUANT", "fp32"}), first);
  auto info = InfoLines(Bulk({"V.INFO", "a"}));
  EXPECT_EQ(info["value_dim"], "64");
  EXPECT_EQ(info["v_format"], "fp16");  // the default tier
  EXPECT_EQ(InfoLines(Bulk({"V.INFO", "b"}))["v_format"], "int8");
  // Binary-safe session ids.
  const std::string binary("k\0v\r\n\xff", 6);
  EXPECT_GE(ExpectInteger({"V.CREATE", binary, "32"}), 0);
  EXPECT_EQ(InfoLines(Bulk({"V.INFO", binary}))["value_dim"], "32");
}

TEST_F(VstoreTest, CreateErrors) {
  const std::string want = " (want fp32|fp16|bf16|int8|fp8|mlx4g32)";
  ExpectError({"V.CREATE", "s", "0"}, "ERR invalid value_dim (must be 1-65536)");
  ExpectError({"V.CREATE", "s", "65537"}, "ERR invalid value_dim (must be 1-65536)");
  ExpectError({"V.CREATE", "s", "x"}, "ERR invalid value_dim (must be 1-65536)");
  ExpectError({"V.CREATE", "s", "64", "VQUANT", "bogus"},
              "ERR V.CREATE: unknown VQUANT format 'bogus'" + want);
  ExpectError(
      {"V.CREATE", "s", "64", "VQUANT", "turbo4"},
      "ERR V.CREATE: VQUANT format 'turbo4' is a Pion codec prefixd does not implement" + want);
  // Pion silently falls back to int8 here.
  ExpectError({"V.CREATE", "s", "100", "VQUANT", "fp8"},
              "ERR V.CREATE: VQUANT fp8 needs value_dim to be a multiple of 32 (got 100)");
  ExpectError({"V.CREATE", "s", "48", "VQUANT", "mlx4g32"},
              "ERR V.CREATE: VQUANT mlx4g32 needs value_dim to be a multiple of 32 (got 48)");
  ExpectErrorPrefix({"V.CREATE", "s", "64", "SCHEMA", "1", "fmt=fp16"},
                    "ERR V.CREATE: SCHEMA (per-layer formats) is not supported");
  ExpectError({"V.CREATE", "s", "64", "VQUANT"}, "ERR syntax error");
  ExpectError({"V.CREATE", "s"}, "ERR wrong number of arguments for 'v.create' command");
  ExpectErrorPrefix({"V.CREATE", std::string(2000, 'x'), "64"}, "ERR invalid sid: must be 1 to");
  ExpectErrorPrefix({"V.CREATE", "", "64"}, "ERR invalid sid");
  EXPECT_EQ(InfoLines(Bulk({"V.INFO"}))["sessions"], "0");  // nothing was created
}

TEST_F(VstoreTest, LimitsAreSettingsWithClearErrors) {
  ExpectOk({"CONFIG", "SET", "vstore-max-sessions", "2", "vstore-max-layers", "4",
            "vstore-max-tokens", "100", "vstore-max-dim", "64"});
  ExpectInteger({"V.CREATE", "a", "8"});
  ExpectInteger({"V.CREATE", "b", "8"});
  ExpectErrorPrefix({"V.CREATE", "c", "8"},
                    "ERR V.CREATE: session limit reached (vstore-max-sessions 2)");
  ExpectInteger({"V.CREATE", "a", "8"});  // existing: fine at the limit
  ExpectError({"V.CREATE", "c", "65"}, "ERR invalid value_dim (must be 1-64)");
  const std::string row = AsString(std::vector<float>(8, 1.0f));
  ExpectError({"V.STOREBATCH", "a", "4", "0", "1", row},
              "ERR V.STOREBATCH: layer_id 4 exceeds vstore-max-layers (4: ids 0-3)");
  ExpectError({"V.STOREBATCH", "a", "0", "100", "1", row},
              "ERR V.STOREBATCH: end 101 (start + count) exceeds vstore-max-tokens (100)");
  ExpectOk({"V.STOREBATCH", "a", "3", "99", "1", row});
  ExpectError({"V.FETCH", "a", "3", "RANGE", "0", "101"},
              "ERR invalid RANGE: end 101 exceeds vstore-max-tokens (100)");
  ExpectErrorPrefix({"KV.PREFIX.REGISTER", "ns", "8", "fp16"},
                    "ERR KV.PREFIX.REGISTER: session limit reached (vstore-max-sessions 2)");
  ExpectOk({"CONFIG", "SET", "vstore-max-sessions", "65536"});
  ExpectOk({"KV.PREFIX.REGISTER", "ns", "8", "fp16"});
  auto r = Call({"CONFIG", "GET", "vstore-*"});
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(r->elements, 10u);  // five settings
}

// ---------------------------------------------------------------------------------------------
// V.STOREBATCH and V.FETCH

TEST_F(VstoreTest, StoreBatchErrors) {
  ExpectInteger({"V.CREATE", "s", "4", "VQUANT", "int8"});
  const std::string two_rows = AsString(std::vector<float>(8, 0.5f));
  ExpectError({"V.STOREBATCH", "nope", "0", "0", "2", two_rows}, "ERR session not found");
  ExpectError({"V.STOREBATCH", "s", "0", "0", "3", two_rows},
              "ERR V.STOREBATCH: blob size 32 != expected 48 (count 3 x dim 4 x 4 bytes F32)");
  ExpectError({"V.STOREBATCH", "s", "0", "0", "2", two_rows, "FMT", "F16"},
              "ERR V.STOREBATCH: blob size 32 != expected 16 (count 2 x dim 4 x 2 bytes F16)");
  ExpectErrorPrefix({"V.STOREBATCH", "s", "0", "0", "0", two_rows},
                    "ERR invalid layer_id/start_id/count: count '0'");
  ExpectErrorPrefix({"V.STOREBATCH", "s", "-1", "0", "2", two_rows},
                    "ERR invalid layer_id/start_id/count: layer_id '-1'");
  ExpectErrorPrefix({"V.STOREBATCH", "s", "0", "x", "2", two_rows},
                    "ERR invalid layer_id/start_id/count: start_id 'x'");
  ExpectError({"V.STOREBATCH", "s", "0", "0", "2", two_rows, "FMT", "F64"},
              "ERR V.STOREBATCH: unknown option (expected FMT F16|BF16|F32)");
  ExpectError({"V.STOREBATCH", "s", "0", "0", "2", two_rows, "NATIVE"},
              "ERR V.STOREBATCH: unknown option (expected FMT F16|BF16|F32)");
  std::vector<float> bad(8, 1.0f);
  bad[6] = NAN;
  ExpectError({"V.STOREBATCH", "s", "0", "0", "2", AsString(bad)},
              "ERR V.STOREBATCH: row 1 value 2 is NaN or infinite; VQUANT int8 stores finite "
              "values only");
  ExpectError({"V.STOREBATCH", "s", "0", "0", "2"},
              "ERR wrong number of arguments for 'v.storebatch' command");
  // Nothing above stored anything.
  ExpectNil({"V.FETCH", "s", "0", "RANGE", "0", "2"});
}

TEST_F(VstoreTest, RangeIsHalfOpenZeroFilledAndNilWhenEmpty) {
  ExpectInteger({"V.CREATE", "s", "2", "VQUANT", "fp32"});
  ExpectNil({"V.FETCH", "s", "0", "RANGE", "0", "4"});
  const std::vector<float> rows = {1, 2, 3, 4};
  ExpectOk({"V.STOREBATCH", "s", "0", "3", "2", AsString(rows)});  // rows 3 and 4
  EXPECT_EQ(AsFloats(Bulk({"V.FETCH", "s", "0", "RANGE", "2", "7"})),
            (std::vector<float>{0, 0, 1, 2, 3, 4, 0, 0, 0, 0}));
  EXPECT_EQ(AsFloats(Bulk({"V.FETCH", "s", "0", "RANGE", "0", "1"})),
            (std::vector<float>{0, 0}));  // a gap row
  EXPECT_EQ(AsFloats(Bulk({"V.FETCH", "s", "0", "RANGE", "100", "101"})),
            (std::vector<float>{0, 0}));  // past the end, while the layer has rows
  ExpectNil({"V.FETCH", "s", "1", "RANGE", "0", "4"});
  for (auto [s, e] :
       {std::pair{"3", "3"}, std::pair{"4", "3"}, std::pair{"-1", "3"}, std::pair{"a", "3"}}) {
    ExpectError({"V.FETCH", "s", "0", "RANGE", s, e},
                "ERR invalid RANGE: end must exceed start (>=0)");
  }
  ExpectError({"V.FETCH", "nope", "0", "RANGE", "0", "1"}, "ERR session not found");
  ExpectError({"V.FETCH", "s", "0", "RANGE", "0", "1", "FMT", "F16"},
              "ERR V.FETCH: unknown option 'FMT' (expected FMT NATIVE)");
  ExpectError({"V.FETCH", "s", "x", "RANGE", "0", "1"},
              "ERR invalid layer_id 'x': must be an integer from 0 to 2147483647");
  // RESP3 nil.
  auto raw = RawConnection::Tcp(server_.port());
  ASSERT_NE(raw, nullptr);
  EXPECT_TRUE(raw->Call(std::vector<std::string>{"HELLO", "3"}).starts_with("%"));
  EXPECT_EQ(raw->Call(std::vector<std::string>{"V.FETCH", "s", "9", "RANGE", "0", "1"}), "_\r\n");
}

// Small ranges inside one chunk's stored rows are copied into the reply in place; every other
// range (across chunks, over a gap, past the length, decoded) takes the general read. Both give
// the same bytes, in fp32 and in a 16-bit tier with and without FMT NATIVE.
TEST_F(VstoreTest, SmallRangesReadInPlaceMatchTheGeneralRead) {
  const uint32_t dim = 64;  // fp32 rows of 256 bytes: 1024 rows to a chunk (fp16: 2048)
  const std::vector<float> x = UnitNormal(31 * dim, 7);
  std::vector<float> expected(1101 * dim, 0.0f);  // rows 1000..1029 and 1100 written
  std::copy(x.begin(), x.begin() + 30 * dim, expected.begin() + 1000 * dim);
  std::copy(x.begin() + 30 * dim, x.end(), expected.begin() + 1100 * dim);
  const std::vector<std::pair<size_t, size_t>> ranges = {
      {1000, 1001}, {1010, 1024}, {1020, 1028}, {1023, 1024}, {1024, 1025}, {1029, 1031},
      {1099, 1101}, {1100, 1101}, {1100, 1102}, {0, 1},       {1000, 1030}};
  for (const std::string tier : {"fp32", "fp16"}) {
    SCOPED_TRACE(tier);
    const std::string sid = "inplace_" + tier;
    ExpectInteger({"V.CREATE", sid, std::to_string(dim), "VQUANT", tier});
    ExpectOk({"V.STOREBATCH", sid, "0", "1000", "30",
              AsString(std::vector<float>(x.begin(), x.begin() + 30 * dim))});
    ExpectOk({"V.STOREBATCH", sid, "0", "1100", "1",
              AsString(std::vector<float>(x.begin() + 30 * dim, x.end()))});
    std::vector<float> stored = expected;  // as the tier holds them
    if (tier == "fp16") {
      for (float& v : stored) v = Fp16ToFp32(Fp32ToFp16(v));
    }
    for (const auto& [start, end] : ranges) {
      SCOPED_TRACE(std::to_string(start) + ".." + std::to_string(end));
      std::vector<float> padded(stored.begin() + std::min(start * dim, stored.size()),
                                stored.begin() + std::min(end * dim, stored.size()));
      padded.resize((end - start) * dim, 0.0f);
      const std::string s = std::to_string(start), e = std::to_string(end);
      EXPECT_EQ(AsFloats(Bulk({"V.FETCH", sid, "0", "RANGE", s, e})), padded);
      const std::string native = Bulk({"V.FETCH", sid, "0", "RANGE", s, e, "FMT", "NATIVE"});
      EXPECT_TRUE(native == (tier == "fp32" ? AsString(padded) : ToFp16(padded)));
    }
    // A row read, then written again: the next read sees the new row, not the old bytes.
    const std::vector<float> again(dim, 0.5f);
    EXPECT_EQ(Bulk({"V.FETCH", sid, "0", "RANGE", "1001", "1002"}).size(), dim * 4u);
    ExpectOk({"V.STOREBATCH", sid, "0", "1001", "1", AsString(again)});
    EXPECT_EQ(AsFloats(Bulk({"V.FETCH", sid, "0", "RANGE", "1001", "1002"})), again);
  }
}

TEST_F(VstoreTest, FetchByIdsAndBatch) {
  ExpectInteger({"V.CREATE", "s", "2", "VQUANT", "fp32"});
  ExpectOk({"V.STOREBATCH", "s", "0", "0", "3", AsString(std::vector<float>{1, 1, 2, 2, 3, 3})});
  ExpectOk({"V.STOREBATCH", "s", "2", "0", "1", AsString(std::vector<float>{9, 9})});
  EXPECT_EQ(AsFloats(Bulk({"V.FETCH", "s", "0", "2", "0", "7"})),
            (std::vector<float>{3, 3, 1, 1, 0, 0}));
  ExpectNil({"V.FETCH", "s", "1", "0"});
  ExpectError({"V.FETCH", "s", "0", "0", "FMT", "NATIVE"},
              "ERR V.FETCH: FMT NATIVE applies to RANGE and BATCH only (rows by id are always "
              "fp32)");
  ExpectError({"V.FETCH", "s", "0", "z"}, "ERR V.FETCH: invalid token id 'z'");
  std::vector<std::string> many = {"V.FETCH", "s", "0"};
  for (int i = 0; i < 1025; ++i) many.push_back(std::to_string(i));
  ExpectError(std::vector<std::string_view>(many.begin(), many.end()),
              "ERR V.FETCH: at most 1024 ids per call (got 1025)");
  many.pop_back();
  EXPECT_EQ(Bulk(std::vector<std::string_view>(many.begin(), many.end())).size(), 1024u * 8);

  auto batch = Call({"V.FETCH", "s", "BATCH", "1", "3"});  // layers 0..2 by default
  ASSERT_EQ(batch->type, REDIS_REPLY_ARRAY) << DescribeReply(batch.get());
  ASSERT_EQ(batch->elements, 3u);
  EXPECT_EQ(AsFloats({batch->element[0]->str, batch->element[0]->len}),
            (std::vector<float>{2, 2, 3, 3}));
  EXPECT_EQ(batch->element[1]->type, REDIS_REPLY_NIL);
  EXPECT_EQ(AsFloats({batch->element[2]->str, batch->element[2]->len}),
            (std::vector<float>{0, 0, 0, 0}));
  batch = Call({"V.FETCH", "s", "BATCH", "0", "1", "1", "FMT", "NATIVE"});
  ASSERT_EQ(batch->elements, 1u);
  ExpectErrorPrefix({"V.FETCH", "s", "BATCH", "0", "1", "0"},
                    "ERR V.FETCH BATCH: invalid layer count '0'");
  ExpectError({"V.FETCH", "s", "BATCH", "1", "1"},
              "ERR invalid RANGE: end must exceed start (>=0)");
  ExpectInteger({"V.CREATE", "empty", "2"});
  ExpectError({"V.FETCH", "empty", "BATCH", "0", "1"},
              "ERR V.FETCH BATCH: session has no stored layers");
  ExpectError({"V.FETCH", "nope", "BATCH", "0", "1"}, "ERR session not found");
}

// Every tier: lossless ones exact (fp16/bf16 byte-exact against round-to-nearest-even, also as
// FMT NATIVE), lossy ones within their documented bands; 16-bit input stored as given.
TEST_F(VstoreTest, RoundTripsInEveryTier) {
  const uint32_t dim = 128;
  const size_t rows = 64;
  const std::vector<float> x = UnitNormal(rows * dim, 3);
  const std::string dim_text = std::to_string(dim);
  for (const std::string& tier : kTiers) {
    SCOPED_TRACE(tier);
    const std::string sid = "rt_" + tier;
    ExpectInteger({"V.CREATE", sid, dim_text, "VQUANT", tier});
    ExpectOk({"V.STOREBATCH", sid, "0", "0", "64", AsString(x)});
    const std::vector<float> back = AsFloats(Bulk({"V.FETCH", sid, "0", "RANGE", "0", "64"}));
    ASSERT_EQ(back.size(), x.size());
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i)
      worst = std::max(worst, std::fabs(double(x[i]) - back[i]));
    EXPECT_LE(worst, Band(tier));
    const std::string native = Bulk({"V.FETCH", sid, "0", "RANGE", "0", "64", "FMT", "NATIVE"});
    if (tier == "fp32") EXPECT_TRUE(native == AsString(x));
    if (tier == "fp16") EXPECT_TRUE(native == ToFp16(x));
    if (tier == "bf16") EXPECT_TRUE(native == ToBf16(x));
    if (tier != "fp16" && tier != "bf16") EXPECT_TRUE(native == AsString(back));  // fp32
  }
  // 16-bit input lands as given in its own tier, and rounds once into the other.
  ExpectOk({"V.STOREBATCH", "rt_fp16", "1", "0", "64", ToFp16(x), "FMT", "F16"});
  EXPECT_TRUE(Bulk({"V.FETCH", "rt_fp16", "1", "RANGE", "0", "64", "FMT", "NATIVE"}) == ToFp16(x));
  ExpectOk({"V.STOREBATCH", "rt_bf16", "1", "0", "64", ToBf16(x), "fmt", "bf16"});
  EXPECT_TRUE(Bulk({"V.FETCH", "rt_bf16", "1", "RANGE", "0", "64", "FMT", "NATIVE"}) == ToBf16(x));
  ExpectOk({"V.STOREBATCH", "rt_fp32", "1", "0", "64", ToFp16(x), "FMT", "F16"});
  std::vector<float> widened(x.size());
  for (size_t i = 0; i < x.size(); ++i) widened[i] = Fp16ToFp32(Fp32ToFp16(x[i]));
  EXPECT_EQ(AsFloats(Bulk({"V.FETCH", "rt_fp32", "1", "RANGE", "0", "64"})), widened);
}

TEST_F(VstoreTest, InfoAndDrop) {
  ExpectInteger({"V.CREATE", "s", "32", "VQUANT", "fp8"});
  ExpectOk({"V.STOREBATCH", "s", "3", "0", "5", AsString(std::vector<float>(160, 1.0f))});
  ExpectOk({"V.STOREBATCH", "s", "1", "10", "2", AsString(std::vector<float>(64, 1.0f))});
  auto info = InfoLines(Bulk({"V.INFO", "s"}));
  EXPECT_EQ(info["v_format"], "fp8");
  EXPECT_EQ(info["num_layers"], "4");
  EXPECT_EQ(info["layer_1_tokens"], "12");
  EXPECT_EQ(info["layer_3_tokens"], "5");
  EXPECT_EQ(info["total_tokens"], "17");
  EXPECT_EQ(info["row_bytes"], "34");
  EXPECT_EQ(info["schema"], "0");
  auto global = InfoLines(Bulk({"V.INFO"}));
  EXPECT_EQ(global["enabled"], "1");
  EXPECT_EQ(global["sessions"], "1");
  EXPECT_EQ(global["total_tokens"], "17");
  ExpectError({"V.INFO", "nope"}, "ERR session not found");
  EXPECT_EQ(ExpectInteger({"V.DROP", "s"}), 1);
  EXPECT_EQ(ExpectInteger({"V.DROP", "s"}), 0);
  ExpectError({"V.FETCH", "s", "3", "RANGE", "0", "1"}, "ERR session not found");
  EXPECT_EQ(InfoLines(Bulk({"V.INFO"}))["total_tokens"], "0");
  EXPECT_EQ(InfoLines(Bulk({"INFO", "vstore"}))["vstore_sessions"], "0");
}

TEST_F(VstoreTest, LargeNativeFetchIsByteExact) {
  // 8K tokens × 1024 values of fp16: 16 MiB sent from the stored chunks.
  const uint32_t dim = 1024;
  const size_t n = 8192;
  ExpectInteger({"V.CREATE", "big", std::to_string(dim)});
  const std::vector<float> x = UnitNormal(n * dim, 21);
  const std::string half = ToFp16(x);
  // In two batches with a rewrite of a stretch that crosses chunks.
  ExpectOk({"V.STOREBATCH", "big", "0", "0", "8192", half, "FMT", "F16"});
  ExpectOk({"V.STOREBATCH", "big", "0", "100", "300",
            std::string_view(half).substr(100 * dim * 2, 300 * dim * 2), "FMT", "F16"});
  EXPECT_TRUE(Bulk({"V.FETCH", "big", "0", "RANGE", "0", "8192", "FMT", "NATIVE"}) == half);
  const std::string tail = Bulk({"V.FETCH", "big", "0", "RANGE", "8000", "8200", "FMT", "NATIVE"});
  ASSERT_EQ(tail.size(), 200u * dim * 2);
  EXPECT_TRUE(tail.substr(0, 192 * dim * 2) == half.substr(8000 * dim * 2));
  EXPECT_EQ(tail.substr(192 * dim * 2), std::string(8 * dim * 2, '\0'));
}

// Eight writers on eight sessions (two per tier family) store and read back their own values
// while the others do the same: nothing bleeds between sessions.
TEST_F(VstoreTest, ConcurrentWritersOnDistinctSessionsDoNotBleed) {
  constexpr int kWriters = 8;
  const uint32_t dim = 64;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::string error;
      auto ctx = ConnectHiredis(server_.port(), 60s, &error);
      if (ctx == nullptr) return void(failures += 1);
      const std::string sid = "w" + std::to_string(w);
      const std::string tier = w % 2 == 0 ? "fp32" : "fp16";
      auto r = HiredisCommand(ctx.get(), {"V.CREATE", sid, std::to_string(dim), "VQUANT", tier});
      if (r == nullptr || r->type != REDIS_REPLY_INTEGER) return void(failures += 1);
      for (int round = 0; round < 40; ++round) {
        // Each row names its writer, round and row in small integers, exact in fp16.
        const uint32_t layer = static_cast<uint32_t>(round % 4);
        std::vector<float> rows(16 * dim, static_cast<float>(w));
        for (size_t r = 0; r < 16; ++r) {
          rows[r * dim + 1] = static_cast<float>(round);
          rows[r * dim + 2] = static_cast<float>(r);
        }
        const std::string start = std::to_string(round * 16);
        r = HiredisCommand(
            ctx.get(), {"V.STOREBATCH", sid, std::to_string(layer), start, "16", AsString(rows)});
        if (r == nullptr || r->type != REDIS_REPLY_STATUS) return void(failures += 1);
        r = HiredisCommand(ctx.get(), {"V.FETCH", sid, std::to_string(layer), "RANGE", start,
                                       std::to_string(round * 16 + 16)});
        if (r == nullptr || r->type != REDIS_REPLY_STRING || AsFloats({r->str, r->len}) != rows) {
          return void(failures += 1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  // Each session holds exactly its own 40 × 16 rows over 4 layers.
  for (int w = 0; w < kWriters; ++w) {
    auto info = InfoLines(Bulk({"V.INFO", "w" + std::to_string(w)}));
    EXPECT_EQ(info["layer_0_tokens"], std::to_string(36 * 16 + 16));  // round 36 was layer 0's last
    const std::vector<float> first =
        AsFloats(Bulk({"V.FETCH", "w" + std::to_string(w), "1", "RANGE", "16", "17"}));
    std::vector<float> want(dim, static_cast<float>(w));
    want[1] = 1.0f;  // round 1, row 0
    want[2] = 0.0f;
    EXPECT_EQ(first, want);
  }
}

// ---------------------------------------------------------------------------------------------
// KV.PREFIX

// The flow of Pion's PionPromptCache: REGISTER, STOREBATCH of each attention layer's keys and
// values into <ns>_pk / <ns>_pv (layer = rank among softmax layers), LOOKUP, FETCH RANGE 0 N.
TEST_F(VstoreTest, PionStyleClientFlow) {
  const std::string ns = "3f2a9c0d1e4b5a6978877665544332211";
  const uint32_t kv_dim = 256;  // 2 KV heads × 128
  const size_t n = 300;
  ExpectStatus({"KV.PREFIX.LOOKUP", ns}, "MISS");
  ExpectOk({"KV.PREFIX.REGISTER", ns, std::to_string(kv_dim), "fp16"});
  ExpectOk({"KV.PREFIX.REGISTER", ns, std::to_string(kv_dim), "fp16"});  // idempotent
  // Registered but empty: a MISS (Pion says HIT): nothing is there to fetch yet.
  ExpectStatus({"KV.PREFIX.LOOKUP", ns}, "MISS");
  std::map<std::pair<std::string, int>, std::vector<float>> stored;
  for (int layer = 0; layer < 4; ++layer) {
    for (const char* side : {"_pk", "_pv"}) {
      std::vector<float> kv = UnitNormal(n * kv_dim, 100 + layer * 2 + (side[2] == 'v'));
      ExpectOk(
          {"V.STOREBATCH", ns + side, std::to_string(layer), "0", std::to_string(n), AsString(kv)});
      stored[{side, layer}] = kv;
    }
  }
  ExpectStatus({"KV.PREFIX.LOOKUP", ns, "TOKENS", std::to_string(n)}, "HIT");
  for (const auto& [key, kv] : stored) {
    const std::vector<float> back = AsFloats(Bulk(
        {"V.FETCH", ns + key.first, std::to_string(key.second), "RANGE", "0", std::to_string(n)}));
    ASSERT_EQ(back.size(), kv.size());
    for (size_t i = 0; i < kv.size(); ++i) {
      ASSERT_EQ(back[i], Fp16ToFp32(Fp32ToFp16(kv[i]))) << key.first << key.second << " " << i;
    }
  }
  ExpectStatus({"KV.PREFIX.OWNER", ns}, "0");
  ExpectStatus({"KV.PREFIX.OWNER", "other"}, "-1");
  auto info = InfoLines(Bulk({"KV.PREFIX.INFO"}));
  EXPECT_EQ(info["registered_prefixes"], "1");
  EXPECT_EQ(info["total_prefix_tokens"], std::to_string(n));
  EXPECT_EQ(info["vstore_sessions"], "2");
  EXPECT_EQ(info["vstore_bytes"], std::to_string(2 * 4 * n * kv_dim * 2));
  EXPECT_EQ(ExpectInteger({"KV.PREFIX.DROP", ns, "never-registered"}), 1);
  ExpectStatus({"KV.PREFIX.LOOKUP", ns}, "MISS");
  ExpectError({"V.FETCH", ns + "_pk", "0", "RANGE", "0", "1"}, "ERR session not found");
}

TEST_F(VstoreTest, RegisterOptionsBlocksAndMembership) {
  const std::vector<uint64_t> hashes = {0xdeadbeef, 42, 7, 0xffffffffffffffffull};
  ExpectOk({"KV.PREFIX.REGISTER", "p", "64", "INT8", "BLOCKS", "16", "4", AsString(hashes),
            "PREFILL_MS", "1234.5"});
  EXPECT_EQ(InfoLines(Bulk({"V.INFO", "p_pk"}))["v_format"], "int8");
  EXPECT_EQ(InfoLines(Bulk({"V.INFO", "p_pv"}))["value_dim"], "64");
  const std::string blocks = Bulk({"KV.PREFIX.BLOCKS", "p"});
  ASSERT_EQ(blocks.size(), 8u + 32);
  uint32_t head[2];
  std::memcpy(head, blocks.data(), 8);
  EXPECT_EQ(head[0], 16u);
  EXPECT_EQ(head[1], 4u);
  EXPECT_TRUE(blocks.substr(8) == AsString(hashes));
  ExpectStatus({"KV.PREFIX.BLOCKS", "other"}, "UNKNOWN");
  ExpectOk({"KV.PREFIX.REGISTER", "noblocks", "64", "fp16"});
  ExpectStatus({"KV.PREFIX.BLOCKS", "noblocks"}, "UNKNOWN");

  const std::vector<uint64_t> probes = {1, 42, 0xdeadbeef, 3, 4, 5, 6, 7, 8, 0xffffffffffffffffull};
  const std::string bitmap = Bulk({"KV.PREFIX.MEMBERSHIP", "p", "10", AsString(probes)});
  ASSERT_EQ(bitmap.size(), 2u);
  EXPECT_EQ(static_cast<uint8_t>(bitmap[0]), 0b10000110);  // probes 1, 2 and 7
  EXPECT_EQ(static_cast<uint8_t>(bitmap[1]), 0b10);        // probe 9
  ExpectStatus({"KV.PREFIX.MEMBERSHIP", "other", "1", AsString(std::vector<uint64_t>{1})},
               "UNKNOWN");
  ExpectError({"KV.PREFIX.MEMBERSHIP", "p", "2", "abc"},
              "ERR KV.PREFIX.MEMBERSHIP: blob size 3 != expected 16 (2 x u64 little-endian)");

  ExpectError({"KV.PREFIX.REGISTER", "q", "64", "turbo3"},
              "ERR KV.PREFIX.REGISTER: vquant 'turbo3' is a Pion codec prefixd does not "
              "implement (want fp32|fp16|bf16|int8|fp8|mlx4g32)");
  ExpectError({"KV.PREFIX.REGISTER", "q", "0", "fp16"},
              "ERR KV.PREFIX.REGISTER: invalid kv_dim (must be 1-65536)");
  ExpectError({"KV.PREFIX.REGISTER", "q", "40", "fp8"},
              "ERR KV.PREFIX.REGISTER: VQUANT fp8 needs value_dim to be a multiple of 32 (got 40)");
  ExpectError({"KV.PREFIX.REGISTER", "q", "64", "fp16", "BLOCKS", "16", "2", "short"},
              "ERR KV.PREFIX.REGISTER: BLOCKS blob size 5 != expected 16 (2 x u64 little-endian)");
  ExpectErrorPrefix({"KV.PREFIX.REGISTER", "q", "64", "fp16", "PREFILL_MS", "-3"},
                    "ERR KV.PREFIX.REGISTER: invalid PREFILL_MS '-3'");
  ExpectErrorPrefix({"KV.PREFIX.REGISTER", "q", "64", "fp16", "EXTRA"},
                    "ERR KV.PREFIX.REGISTER: unknown option 'EXTRA'");
  ExpectErrorPrefix({"KV.PREFIX.REGISTER", std::string(1022, 'n'), "64", "fp16"},
                    "ERR invalid namespace: must be 1 to 1021 bytes");
  ExpectErrorPrefix({"KV.PREFIX.LOOKUP", "p", "TOKENS", "x"},
                    "ERR KV.PREFIX.LOOKUP: invalid TOKENS");
  ExpectErrorPrefix({"KV.PREFIX.LOOKUP", "p", "BOGUS", "1"},
                    "ERR KV.PREFIX.LOOKUP: unknown option");
  ExpectError({"KV.PREFIX.LOOKUP", "p", "TOKENS"}, "ERR syntax error");
  // A bad namespace anywhere in DROP drops nothing.
  ExpectErrorPrefix({"KV.PREFIX.DROP", "p", ""}, "ERR invalid namespace");
  EXPECT_EQ(InfoLines(Bulk({"KV.PREFIX.INFO"}))["registered_prefixes"], "2");
}

TEST_F(VstoreTest, ValueReceiptCountsHitsTokensBytesAndPrefillTime) {
  ExpectOk({"PION.STATS", "RESET"});
  ExpectOk({"KV.PREFIX.REGISTER", "a", "32", "fp16", "PREFILL_MS", "250"});
  ExpectOk({"KV.PREFIX.REGISTER", "b", "32", "fp16"});
  const std::string rows = AsString(std::vector<float>(10 * 32, 0.25f));
  for (const char* sid : {"a_pk", "a_pv", "b_pk", "b_pv"}) {
    ExpectOk({"V.STOREBATCH", sid, "0", "0", "10", rows});
  }
  ExpectStatus({"KV.PREFIX.LOOKUP", "a"}, "HIT");  // 250 ms, registered
  ExpectStatus({"KV.PREFIX.LOOKUP", "b", "TOKENS", "100", "PREFILL_MS", "40"}, "HIT");  // measured
  ExpectStatus({"KV.PREFIX.LOOKUP", "b", "TOKENS", "1000"}, "HIT");  // estimated: 1000 × 555 us
  ExpectStatus({"KV.PREFIX.LOOKUP", "c"}, "MISS");
  auto r = Call({"PION.STATS"});
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(r->elements, 32u);
  std::vector<std::string> order;
  std::map<std::string, std::string> stats;
  for (size_t i = 0; i < r->elements; i += 2) {
    std::string key(r->element[i]->str, r->element[i]->len);
    order.push_back(key);
    const redisReply* v = r->element[i + 1];
    stats[key] =
        v->type == REDIS_REPLY_INTEGER ? std::to_string(v->integer) : std::string(v->str, v->len);
  }
  EXPECT_EQ(order,
            (std::vector<std::string>{
                "worker_id", "uptime_in_seconds", "kvprefix_hits", "kvprefix_misses",
                "kvprefix_hits_measured", "kvprefix_tokens_served", "kvprefix_bytes_served",
                "kvprefix_prefill_us_saved", "kvprefix_prefill_us_measured",
                "prefill_seconds_avoided", "prefill_seconds_avoided_measured", "semantic_hits",
                "semantic_misses", "moe_hits", "moe_misses", "vector_queries"}));
  EXPECT_EQ(stats["kvprefix_hits"], "3");
  EXPECT_EQ(stats["kvprefix_misses"], "1");
  EXPECT_EQ(stats["kvprefix_hits_measured"], "2");
  EXPECT_EQ(stats["kvprefix_tokens_served"], std::to_string(10 + 100 + 1000));
  EXPECT_EQ(stats["kvprefix_bytes_served"], std::to_string(3 * 2 * 10 * 32 * 2));
  EXPECT_EQ(stats["kvprefix_prefill_us_saved"], std::to_string(250000 + 40000 + 555000));
  EXPECT_EQ(stats["kvprefix_prefill_us_measured"], "290000");
  EXPECT_EQ(stats["prefill_seconds_avoided"], "0.845");
  EXPECT_EQ(stats["prefill_seconds_avoided_measured"], "0.290");
  auto pion = InfoLines(Bulk({"INFO", "pion"}));
  EXPECT_EQ(pion["stats_scope"], "server");
  EXPECT_EQ(pion["kvprefix_hits"], "3");
  EXPECT_EQ(pion["prefill_seconds_avoided"], "0.845");
  ExpectOk({"PION.STATS", "RESET"});
  r = Call({"PION.STATS"});
  EXPECT_EQ(r->element[5]->integer, 0);  // kvprefix_hits
}

TEST_F(VstoreTest, MetalOnlyCommandsAnswerAClearError) {
  for (std::string_view name : {"KV.PREFIX.WARM", "ATTEND.PREFIX.QUERY", "ATTEND.PREFIX.STORE",
                                "attend.prefix.query_fused"}) {
    auto r = Call({name, "ns", "8", "128"});
    ASSERT_EQ(r->type, REDIS_REPLY_ERROR) << name;
    EXPECT_NE(std::string(r->str).find("needs Pion's Metal attention engine"), std::string::npos)
        << r->str;
  }
}

TEST_F(VstoreTest, SaveCommitAndFlushAll) {
  ExpectInteger({"V.CREATE", "s", "8"});
  ExpectOk({"V.STOREBATCH", "s", "0", "0", "1", AsString(std::vector<float>(8, 2.0f))});
  ExpectOk({"KV.PREFIX.COMMIT"});
  ExpectOk({"KV.PREFIX.SAVE"});
  ExpectError({"KV.PREFIX.SAVE", "snap.bin"},
              "ERR KV.PREFIX.SAVE: prefixd snapshots into its data directory (dir); a path is not "
              "accepted");
  ExpectOk({"KV.PREFIX.REGISTER", "ns", "8", "fp16"});
  ExpectOk({"FLUSHALL"});
  EXPECT_EQ(InfoLines(Bulk({"V.INFO"}))["sessions"], "0");
  EXPECT_EQ(InfoLines(Bulk({"KV.PREFIX.INFO"}))["registered_prefixes"], "0");
  ctx_.reset();
  ASSERT_TRUE(server_.Stop());
  ASSERT_TRUE(server_.Restart());
  EXPECT_EQ(InfoLines(Bulk({"V.INFO"}))["sessions"], "0");
}

// Every tier's fetches are byte-identical after a clean restart, a crash (SIGKILL with
// appendfsync always), and a restart from a snapshot plus the log written after it.
TEST_F(VstoreTest, FetchesAreByteIdenticalAfterRestarts) {
  ctx_.reset();
  ASSERT_TRUE(server_.Stop());
  ServerProcess::Options options;
  options.flags = {"--appendfsync", "always"};
  ASSERT_TRUE(server_.Restart(options));
  const uint32_t dim = 64;
  std::map<std::string, std::pair<std::string, std::string>> expected;  // fp32, native
  auto capture = [&] {
    std::map<std::string, std::pair<std::string, std::string>> now;
    for (const std::string& tier : kTiers) {
      for (const char* layer : {"0", "5"}) {
        const std::string key = tier + "/" + layer;
        now[key] = {Bulk({"V.FETCH", "t_" + tier, layer, "RANGE", "0", "700"}),
                    Bulk({"V.FETCH", "t_" + tier, layer, "RANGE", "0", "700", "FMT", "NATIVE"})};
      }
    }
    return now;
  };
  auto write = [&](uint64_t seed) {
    for (const std::string& tier : kTiers) {
      ExpectInteger({"V.CREATE", "t_" + tier, std::to_string(dim), "VQUANT", tier});
      // Several batches: an overwrite, a gap, a late append.
      std::vector<float> a = UnitNormal(300 * dim, seed), b = UnitNormal(50 * dim, seed + 1);
      for (float& v : b) v *= 30.0f;
      ExpectOk({"V.STOREBATCH", "t_" + tier, "0", "0", "300", AsString(a)});
      ExpectOk({"V.STOREBATCH", "t_" + tier, "0", "120", "50", AsString(b)});
      ExpectOk({"V.STOREBATCH", "t_" + tier, "5", "600", "50", AsString(b)});
    }
  };
  write(1);
  ExpectOk({"KV.PREFIX.REGISTER", "ns", "64", "bf16", "BLOCKS", "16", "1",
            AsString(std::vector<uint64_t>{99}), "PREFILL_MS", "12"});
  expected = capture();

  ctx_.reset();
  ASSERT_TRUE(server_.Stop());
  ASSERT_TRUE(server_.Restart(options));
  EXPECT_TRUE(capture() == expected) << "after a clean restart";

  ctx_.reset();
  ASSERT_TRUE(server_.Kill());
  ASSERT_TRUE(server_.Restart(options));
  EXPECT_TRUE(capture() == expected) << "after SIGKILL";

  // A snapshot, then more writes in the log after it.
  ExpectOk({"KV.PREFIX.SAVE"});
  write(7);
  ExpectInteger({"V.DROP", "t_int8"});
  ExpectInteger({"V.CREATE", "t_int8", std::to_string(dim), "VQUANT", "int8"});
  ExpectOk({"V.STOREBATCH", "t_int8", "0", "0", "700", AsString(UnitNormal(700 * dim, 9))});
  ExpectOk({"V.STOREBATCH", "t_int8", "5", "0", "1", AsString(UnitNormal(dim, 10))});
  expected = capture();
  // Allocation sizes depend on how rows arrived, not what they are: compared apart.
  auto shape = [&](const std::string& sid) {
    auto lines = InfoLines(Bulk({"V.INFO", sid}));
    lines.erase("allocated_bytes");
    return lines;
  };
  const auto v_info = shape("t_int8");
  ctx_.reset();
  ASSERT_TRUE(server_.Kill());
  ASSERT_TRUE(server_.Restart(options));
  EXPECT_TRUE(capture() == expected) << "after a snapshot, more log and SIGKILL";
  EXPECT_EQ(shape("t_int8"), v_info);  // the same index, shape and lengths
  EXPECT_EQ(Bulk({"KV.PREFIX.BLOCKS", "ns"}).size(), 16u);
  EXPECT_EQ(InfoLines(Bulk({"V.INFO", "ns_pk"}))["v_format"], "bf16");
  ExpectOk({"V.STOREBATCH", "ns_pk", "0", "0", "1", AsString(UnitNormal(dim, 1))});
  ExpectOk({"V.STOREBATCH", "ns_pv", "0", "0", "1", AsString(UnitNormal(dim, 2))});
  ExpectOk({"PION.STATS", "RESET"});
  ExpectStatus({"KV.PREFIX.LOOKUP", "ns"}, "HIT");
  EXPECT_EQ(InfoLines(Bulk({"INFO", "pion"}))["kvprefix_prefill_us_measured"], "12000");
}

TEST(VstoreNoPersistenceTest, CommitAndSaveNeedTheLog) {
  ServerProcess server;
  ServerProcess::Options options;
  options.flags = {"--appendonly", "no"};
  ASSERT_TRUE(server.Start(options));
  auto ctx = ConnectHiredis(server.port());
  ASSERT_NE(ctx, nullptr);
  auto r = HiredisCommand(ctx.get(), {"KV.PREFIX.COMMIT"});
  ASSERT_EQ(r->type, REDIS_REPLY_ERROR);
  EXPECT_STREQ(r->str,
               "ERR KV.PREFIX.COMMIT: persistence is off (appendonly no): nothing can be made "
               "durable");
  r = HiredisCommand(ctx.get(), {"KV.PREFIX.SAVE"});
  EXPECT_STREQ(r->str, "ERR KV.PREFIX.SAVE: persistence is off (appendonly no)");
  r = HiredisCommand(ctx.get(), {"V.CREATE", "s", "4"});
  EXPECT_EQ(r->type, REDIS_REPLY_INTEGER);
}

// ---------------------------------------------------------------------------------------------
// The C++ client

TEST_F(VstoreTest, ClientLibraryCalls) {
  auto connected = Client::Connect("127.0.0.1", server_.port());
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  Client client = std::move(connected).value();
  const uint32_t dim = 32;
  auto index = client.VCreate("c", dim, "bf16");
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ(*client.VCreate("c", dim), *index);
  const std::vector<float> x = UnitNormal(10 * dim, 4);
  ASSERT_TRUE(client.VStoreBatch("c", 0, 0, 10, std::span<const float>(x)).ok());
  std::vector<float> out(12 * dim, -1.0f);
  auto got = client.VFetchRange("c", 0, 0, 12, out);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ(**got, 12u * dim);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], Bf16ToFp32(Fp32ToBf16(x[i])));
  for (size_t i = x.size(); i < out.size(); ++i) ASSERT_EQ(out[i], 0.0f);
  std::vector<uint8_t> native(10 * dim * 2);
  auto bytes = client.VFetchRangeNative("c", 0, 0, 10, native);
  ASSERT_TRUE(bytes.ok() && bytes->has_value());
  EXPECT_EQ(**bytes, native.size());
  EXPECT_TRUE(std::string(reinterpret_cast<char*>(native.data()), native.size()) == ToBf16(x));
  // 16-bit input.
  std::vector<uint16_t> halves(dim);
  for (uint32_t j = 0; j < dim; ++j) halves[j] = Fp32ToBf16(static_cast<float>(j));
  ASSERT_TRUE(
      client.VStoreBatch("c", 1, 3, 1, RowFormat::kBf16, std::span<const uint16_t>(halves)).ok());
  auto row = client.VFetchRange("c", 1, 3, 4, out);
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ(out[31], 31.0f);
  // Nil, a too-small buffer (the connection stays usable) and server errors.
  EXPECT_FALSE(client.VFetchRange("c", 7, 0, 1, out)->has_value());
  std::vector<float> tiny(4);
  EXPECT_EQ(client.VFetchRange("c", 0, 0, 10, tiny).status().code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(client.Ping().ok());
  auto wrong = client.VStoreBatch("nope", 0, 0, 1, std::span<const float>(x.data(), dim));
  EXPECT_EQ(wrong.code(), StatusCode::kServerError);
  EXPECT_EQ(wrong.message(), "ERR session not found");
  EXPECT_EQ(client.VFetchRange("c", 0, 5, 5, out).status().code(), StatusCode::kInvalidArgument);

  KvPrefixOptions options;
  options.prefill_ms = 80.5;
  const std::vector<uint64_t> hashes = {5, 6};
  options.block_size = 32;
  options.block_hashes = hashes;
  ASSERT_TRUE(client.KvPrefixRegister("px", dim, "fp16", options).ok());
  EXPECT_FALSE(*client.KvPrefixLookup("px"));
  ASSERT_TRUE(client.VStoreBatch("px_pk", 0, 0, 1, std::span<const float>(x.data(), dim)).ok());
  ASSERT_TRUE(client.VStoreBatch("px_pv", 0, 0, 1, std::span<const float>(x.data(), dim)).ok());
  EXPECT_TRUE(*client.KvPrefixLookup("px", 1, 2.5));
  const std::string_view drop[] = {"px", "zz"};
  EXPECT_EQ(*client.KvPrefixDrop(drop), 1);
  EXPECT_FALSE(*client.KvPrefixLookup("px"));
  EXPECT_TRUE(*client.VDrop("c"));
  EXPECT_FALSE(*client.VDrop("c"));
}

}  // namespace
}  // namespace prefixd::it
