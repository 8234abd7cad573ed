// What the cluster client reads from servers (src/client/cluster_map.h): node addresses, the
// redirect errors, and CLUSTER SLOTS replies — Redis 7's forms accepted, everything malformed
// refused with a reason rather than trusted.
#include "client/cluster_map.h"

#include <gtest/gtest.h>

#include "prefixd/cluster_client.h"

#include <string>
#include <vector>

namespace prefixd::client_internal {
namespace {

Reply Int(int64_t v) { return {.type = Reply::Type::kInteger, .integer = v}; }
Reply Str(std::string s) { return {.type = Reply::Type::kString, .str = std::move(s)}; }
Reply Arr(std::vector<Reply> e) { return {.type = Reply::Type::kArray, .elements = std::move(e)}; }
// One range as Redis 7 sends it: [start, end, [host, port, id, {}]].
Reply Range(int64_t start, int64_t end, std::string host, int64_t port) {
  return Arr({Int(start), Int(end),
              Arr({Str(std::move(host)), Int(port), Str(std::string(40, 'a')), Arr({})})});
}

TEST(ClusterMapTest, ParsesAddressesAsRedisWritesThem) {
  EXPECT_EQ(ParseClusterAddress("127.0.0.1:7000"), (ClusterAddress{"127.0.0.1", 7000}));
  EXPECT_EQ(ParseClusterAddress("[::1]:7000"), (ClusterAddress{"::1", 7000}));
  EXPECT_EQ(ParseClusterAddress("::1:7000"), (ClusterAddress{"::1", 7000}));
  EXPECT_EQ(ParseClusterAddress(":7000"), (ClusterAddress{"", 7000}));
  EXPECT_EQ(ParseClusterAddress("h:65535"), (ClusterAddress{"h", 65535}));
  for (const char* bad : {"h", "h:", "h:0", "h:65536", "h:-1", "h:7000x", "h: 7000", ""}) {
    EXPECT_FALSE(ParseClusterAddress(bad).has_value()) << bad;
  }
  EXPECT_EQ(FormatClusterAddress({"::1", 7000}), "[::1]:7000");
  EXPECT_EQ(FormatClusterAddress({"10.0.0.1", 7000}), "10.0.0.1:7000");
}

TEST(ClusterMapTest, ParsesRedirectsAndNothingElse) {
  Redirect moved = ParseRedirect(Status::ServerError("MOVED 3999 127.0.0.1:6381"));
  EXPECT_EQ(moved.kind, RedirectKind::kMoved);
  EXPECT_EQ(moved.slot, 3999);
  EXPECT_EQ(moved.to, (ClusterAddress{"127.0.0.1", 6381}));
  Redirect ask = ParseRedirect(Status::ServerError("ASK 16383 :6381"));
  EXPECT_EQ(ask.kind, RedirectKind::kAsk);
  EXPECT_EQ(ask.slot, 16383);
  EXPECT_EQ(ask.to, (ClusterAddress{"", 6381}));
  EXPECT_EQ(ParseRedirect(Status::ServerError("TRYAGAIN Multiple keys request during rehashing "
                                              "of slot"))
                .kind,
            RedirectKind::kTryAgain);
  EXPECT_EQ(ParseRedirect(Status::ServerError("CLUSTERDOWN The cluster is down")).kind,
            RedirectKind::kClusterDown);
  for (const char* bad :
       {"MOVED 16384 h:1", "MOVED -1 h:1", "MOVED 1 h", "MOVED 1", "MOVED", "MOVED x h:1",
        "ASK 1 h:0", "MOVEDX 1 h:1", "moved 1 h:1", "ERR unknown command",
        "CROSSSLOT Keys in request don't hash to the "
        "same slot"}) {
    EXPECT_EQ(ParseRedirect(Status::ServerError(bad)).kind, RedirectKind::kNone) << bad;
  }
  EXPECT_EQ(ParseRedirect(Status::IoError("MOVED 1 h:1")).kind, RedirectKind::kNone);
  // The public test is the same one.
  EXPECT_TRUE(IsClusterRedirect(Status::ServerError("ASK 3999 [::1]:6381")));
  EXPECT_TRUE(IsClusterRedirect(Status::ServerError("CLUSTERDOWN Hash slot not served")));
  EXPECT_FALSE(IsClusterRedirect(Status::ServerError("MOVED 16384 127.0.0.1:6381")));
  EXPECT_FALSE(IsClusterRedirect(Status::IoError("MOVED 1 127.0.0.1:1")));
}

TEST(ClusterMapTest, ParsesClusterSlotsAndRefusesWhatCannotBeAMap) {
  auto map = ParseClusterSlots(Arr(
      {Range(0, 5460, "127.0.0.1", 7001), Range(5461, 16383, "", 7002), Range(9, 9, "?", 7003)}));
  EXPECT_FALSE(map.ok());  // slot 9 twice
  map = ParseClusterSlots(Arr({Range(0, 5460, "127.0.0.1", 7001), Range(5461, 16382, "", 7002),
                               Range(16383, 16383, "?", 7003)}));
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  ASSERT_EQ(map->size(), 3u);
  EXPECT_EQ((*map)[0].first, 0);
  EXPECT_EQ((*map)[0].last, 5460);
  EXPECT_EQ((*map)[0].owner, (ClusterAddress{"127.0.0.1", 7001}));
  EXPECT_EQ((*map)[1].owner, (ClusterAddress{"", 7002}));
  EXPECT_EQ((*map)[2].owner, (ClusterAddress{"", 7003}));  // "?": unknown, like ""
  // A replica after the master, and a node entry with only host and port, are fine.
  Reply with_replica = Range(0, 1, "h", 1);
  with_replica.elements.push_back(Arr({Str("r"), Int(2)}));
  EXPECT_TRUE(
      ParseClusterSlots(Arr({with_replica, Arr({Int(2), Int(3), Arr({Str("h"), Int(1)})})})).ok());
  EXPECT_TRUE(ParseClusterSlots(Arr({})).ok());  // no slots assigned yet

  const std::vector<std::pair<Reply, std::string>> bad = {
      {Str("x"), "not an array"},
      {Arr({Int(1)}), "a range is not"},
      {Arr({Arr({Int(0), Int(1)})}), "a range is not"},
      {Arr({Arr({Int(0), Int(1), Str("h")})}), "a range is not"},
      {Arr({Arr({Int(0), Int(1), Arr({Str("h")})})}), "a range is not"},
      {Arr({Arr({Int(0), Int(1), Arr({Int(1), Int(1)})})}), "a range is not"},
      {Arr({Arr({Int(0), Int(1), Arr({Str("h"), Str("1")})})}), "a range is not"},
      {Arr({Arr({Str("0"), Int(1), Arr({Str("h"), Int(1)})})}), "a range is not"},
      {Arr({Range(-1, 1, "h", 1)}), "not within 0-16383"},
      {Arr({Range(2, 1, "h", 1)}), "not within 0-16383"},
      {Arr({Range(0, 16384, "h", 1)}), "not within 0-16383"},
      {Arr({Range(0, 1, "h", 0)}), "names port 0"},
      {Arr({Range(0, 1, "h", 65536)}), "names port 65536"},
      {Arr({Range(0, 10, "h", 1), Range(10, 20, "h", 2)}), "range 10-20 repeats slot 10"},
  };
  for (const auto& [reply, why] : bad) {
    auto parsed = ParseClusterSlots(reply);
    ASSERT_FALSE(parsed.ok()) << why;
    EXPECT_EQ(parsed.status().code(), StatusCode::kProtocolError);
    EXPECT_NE(parsed.status().message().find(why), std::string::npos)
        << parsed.status().message() << " (wanted: " << why << ")";
  }
}

}  // namespace
}  // namespace prefixd::client_internal
