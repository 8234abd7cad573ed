// SAVE, BGSAVE and SHUTDOWN SAVE with `--appendonly no`, against the real server binary: the
// snapshot they write is what the next start loads (with the log or without it), a log an
// earlier run left is loaded and never replayed over a newer snapshot, the replies and INFO
// fields are Redis 7.0's (checked by hand against redis-server 7.0.15), and a directory a
// server with the log is using is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

ServerProcess::Options Persistence(const std::string& appendonly, const std::string& dir = "") {
  ServerProcess::Options options;
  options.flags = {"--appendonly", appendonly};
  options.data_dir = dir;
  return options;
}

// One field of INFO persistence, or "" when it is missing.
std::string InfoField(RawConnection& c, const std::string& field) {
  const std::string reply = c.Call(std::vector<std::string>{"INFO", "persistence"});
  const size_t at = reply.find("\r\n" + field + ":");
  if (at == std::string::npos) return "";
  const size_t start = at + 2 + field.size() + 1;
  return reply.substr(start, reply.find("\r\n", start) - start);
}

bool WaitBgsaveDone(RawConnection& c) {
  for (int i = 0; i < 3000; ++i) {
    if (InfoField(c, "rdb_bgsave_in_progress") == "0") return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

int64_t LastSave(RawConnection& c) {
  const std::string reply = c.Call(std::vector<std::string>{"LASTSAVE"});
  if (reply.size() < 3 || reply[0] != ':') return -1;
  return std::stoll(reply.substr(1));
}

bool HasLogSegments(const std::string& dir) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("log-") && name.ends_with(".seg")) return true;
  }
  return false;
}

class LoglessSnapshotTest : public ServerTest {
 protected:
  void Connect() {
    conn_ = RawConnection::Tcp(server_.port());
    ASSERT_NE(conn_, nullptr);
  }
  // Stops the server (SIGTERM: no save) and starts it again on the same directory.
  void Restart(const std::string& appendonly) {
    ASSERT_TRUE(server_.Stop());
    ASSERT_TRUE(server_.Restart(Persistence(appendonly)));
    Connect();
  }
  std::string Call(const std::vector<std::string>& args) { return conn_->Call(args); }
  std::unique_ptr<RawConnection> conn_;
};

TEST_F(LoglessSnapshotTest, SaveWritesWhatTheNextStartLoads) {
  const int64_t before_start = std::time(nullptr);
  ASSERT_NO_FATAL_FAILURE(StartServer(Persistence("no")));
  ASSERT_NO_FATAL_FAILURE(Connect());
  // Before any snapshot: Redis's answers, the start time and the writes counted.
  const int64_t started = LastSave(*conn_);
  EXPECT_GE(started, before_start);
  EXPECT_LE(started, std::time(nullptr));
  ASSERT_EQ(Call({"SET", "s", "v1"}), "+OK\r\n");
  ASSERT_EQ(Call({"RPUSH", "l", "a", "b"}), ":2\r\n");
  ASSERT_EQ(Call({"HSET", "h", "f", "1", "g", "2"}), ":2\r\n");
  ASSERT_EQ(Call({"ZADD", "z", "1.5", "m"}), ":1\r\n");
  ASSERT_EQ(Call({"SET", "ttl", "x", "EX", "1000"}), "+OK\r\n");
  ASSERT_EQ(Call({"SELECT", "3"}), "+OK\r\n");
  ASSERT_EQ(Call({"SET", "in3", "y"}), "+OK\r\n");
  ASSERT_EQ(Call({"SELECT", "0"}), "+OK\r\n");
  EXPECT_EQ(InfoField(*conn_, "aof_enabled"), "0");
  // Redis counts 8 here (each pushed element and each field set); prefixd one per key written,
  // as with the log. Either way not 0, and one per SET below.
  EXPECT_EQ(InfoField(*conn_, "rdb_changes_since_last_save"), "6");
  EXPECT_EQ(InfoField(*conn_, "rdb_saves"), "0");
  EXPECT_FALSE(fs::exists(server_.data_dir() + "/snapshot.pds"));

  std::this_thread::sleep_for(1100ms);  // LASTSAVE moves by whole seconds
  ASSERT_EQ(Call({"SAVE"}), "+OK\r\n");
  EXPECT_GT(LastSave(*conn_), started);
  EXPECT_EQ(InfoField(*conn_, "rdb_changes_since_last_save"), "0");
  EXPECT_EQ(InfoField(*conn_, "rdb_saves"), "1");
  EXPECT_EQ(InfoField(*conn_, "rdb_bgsave_in_progress"), "0");
  EXPECT_TRUE(fs::exists(server_.data_dir() + "/snapshot.pds"));
  EXPECT_FALSE(HasLogSegments(server_.data_dir()));
  // Written after the snapshot: kept by nothing.
  ASSERT_EQ(Call({"SET", "after", "lost"}), "+OK\r\n");
  ASSERT_EQ(Call({"SET", "s", "v2"}), "+OK\r\n");
  EXPECT_EQ(InfoField(*conn_, "rdb_changes_since_last_save"), "2");

  ASSERT_NO_FATAL_FAILURE(Restart("no"));
  EXPECT_EQ(Call({"GET", "s"}), "$2\r\nv1\r\n");
  EXPECT_EQ(Call({"EXISTS", "after"}), ":0\r\n");
  EXPECT_EQ(Call({"LRANGE", "l", "0", "-1"}), "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
  EXPECT_EQ(Call({"HGET", "h", "g"}), "$1\r\n2\r\n");
  EXPECT_EQ(Call({"ZSCORE", "z", "m"}), "$3\r\n1.5\r\n");
  const std::string ttl = Call({"TTL", "ttl"});
  ASSERT_EQ(ttl[0], ':');
  EXPECT_GT(std::stoll(ttl.substr(1)), 900);
  ASSERT_EQ(Call({"SELECT", "3"}), "+OK\r\n");
  EXPECT_EQ(Call({"GET", "in3"}), "$1\r\ny\r\n");
  EXPECT_EQ(InfoField(*conn_, "rdb_changes_since_last_save"), "0");
}

// A directory moving between the two modes never loses what was kept nor brings back what was
// overwritten: the log a run with it left is loaded without it, and a snapshot written without
// it lies past every record of that log.
TEST_F(LoglessSnapshotTest, TheLogAndLoglessSnapshotsTakeTurnsOnOneDirectory) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Persistence("yes")));
  ASSERT_NO_FATAL_FAILURE(Connect());
  ASSERT_EQ(Call({"SET", "a", "1"}), "+OK\r\n");
  ASSERT_EQ(Call({"SET", "a", "2"}), "+OK\r\n");
  ASSERT_EQ(Call({"SET", "b", "1"}), "+OK\r\n");

  ASSERT_NO_FATAL_FAILURE(Restart("no"));
  EXPECT_EQ(Call({"MGET", "a", "b"}), "*2\r\n$1\r\n2\r\n$1\r\n1\r\n");
  ASSERT_TRUE(HasLogSegments(server_.data_dir()));
  ASSERT_EQ(Call({"SET", "a", "3"}), "+OK\r\n");
  ASSERT_EQ(Call({"DEL", "b"}), ":1\r\n");
  ASSERT_EQ(Call({"SAVE"}), "+OK\r\n");
  // The snapshot holds what the log held: the log is gone.
  EXPECT_FALSE(HasLogSegments(server_.data_dir()));

  ASSERT_NO_FATAL_FAILURE(Restart("yes"));
  EXPECT_EQ(Call({"MGET", "a", "b"}), "*2\r\n$1\r\n3\r\n$-1\r\n");
  ASSERT_EQ(Call({"SET", "c", "1"}), "+OK\r\n");

  // Without the log and without a save, the log's writes are loaded and those after start lost.
  ASSERT_NO_FATAL_FAILURE(Restart("no"));
  EXPECT_EQ(Call({"MGET", "a", "b", "c"}), "*3\r\n$1\r\n3\r\n$-1\r\n$1\r\n1\r\n");
  ASSERT_EQ(Call({"SET", "a", "4"}), "+OK\r\n");
  ASSERT_NO_FATAL_FAILURE(Restart("yes"));
  EXPECT_EQ(Call({"MGET", "a", "b", "c"}), "*3\r\n$1\r\n3\r\n$-1\r\n$1\r\n1\r\n");
}

TEST_F(LoglessSnapshotTest, BgsaveTwiceAnswersAsRedisAndTheSnapshotLoads) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Persistence("no")));
  ASSERT_NO_FATAL_FAILURE(Connect());
  // 8 MB, so the save takes long enough (a write and an fsync) for the commands sent with it.
  const std::string value(128 << 10, 'v');
  std::string batch;
  for (int i = 0; i < 64; ++i) batch += Multibulk({"SET", "k" + std::to_string(i), value});
  ASSERT_TRUE(conn_->Send(batch));
  for (int i = 0; i < 64; ++i) ASSERT_EQ(conn_->ReadReply(), "+OK\r\n") << i;

  EXPECT_EQ(Call({"BGSAVE", "NOW"}), "-ERR syntax error\r\n");
  EXPECT_EQ(Call({"BGSAVE", "SCHEDULE", "x"}), "-ERR syntax error\r\n");
  // The second BGSAVE, the SAVE and the INFO reach the server while the first one writes.
  ASSERT_TRUE(conn_->Send("BGSAVE\r\nBGSAVE\r\nBGSAVE SCHEDULE\r\nSAVE\r\nINFO persistence\r\n"));
  EXPECT_EQ(conn_->ReadReply(), "+Background saving started\r\n");
  EXPECT_EQ(conn_->ReadReply(), "-ERR Background save already in progress\r\n");
  EXPECT_EQ(conn_->ReadReply(), "-ERR Background save already in progress\r\n");
  EXPECT_EQ(conn_->ReadReply(), "-ERR Background save already in progress\r\n");
  const std::optional<std::string> info = conn_->ReadReply();
  ASSERT_TRUE(info.has_value());
  EXPECT_NE(info->find("\r\nrdb_bgsave_in_progress:1\r\n"), std::string::npos) << *info;
  ASSERT_TRUE(WaitBgsaveDone(*conn_));
  EXPECT_EQ(InfoField(*conn_, "rdb_last_bgsave_status"), "ok");
  EXPECT_EQ(InfoField(*conn_, "rdb_changes_since_last_save"), "0");
  EXPECT_EQ(InfoField(*conn_, "rdb_saves"), "1");
  EXPECT_EQ(Call({"BGSAVE", "SCHEDULE"}), "+Background saving started\r\n");
  ASSERT_TRUE(WaitBgsaveDone(*conn_));
  EXPECT_EQ(InfoField(*conn_, "rdb_saves"), "2");

  ASSERT_NO_FATAL_FAILURE(Restart("no"));
  EXPECT_EQ(Call({"DBSIZE"}), ":64\r\n");
  EXPECT_EQ(Call({"STRLEN", "k63"}), ":131072\r\n");
}

TEST_F(LoglessSnapshotTest, ShutdownSavesOnlyWhenAskedTo) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Persistence("no")));
  ASSERT_NO_FATAL_FAILURE(Connect());
  ASSERT_EQ(Call({"SET", "kept", "1"}), "+OK\r\n");
  EXPECT_EQ(Call({"SHUTDOWN", "SAVE", "NOSAVE"}), "-ERR syntax error\r\n");
  ASSERT_TRUE(conn_->Send(Multibulk({"SHUTDOWN", "SAVE"})));
  EXPECT_TRUE(conn_->WaitClosed());
  ASSERT_TRUE(server_.WaitForExit(10s));
  ASSERT_TRUE(server_.Stop());  // it exited with status 0
  ASSERT_TRUE(server_.Restart(Persistence("no")));
  ASSERT_NO_FATAL_FAILURE(Connect());
  EXPECT_EQ(Call({"GET", "kept"}), "$1\r\n1\r\n");

  // NOSAVE, and SHUTDOWN on its own (prefixd has no save points), write nothing.
  for (const std::vector<std::string>& shutdown :
       {std::vector<std::string>{"SHUTDOWN", "NOSAVE"}, std::vector<std::string>{"SHUTDOWN"}}) {
    ASSERT_EQ(Call({"SET", "kept", "2"}), "+OK\r\n");
    ASSERT_TRUE(conn_->Send(Multibulk(shutdown)));
    EXPECT_TRUE(conn_->WaitClosed());
    ASSERT_TRUE(server_.WaitForExit(10s));
    ASSERT_TRUE(server_.Stop());
    ASSERT_TRUE(server_.Restart(Persistence("no")));
    ASSERT_NO_FATAL_FAILURE(Connect());
    EXPECT_EQ(Call({"GET", "kept"}), "$1\r\n1\r\n") << shutdown.size();
  }
}

// Without the log nothing completes a snapshot later, so each must be one point in time: taken
// while EXECs run, the last one holds both counters of every transaction or neither.
TEST_F(LoglessSnapshotTest, BgsaveWhileTransactionsRunIsOnePointInTime) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Persistence("no")));
  ASSERT_NO_FATAL_FAILURE(Connect());
  // Many keys, so that a snapshot reading the stores while writes go on would read `a` and `b`
  // far apart, with transactions between.
  for (int batch = 0; batch < 20; ++batch) {
    std::string sets;
    for (int i = 0; i < 1000; ++i) {
      sets += Multibulk({"SET", "fill" + std::to_string(batch * 1000 + i), std::string(64, 'f')});
    }
    ASSERT_TRUE(conn_->Send(sets));
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(conn_->ReadReply(), "+OK\r\n");
  }
  std::atomic<bool> stop{false};
  std::vector<std::string> failures(3);
  std::vector<std::thread> writers;
  for (size_t t = 0; t < failures.size(); ++t) {
    writers.emplace_back([&, t] {
      auto c = RawConnection::Tcp(server_.port());
      if (c == nullptr) return void(failures[t] = "no connection");
      const std::string exec =
          Multibulk({"MULTI"}) + Multibulk({"INCR", "a"}) +
          Multibulk({"SET", "pad" + std::to_string(t), std::string(512, 'p')}) +
          Multibulk({"INCR", "b"}) + Multibulk({"EXEC"});
      while (!stop.load()) {
        if (!c->Send(exec)) return void(failures[t] = "send failed");
        for (int i = 0; i < 5; ++i) {
          if (!c->ReadReply()) return void(failures[t] = "no reply");
        }
      }
    });
  }
  int started = 0;
  for (int i = 0; i < 40; ++i) {
    std::this_thread::sleep_for(20ms);
    if (Call({"BGSAVE"}) == "+Background saving started\r\n") ++started;
  }
  ASSERT_TRUE(WaitBgsaveDone(*conn_));
  ASSERT_EQ(Call({"BGSAVE"}), "+Background saving started\r\n");
  ASSERT_TRUE(WaitBgsaveDone(*conn_));
  EXPECT_EQ(InfoField(*conn_, "rdb_last_bgsave_status"), "ok");
  // A crash while the writers go on: only the snapshot is left.
  ASSERT_TRUE(server_.Kill());
  stop = true;
  for (auto& w : writers) w.join();
  EXPECT_GE(started, 2);
  ASSERT_TRUE(server_.Restart(Persistence("no")));
  ASSERT_NO_FATAL_FAILURE(Connect());
  const std::string a = Call({"GET", "a"});
  EXPECT_NE(a, "$-1\r\n");
  EXPECT_EQ(a, Call({"GET", "b"}));
}

// `save ""` is what clients (and Redis's own tests) set: prefixd has no save points, so it is the
// one value taken.
TEST_F(LoglessSnapshotTest, SaveTakesOnlyNoSavePoints) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Persistence("no")));
  ASSERT_NO_FATAL_FAILURE(Connect());
  EXPECT_EQ(Call({"CONFIG", "GET", "save"}), "*2\r\n$4\r\nsave\r\n$0\r\n\r\n");
  EXPECT_EQ(Call({"CONFIG", "SET", "save", ""}), "+OK\r\n");
  EXPECT_EQ(Call({"CONFIG", "SET", "save", "3600 1"}),
            "-ERR CONFIG SET failed (possibly related to argument 'save') - only \"\" is accepted "
            "(prefixd has no save points)\r\n");
}

// A server with the log owns its directory: one without it neither loads it while it runs nor
// writes a snapshot into it.
TEST_F(LoglessSnapshotTest, ADirectoryInUseByAServerWithTheLogIsRefused) {
  const std::string dir = ::testing::TempDir() + "prefixd-logless-" + std::to_string(getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  ASSERT_NO_FATAL_FAILURE(StartServer(Persistence("no", dir)));
  ASSERT_NO_FATAL_FAILURE(Connect());
  ASSERT_EQ(Call({"SET", "a", "1"}), "+OK\r\n");

  ServerProcess logged;
  ASSERT_TRUE(logged.Start(Persistence("yes", dir)));
  EXPECT_EQ(Call({"SAVE"}),
            "-ERR data directory " + dir + " is in use by another prefixd process\r\n");
  EXPECT_EQ(Call({"BGSAVE"}), "+Background saving started\r\n");
  ASSERT_TRUE(WaitBgsaveDone(*conn_));
  EXPECT_EQ(InfoField(*conn_, "rdb_last_bgsave_status"), "err");
  EXPECT_EQ(InfoField(*conn_, "rdb_changes_since_last_save"), "1");
  EXPECT_FALSE(fs::exists(dir + "/snapshot.pds"));

  // The directory now holds the log's files: a second server without the log may not load it.
  auto to_logged = RawConnection::Tcp(logged.port());
  ASSERT_NE(to_logged, nullptr);
  ASSERT_EQ(to_logged->Call({"SET", "b", "2"}), "+OK\r\n");
  ServerProcess second;
  EXPECT_FALSE(second.Start(Persistence("no", dir)));
  EXPECT_NE(second.ReadLog().find("is in use by another prefixd process"), std::string::npos)
      << second.ReadLog();
  ASSERT_TRUE(logged.Stop());
  ASSERT_TRUE(server_.Stop());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace prefixd::it
