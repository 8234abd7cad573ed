// Loopback clusters for client tests: three prefixd-server nodes (PrefixdCluster) or three
// redis-server 7 nodes (RedisCluster), each started from a hand-written nodes.conf that already
// names all three, with the slots split as `redis-cli --cluster create` splits them. Used from
// one test thread.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {

inline constexpr int kClusterNodes = 3;

// Node i's slots, its 40-hex-digit id, and the node whose range holds `slot`.
std::pair<int, int> ClusterRange(int node);
std::string ClusterNodeId(int node);
int ClusterOwnerOf(uint16_t slot);

// Node `self`'s nodes.conf for nodes on these loopback ports (bus port: port + 10000, or 0 past
// 65535).
std::string ClusterNodesConf(const std::array<int, kClusterNodes>& ports, int self);

// A key `<prefix><n>` whose slot node `node` serves.
std::string ClusterKeyOnNode(int node, std::string_view prefix);

class PrefixdCluster {
 public:
  PrefixdCluster() = default;
  PrefixdCluster(const PrefixdCluster&) = delete;
  PrefixdCluster& operator=(const PrefixdCluster&) = delete;
  // Stops the nodes and removes their data directories.
  ~PrefixdCluster();

  // Starts the three nodes with `flags` added to `--cluster-enabled yes`.
  ::testing::AssertionResult Start(const std::vector<std::string>& flags = {});
  // Starts node i again after Kill() or Stop(), on its port, from its data directory.
  ::testing::AssertionResult Restart(int i);

  ServerProcess& node(int i) { return nodes_[static_cast<size_t>(i)]; }
  int port(int i) const { return ports_[static_cast<size_t>(i)]; }
  std::string address(int i) const { return "127.0.0.1:" + std::to_string(port(i)); }

 private:
  ServerProcess::Options NodeOptions(int i) const;

  std::vector<std::string> flags_;
  std::array<int, kClusterNodes> ports_{};
  std::array<std::string, kClusterNodes> dirs_;
  std::array<ServerProcess, kClusterNodes> nodes_;
};

// Three redis-server cluster nodes. No CLUSTER MEET or `redis-cli --cluster create` is needed:
// the nodes connect their buses and report cluster_state:ok once Redis's 2 s rejoin delay for a
// started master is over.
class RedisCluster {
 public:
  static constexpr const char* kBinary = "/usr/bin/redis-server";

  RedisCluster() = default;
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;
  ~RedisCluster();

  // Empty on success, else why not (with the nodes' logs).
  std::string Start();
  void Stop();

  int port(int i) const { return ports_[static_cast<size_t>(i)]; }
  std::string address(int i) const { return "127.0.0.1:" + std::to_string(port(i)); }

 private:
  bool Launch();
  bool WaitReady(Millis timeout);

  std::string root_;
  std::array<int, kClusterNodes> ports_{};
  std::array<pid_t, kClusterNodes> pids_{-1, -1, -1};
};

}  // namespace prefixd::it
