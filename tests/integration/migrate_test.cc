// Moving keys between two real prefixd servers over real sockets: DUMP and RESTORE of every key
// type (string, SSM session, V-store session, KV.PREFIX registration, prefix-index namespace)
// read back byte for byte with its expiry, Redis 7.0.15's RESTORE errors (BUSYKEY, bad version
// or checksum, truncation, one flipped byte, bad TTL and options), a bad payload changing
// nothing, and MIGRATE: each type, COPY, REPLACE, NOKEY, the KEYS form, AUTH, a target that is
// down or silent, a 64 MB session streamed without a second copy, and a restored key surviving
// the target's restart.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

using Args = std::vector<std::string>;

// The payload of a RESP bulk reply, or "<nil>" / the raw reply when it is not a bulk.
std::string BulkOf(const std::string& raw) {
  if (raw == "$-1\r\n") return "<nil>";
  const size_t eol = raw.find("\r\n");
  if (raw.empty() || raw[0] != '$' || eol == std::string::npos) return raw;
  return raw.substr(eol + 2, std::stoull(raw.substr(1, eol - 1)));
}

// The peak resident set of process `pid` in KiB (VmHWM).
int64_t PeakRssKib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmHWM:")) return std::stoll(line.substr(6));
  }
  return -1;
}

// Seals `body` (records) with the footer DUMP writes: u16 version 1, XXH3-64 of what precedes.
std::string WithFooter(std::string body) {
  body += std::string("\x01\x00", 2);
  const uint64_t sum = XXH3_64bits(body.data(), body.size());
  for (int i = 0; i < 8; ++i) body += static_cast<char>(sum >> (8 * i));
  return body;
}

std::string Floats(std::initializer_list<float> values) {
  std::string out;
  for (float v : values) out.append(reinterpret_cast<const char*>(&v), sizeof v);
  return out;
}

const std::string kHash1(16, '\x11');
const std::string kRoot(16, '\0');

class MigrateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(source_.Start({.flags = {"--appendonly", "yes"}}));
    ASSERT_TRUE(target_.Start({.flags = {"--appendonly", "yes"}}));
    src_ = RawConnection::Tcp(source_.port());
    dst_ = RawConnection::Tcp(target_.port());
    ASSERT_NE(src_, nullptr);
    ASSERT_NE(dst_, nullptr);
  }
  std::string Src(const Args& args) { return src_->Call(args); }
  std::string Dst(const Args& args) { return dst_->Call(args); }

  // One key of each type on `c`, named with `prefix`.
  static void MakeKeys(RawConnection& c, const std::string& p) {
    ASSERT_EQ(c.Call({"SET", p + "str", "hello world"}), "+OK\r\n");
    ASSERT_EQ(c.Call({"SSM.PREFIX.MSTORE", p + "ssm", "0", "state-0", "7", std::string(40000, 'x'),
                      "9", ""}),
              "+OK\r\n");
    ASSERT_EQ(c.Call({"V.CREATE", p + "vec", "2", "VQUANT", "fp32"}).substr(0, 1), ":");
    ASSERT_EQ(c.Call({"V.STOREBATCH", p + "vec", "0", "0", "2", Floats({1, 2, 3, 4})}), "+OK\r\n");
    ASSERT_EQ(c.Call({"V.STOREBATCH", p + "vec", "3", "100", "1", Floats({5, 6})}), "+OK\r\n");
    ASSERT_EQ(c.Call({"KV.PREFIX.REGISTER", p + "kv", "2", "fp32"}), "+OK\r\n");
    ASSERT_EQ(c.Call({"V.STOREBATCH", p + "kv_pk", "0", "0", "1", Floats({7, 8})}), "+OK\r\n");
    ASSERT_EQ(c.Call({"SSM.PREFIX.STORE", p + "kv", "1", "hybrid-state"}), "+OK\r\n");
    ASSERT_EQ(c.Call({"KV.PREFIX.NAMESPACE", p + "idx", "BLOCK", "2", "ATTN", "1", "KVDIM", "2",
                      "RECURRENT", "1", "VQUANT", "fp32"}),
              "+OK\r\n");
    ASSERT_EQ(c.Call({"KV.PREFIX.BSTORE", p + "idx", kRoot, "1", kHash1, "0",
                      Floats({1, 2, 3, 4, 5, 6, 7, 8})}),
              ":1\r\n");
    ASSERT_EQ(c.Call({"SSM.PREFIX.CKPT.STORE", p + "idx", kHash1, "2", kHash1, "0", "ckpt"}),
              "+OK\r\n");
  }
  // What each key holds, read through its own commands (V-store session indexes differ from
  // server to server, so DUMP bytes are compared only for the types without one).
  static std::vector<std::string> Contents(RawConnection& c, const std::string& p) {
    return {
        c.Call({"TYPE", p + "str"}),
        c.Call({"GET", p + "str"}),
        c.Call({"OBJECT", "ENCODING", p + "str"}),
        c.Call({"SSM.PREFIX.MFETCH", p + "ssm", "0", "7", "9", "1"}),
        c.Call({"TYPE", p + "vec"}),
        c.Call({"V.FETCH", p + "vec", "BATCH", "0", "101", "FMT", "NATIVE"}),
        c.Call({"TYPE", p + "kv"}),
        c.Call({"KV.PREFIX.LOOKUP", p + "kv"}).substr(0, 4),
        c.Call({"V.FETCH", p + "kv_pk", "BATCH", "0", "1", "FMT", "NATIVE"}),
        c.Call({"TYPE", p + "kv_pv"}),
        c.Call({"SSM.PREFIX.FETCH", p + "kv", "1"}),
        c.Call({"TYPE", p + "idx"}),
        c.Call({"KV.PREFIX.BFETCH", p + "idx", "1", kHash1, "0"}),
        c.Call({"SSM.PREFIX.CKPT.FETCH", p + "idx", kHash1}),
    };
  }

  ServerProcess source_, target_;
  std::unique_ptr<RawConnection> src_, dst_;
};

const std::vector<std::string> kTypes = {"str", "ssm", "vec", "kv", "idx"};

TEST_F(MigrateTest, DumpRestoreRecreatesEveryTypeWithItsExpiry) {
  ASSERT_NO_FATAL_FAILURE(MakeKeys(*src_, "a:"));
  for (const std::string& type : kTypes) {
    const std::string key = "a:" + type;
    const std::string payload = BulkOf(Src({"DUMP", key}));
    ASSERT_NE(payload, "<nil>") << key;
    // Same name on the other server, a new name on this one; each with a TTL.
    EXPECT_EQ(Dst({"RESTORE", key, "50000", payload}), "+OK\r\n") << key;
    EXPECT_EQ(Src({"RESTORE", "b:" + type, "0", payload}), "+OK\r\n") << key;
    const std::string pttl = Dst({"PTTL", key});
    EXPECT_GT(std::stoll(pttl.substr(1)), 45000) << key << pttl;
    EXPECT_EQ(Src({"PTTL", "b:" + type}), ":-1\r\n") << key;
    if (type == "str" || type == "ssm" || type == "idx") {
      EXPECT_EQ(BulkOf(Dst({"DUMP", key})), payload) << key;  // byte for byte
    }
  }
  EXPECT_EQ(Contents(*dst_, "a:"), Contents(*src_, "a:"));
  EXPECT_EQ(Contents(*src_, "b:"), Contents(*src_, "a:"));
  EXPECT_EQ(Src({"TYPE", "b:kv_pk"}), "+vstore\r\n");  // the registration's sessions followed
  EXPECT_EQ(Src({"DUMP", "missing"}), "$-1\r\n");
  // ABSTTL, and a TTL already past creates nothing.
  const std::string payload = BulkOf(Src({"DUMP", "a:str"}));
  EXPECT_EQ(Src({"RESTORE", "abs", "4102444800000", payload, "ABSTTL"}), "+OK\r\n");
  EXPECT_EQ(Src({"PEXPIRETIME", "abs"}), ":4102444800000\r\n");
  EXPECT_EQ(Src({"RESTORE", "past", "1", payload, "ABSTTL"}), "+OK\r\n");
  EXPECT_EQ(Src({"EXISTS", "past"}), ":0\r\n");
}

TEST_F(MigrateTest, RestoreAnswersRedisErrorsAndABadPayloadChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(MakeKeys(*src_, "a:"));
  const std::string payload = BulkOf(Src({"DUMP", "a:ssm"}));
  const std::string busy = "-BUSYKEY Target key name already exists.\r\n";
  EXPECT_EQ(Src({"RESTORE", "a:str", "0", payload}), busy);
  EXPECT_EQ(Src({"RESTORE", "a:str", "0", payload, "REPLACE"}), "+OK\r\n");
  EXPECT_EQ(Src({"TYPE", "a:str"}), "+ssm-prefix\r\n");
  // A registration's sessions count as its keys.
  const std::string kv = BulkOf(Src({"DUMP", "a:kv"}));
  ASSERT_EQ(Src({"V.CREATE", "n_pk", "2"}).substr(0, 1), ":");
  EXPECT_EQ(Src({"RESTORE", "n", "0", kv}), busy);
  EXPECT_EQ(Src({"RESTORE", "n", "0", kv, "REPLACE"}), "+OK\r\n");
  EXPECT_EQ(Src({"V.FETCH", "n_pk", "BATCH", "0", "1", "FMT", "NATIVE"}),
            Src({"V.FETCH", "a:kv_pk", "BATCH", "0", "1", "FMT", "NATIVE"}));

  const std::string wrong = "-ERR DUMP payload version or checksum are wrong\r\n";
  for (size_t at : {size_t{0}, size_t{12}, size_t{40}, payload.size() / 2, payload.size() - 10,
                    payload.size() - 9, payload.size() - 1}) {
    std::string flipped = payload;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x20);
    EXPECT_EQ(Src({"RESTORE", "x", "0", flipped}), wrong) << "byte " << at;
  }
  for (size_t cut : {size_t{0}, size_t{5}, size_t{10}, payload.size() - 1}) {
    EXPECT_EQ(Src({"RESTORE", "x", "0", payload.substr(0, cut)}), wrong) << "cut at " << cut;
  }
  // A valid footer over records that are not one key's: two sessions back to back, a record
  // cut short, a key's first record missing.
  const std::string body = payload.substr(0, payload.size() - 10);
  const std::string bad = "-ERR Bad data format\r\n";
  EXPECT_EQ(Src({"RESTORE", "x", "0", WithFooter(body + body)}), bad);
  EXPECT_EQ(Src({"RESTORE", "x", "0", WithFooter(body.substr(0, body.size() - 1))}), bad);
  EXPECT_EQ(Src({"RESTORE", "x", "0", WithFooter(body.substr(0, 31))}), bad);
  EXPECT_EQ(Src({"RESTORE", "x", "0", WithFooter("")}), bad);
  const std::string vec = BulkOf(Src({"DUMP", "a:vec"}));
  const size_t rows_at = vec.find("PFXR", 40) - 8;  // the second record: rows without a create
  EXPECT_EQ(Src({"RESTORE", "x", "0", WithFooter(vec.substr(rows_at, vec.size() - 10 - rows_at))}),
            bad);
  EXPECT_EQ(Src({"EXISTS", "x"}), ":0\r\n");
  // A REPLACE with a bad payload keeps the key it would have replaced.
  EXPECT_EQ(Src({"RESTORE", "a:vec", "0", WithFooter(body + body), "REPLACE"}), bad);
  EXPECT_EQ(Src({"TYPE", "a:vec"}), "+vstore\r\n");

  EXPECT_EQ(Src({"RESTORE", "x", "-1", payload}), "-ERR Invalid TTL value, must be >= 0\r\n");
  EXPECT_EQ(Src({"RESTORE", "x", "ten", payload}),
            "-ERR value is not an integer or out of range\r\n");
  EXPECT_EQ(Src({"RESTORE", "x", "0", payload, "NOPE"}), "-ERR syntax error\r\n");
  EXPECT_EQ(Src({"RESTORE", "x", "0", payload, "IDLETIME", "-1"}),
            "-ERR Invalid IDLETIME value, must be >= 0\r\n");
  EXPECT_EQ(Src({"RESTORE", "x", "0", payload, "FREQ", "256"}),
            "-ERR Invalid FREQ value, must be >= 0 and <= 255\r\n");
  EXPECT_EQ(Src({"RESTORE", "x", "0", payload, "FREQ", "1", "IDLETIME", "1"}),
            "-ERR syntax error\r\n");
  EXPECT_EQ(Src({"RESTORE", "x", "0", payload, "FREQ", "255"}), "+OK\r\n");
  EXPECT_EQ(Src({"RESTORE-ASKING", "y", "0", payload, "IDLETIME", "0"}), "+OK\r\n");
  // Flagged as Redis flags it: served as if ASKING was sent.
  EXPECT_NE(Src({"COMMAND", "INFO", "restore-asking"}).find("+write\r\n+denyoom\r\n+asking\r\n"),
            std::string::npos);
  EXPECT_EQ(Src({"RESTORE", "x"}), "-ERR wrong number of arguments for 'restore' command\r\n");
}

TEST_F(MigrateTest, MigrateMovesEachTypeAndDeletesOnlyAcknowledgedKeys) {
  ASSERT_NO_FATAL_FAILURE(MakeKeys(*src_, "a:"));
  const std::vector<std::string> before = Contents(*src_, "a:");
  ASSERT_EQ(Src({"EXPIRE", "a:ssm", "1000"}), ":1\r\n");
  const std::string port = std::to_string(target_.port());
  // The single-key form, then the KEYS form with the rest (a registration's sessions travel
  // inside it), a missing key among them.
  EXPECT_EQ(Src({"MIGRATE", "127.0.0.1", port, "a:str", "0", "5000"}), "+OK\r\n");
  EXPECT_EQ(Src({"MIGRATE", "127.0.0.1", port, "", "0", "5000", "KEYS", "a:ssm", "a:kv_pk", "a:vec",
                 "a:kv", "a:kv_pv", "a:idx", "a:gone"}),
            "+OK\r\n");
  EXPECT_EQ(Contents(*dst_, "a:"), before);
  EXPECT_EQ(Src({"DBSIZE"}), ":0\r\n");
  EXPECT_GT(std::stoll(Dst({"TTL", "a:ssm"}).substr(1)), 990);
  EXPECT_EQ(Src({"MIGRATE", "127.0.0.1", port, "a:str", "0", "5000"}), "+NOKEY\r\n");

  // COPY keeps the source; without REPLACE the target's key is kept and the error relayed.
  ASSERT_EQ(Src({"SET", "a:str", "newer"}), "+OK\r\n");
  EXPECT_EQ(Src({"MIGRATE", "127.0.0.1", port, "a:str", "0", "5000"}),
            "-ERR Target instance replied with error: BUSYKEY Target key name already exists.\r\n");
  EXPECT_EQ(Src({"EXISTS", "a:str"}), ":1\r\n");
  EXPECT_EQ(Src({"MIGRATE", "127.0.0.1", port, "a:str", "0", "5000", "COPY", "REPLACE"}),
            "+OK\r\n");
  EXPECT_EQ(Dst({"GET", "a:str"}), "$5\r\nnewer\r\n");
  EXPECT_EQ(Src({"GET", "a:str"}), "$5\r\nnewer\r\n");

  // Its keys as Redis's migrateGetKeys finds them (cluster routing reads them): the key, or
  // every one after KEYS, even one named "keys".
  EXPECT_EQ(
      Src({"COMMAND", "GETKEYS", "MIGRATE", "h", "1", "", "0", "5", "COPY", "KEYS", "keys", "b"}),
      "*2\r\n$4\r\nkeys\r\n$1\r\nb\r\n");
  EXPECT_EQ(Src({"COMMAND", "GETKEYSANDFLAGS", "MIGRATE", "h", "1", "k", "0", "5", "AUTH", "keys"}),
            "*1\r\n*2\r\n$1\r\nk\r\n*3\r\n+RW\r\n+access\r\n+delete\r\n");
  // Argument errors, as Redis words them.
  EXPECT_EQ(Src({"MIGRATE", "127.0.0.1", port, "k", "0", "5000", "KEYS", "a:str"}),
            "-ERR When using MIGRATE KEYS option, the key argument must be set to the empty "
            "string\r\n");
  EXPECT_EQ(Src({"MIGRATE", "127.0.0.1", port, "a:str", "0", "5000", "AUTH"}),
            "-ERR syntax error\r\n");
  EXPECT_EQ(Src({"MIGRATE", "127.0.0.1", port, "a:str", "0", "soon"}),
            "-ERR value is not an integer or out of range\r\n");
  EXPECT_EQ(Src({"MIGRATE", "127.0.0.1", port, "a:str", "99", "5000"}),
            "-ERR Target instance replied with error: ERR DB index is out of range\r\n");
  EXPECT_EQ(Src({"MIGRATE", "127.0.0.1", port, "a:str", "0", "5000", "AUTH", "pw"}).substr(0, 40),
            "-ERR Target instance replied with error:");
  EXPECT_EQ(Src({"EXISTS", "a:str"}), ":1\r\n");
}

TEST_F(MigrateTest, MigrateAuthenticatesAndAMonitorNeverSeesThePassword) {
  auto monitor = RawConnection::Tcp(source_.port());
  ASSERT_NE(monitor, nullptr);
  ASSERT_EQ(monitor->Call(Args{"MONITOR"}), "+OK\r\n");
  ASSERT_EQ(Src({"SET", "k1", "v1"}), "+OK\r\n");
  ASSERT_EQ(Src({"SET", "k2", "v2"}), "+OK\r\n");
  ASSERT_EQ(Dst({"CONFIG", "SET", "requirepass", "s3cret"}), "+OK\r\n");
  const std::string port = std::to_string(target_.port());
  EXPECT_EQ(Src({"MIGRATE", "127.0.0.1", port, "k1", "0", "5000"}),
            "-ERR Target instance replied with error: NOAUTH Authentication required.\r\n");
  EXPECT_EQ(Src({"MIGRATE", "127.0.0.1", port, "k1", "0", "5000", "AUTH", "s3cret"}), "+OK\r\n");
  EXPECT_EQ(Src({"MIGRATE", "127.0.0.1", port, "", "0", "5000", "AUTH2", "default", "s3cret",
                 "KEYS", "k2"}),
            "+OK\r\n");
  EXPECT_EQ(Src({"DBSIZE"}), ":0\r\n");
  std::string lines;
  while (lines.find("AUTH2") == std::string::npos) {
    const std::string more = monitor->ReadQuiet();
    if (more.empty()) break;
    lines += more;
  }
  EXPECT_EQ(lines.find("s3cret"), std::string::npos) << lines;
  EXPECT_NE(lines.find("\"AUTH\" \"(redacted)\""), std::string::npos) << lines;
  EXPECT_NE(lines.find("\"AUTH2\" \"(redacted)\" \"(redacted)\" \"KEYS\" \"k2\""),
            std::string::npos)
      << lines;
}

TEST_F(MigrateTest, SessionsInTheDiskTierMoveBitExact) {
  ASSERT_EQ(Src({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}), "+OK\r\n");
  ASSERT_EQ(Src({"CONFIG", "SET", "maxmemory", "4mb"}), "+OK\r\n");
  Args keys = {"MIGRATE", "127.0.0.1", std::to_string(target_.port()), "", "0", "5000", "KEYS"};
  std::vector<std::string> values;
  for (int i = 0; i < 12; ++i) {
    values.push_back(std::string(512 << 10, static_cast<char>('a' + i)) + std::to_string(i));
    keys.push_back("cold:" + std::to_string(i));
    ASSERT_EQ(Src({"SSM.PREFIX.MSTORE", keys.back(), "0", values.back(), "1", "tail"}), "+OK\r\n");
  }
  const std::string info = Src({"INFO", "disktier"});
  const size_t at = info.find("cold_keys:");
  ASSERT_NE(at, std::string::npos) << info;
  EXPECT_GE(std::stoi(info.substr(at + 10)), 4) << "6 MiB of sessions under a 4 MiB budget";
  EXPECT_EQ(src_->Call(keys, Millis(30000)), "+OK\r\n");
  EXPECT_EQ(Src({"DBSIZE"}), ":0\r\n");
  for (int i = 0; i < 12; ++i) {
    EXPECT_TRUE(Dst({"SSM.PREFIX.FETCH", keys[7 + i], "0"}) ==
                "$" + std::to_string(values[i].size()) + "\r\n" + values[i] + "\r\n")
        << keys[7 + i];
    EXPECT_EQ(Dst({"SSM.PREFIX.FETCH", keys[7 + i], "1"}), "$4\r\ntail\r\n");
  }
}

TEST_F(MigrateTest, ATargetThatIsDownKeepsTheSourceKey) {
  ASSERT_EQ(Src({"SET", "k", "v"}), "+OK\r\n");
  const std::string port = std::to_string(target_.port());
  ASSERT_TRUE(target_.Stop());
  EXPECT_EQ(Src({"MIGRATE", "127.0.0.1", port, "k", "0", "500"}),
            "-IOERR error or timeout connecting to the client\r\n");
  EXPECT_EQ(Src({"GET", "k"}), "$1\r\nv\r\n");

  // A target that accepts but never answers: the wait for its reply ends after `timeout`.
  const int silent = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(silent, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(silent, 4), 0);
  ASSERT_EQ(getsockname(silent, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Src({"MIGRATE", "127.0.0.1", std::to_string(ntohs(address.sin_port)), "k", "0", "300"}),
            "-IOERR error or timeout reading to target instance\r\n");
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, Millis(290));
  EXPECT_LT(waited, Millis(3000));
  close(silent);
  EXPECT_EQ(Src({"GET", "k"}), "$1\r\nv\r\n");
}

TEST_F(MigrateTest, A64MegabyteSessionIsStreamedAndSurvivesTheTargetRestart) {
  std::string blob(64 << 20, '\0');
  for (size_t i = 0; i < blob.size(); i += 4096) blob[i] = static_cast<char>(i >> 12);
  blob[blob.size() - 1] = 'z';
  ASSERT_EQ(Src({"SSM.PREFIX.MSTORE", "big", "0", blob, "1", "small"}), "+OK\r\n");
  const int64_t peak_before = PeakRssKib(source_.pid());
  const std::string port = std::to_string(target_.port());
  EXPECT_EQ(src_->Call({"MIGRATE", "127.0.0.1", port, "big", "0", "10000"}, Millis(30000)),
            "+OK\r\n");
  // Sent from the stored buffer: no second copy of it was ever resident on the source.
  EXPECT_LT(PeakRssKib(source_.pid()) - peak_before, 32 << 10);
  EXPECT_EQ(Src({"EXISTS", "big"}), ":0\r\n");
  // Served at once (its tail read back), then byte-exact after the target's restart.
  EXPECT_EQ(
      Dst({"SSM.PREFIX.FETCH", "big", "0", "RANGE", std::to_string(blob.size() - 4097), "5000"}),
      "$4097\r\n" + blob.substr(blob.size() - 4097) + "\r\n");
  const std::string expected = "$" + std::to_string(blob.size()) + "\r\n" + blob + "\r\n";
  dst_.reset();
  ASSERT_TRUE(target_.Stop());
  ASSERT_TRUE(target_.Restart({.flags = {"--appendonly", "yes"}}));
  dst_ = RawConnection::Tcp(target_.port());
  ASSERT_NE(dst_, nullptr);
  EXPECT_TRUE(dst_->Call({"SSM.PREFIX.FETCH", "big", "0"}, Millis(30000)) == expected);
  EXPECT_EQ(Dst({"SSM.PREFIX.FETCH", "big", "1"}), "$5\r\nsmall\r\n");
}

}  // namespace
}  // namespace prefixd::it
