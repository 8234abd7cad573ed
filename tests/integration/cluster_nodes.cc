// The loopback clusters of cluster_nodes.h: their nodes.conf files, prefixd nodes through
// ServerProcess, redis-server nodes as plain children.
#include "integration/cluster_nodes.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <thread>

#include "prefixd/client.h"
#include "prefixd/cluster_client.h"

namespace prefixd::it {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::array<std::pair<int, int>, kClusterNodes> kRanges{
    {{0, 5460}, {5461, 10922}, {10923, 16383}}};

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

}  // namespace

std::pair<int, int> ClusterRange(int node) { return kRanges[static_cast<size_t>(node)]; }

std::string ClusterNodeId(int node) { return std::string(40, static_cast<char>('a' + node)); }

int ClusterOwnerOf(uint16_t slot) {
  for (int i = 0; i < kClusterNodes; ++i) {
    if (slot >= ClusterRange(i).first && slot <= ClusterRange(i).second) return i;
  }
  return -1;
}

std::string ClusterNodesConf(const std::array<int, kClusterNodes>& ports, int self) {
  std::string out;
  for (int j = 0; j < kClusterNodes; ++j) {
    const int port = ports[static_cast<size_t>(j)];
    const int bus = port + 10000 <= 65535 ? port + 10000 : 0;
    out += ClusterNodeId(j) + " 127.0.0.1:" + std::to_string(port) + "@" + std::to_string(bus) +
           (j == self ? " myself,master" : " master") + " - 0 0 " + std::to_string(j + 1) +
           " connected " + std::to_string(ClusterRange(j).first) + "-" +
           std::to_string(ClusterRange(j).second) + "\n";
  }
  return out + "vars currentEpoch " + std::to_string(kClusterNodes) + " lastVoteEpoch 0\n";
}

std::string ClusterKeyOnNode(int node, std::string_view prefix) {
  for (int n = 0;; ++n) {
    std::string key = std::string(prefix) + std::to_string(n);
    if (ClusterOwnerOf(ClusterClient::SlotOf(key)) == node) return key;
  }
}

// --- PrefixdCluster ---

PrefixdCluster::~PrefixdCluster() {
  // Side by side too: a TSan build's exit alone waits a second (its atexit_sleep_ms).
  std::array<std::string, kClusterNodes> unclean;
  std::vector<std::thread> stoppers;
  for (int i = 0; i < kClusterNodes; ++i) {
    stoppers.emplace_back([this, i, &unclean] {
      std::string how;
      if (node(i).Running() && !node(i).Stop(&how)) {
        unclean[static_cast<size_t>(i)] = how.empty() ? "(no reason given)" : how;
      }
    });
  }
  for (std::thread& t : stoppers) t.join();
  for (int i = 0; i < kClusterNodes; ++i) {
    if (!unclean[static_cast<size_t>(i)].empty()) {
      ADD_FAILURE() << "cluster node " << i
                    << " did not stop cleanly: " << unclean[static_cast<size_t>(i)];
    }
    std::error_code ec;
    if (!dirs_[static_cast<size_t>(i)].empty()) {
      std::filesystem::remove_all(dirs_[static_cast<size_t>(i)], ec);
    }
  }
}

ServerProcess::Options PrefixdCluster::NodeOptions(int i) const {
  ServerProcess::Options options;
  options.port = port(i);
  options.data_dir = dirs_[static_cast<size_t>(i)];
  options.flags = {"--cluster-enabled", "yes"};
  options.flags.insert(options.flags.end(), flags_.begin(), flags_.end());
  return options;
}

::testing::AssertionResult PrefixdCluster::Start(const std::vector<std::string>& flags) {
  flags_ = flags;
  for (int& port : ports_) port = FreeLoopbackPort();
  for (int i = 0; i < kClusterNodes; ++i) {
    char tmpl[] = "/tmp/prefixd-cluster-node-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return ::testing::AssertionFailure() << "mkdtemp failed";
    dirs_[static_cast<size_t>(i)] = tmpl;
    if (!WriteFile(std::string(tmpl) + "/nodes.conf", ClusterNodesConf(ports_, i))) {
      return ::testing::AssertionFailure() << "cannot write " << tmpl << "/nodes.conf";
    }
  }
  // The nodes start side by side: a sanitizer build takes a second or more per node.
  std::array<std::optional<::testing::AssertionResult>, kClusterNodes> started;
  std::vector<std::thread> starters;
  for (int i = 0; i < kClusterNodes; ++i) {
    starters.emplace_back([this, i, &started] {
      started[static_cast<size_t>(i)].emplace(node(i).Start(NodeOptions(i)));
    });
  }
  for (std::thread& t : starters) t.join();
  for (int i = 0; i < kClusterNodes; ++i) {
    if (!*started[static_cast<size_t>(i)]) {
      return *started[static_cast<size_t>(i)] << " (cluster node " << i << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult PrefixdCluster::Restart(int i) {
  return node(i).Restart(NodeOptions(i));
}

// --- RedisCluster ---

RedisCluster::~RedisCluster() {
  Stop();
  std::error_code ec;
  if (!root_.empty() && std::getenv("PREFIXD_IT_KEEP") == nullptr) {
    std::filesystem::remove_all(root_, ec);
  }
}

std::string RedisCluster::Start() {
  if (::access(kBinary, X_OK) != 0) return std::string(kBinary) + " is not installed";
  char tmpl[] = "/tmp/redis-cluster-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return "mkdtemp failed";
  root_ = tmpl;
  std::mt19937 rng(static_cast<uint32_t>(::getpid()) ^
                   static_cast<uint32_t>(Clock::now().time_since_epoch().count()));
  for (int attempt = 0; attempt < 5; ++attempt) {
    // Client ports base..base+2 and bus ports (+10000) below the kernel's ephemeral range
    // (32768 up), where the ports of other tests' servers and of every connection come from.
    const int base = 20000 + static_cast<int>(rng() % 2700);
    for (int i = 0; i < kClusterNodes; ++i) ports_[static_cast<size_t>(i)] = base + i;
    if (Launch() && WaitReady(15s)) return {};
    Stop();
  }
  std::string why = "the cluster did not come up in 5 tries; the last one's logs:";
  for (int i = 0; i < kClusterNodes; ++i) {
    std::ifstream log(root_ + "/redis-" + std::to_string(i) + ".log");
    why += "\n--- node " + std::to_string(i) + "\n";
    why.append(std::istreambuf_iterator<char>(log), std::istreambuf_iterator<char>());
  }
  return why;
}

void RedisCluster::Stop() {
  for (pid_t& pid : pids_) {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    pid = -1;
  }
}

bool RedisCluster::Launch() {
  for (int i = 0; i < kClusterNodes; ++i) {
    const std::string conf = root_ + "/nodes-" + std::to_string(i) + ".conf";
    if (!WriteFile(conf, ClusterNodesConf(ports_, i))) return false;
    const std::string port_text = std::to_string(port(i));
    const std::string log = root_ + "/redis-" + std::to_string(i) + ".log";
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execl(kBinary, "redis-server", "--port", port_text.c_str(), "--bind", "127.0.0.1",
              "--cluster-enabled", "yes", "--cluster-config-file", conf.c_str(), "--dir",
              root_.c_str(), "--save", "", "--appendonly", "no", "--loglevel", "warning",
              "--logfile", log.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    pids_[static_cast<size_t>(i)] = pid;
  }
  return true;
}

bool RedisCluster::WaitReady(Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  for (int i = 0; i < kClusterNodes; ++i) {
    for (;;) {
      if (Clock::now() > deadline) return false;
      if (int status = 0; ::waitpid(pids_[static_cast<size_t>(i)], &status, WNOHANG) != 0) {
        pids_[static_cast<size_t>(i)] = -1;  // it exited: a port was taken
        return false;
      }
      auto c = Client::Connect("127.0.0.1", port(i), 1000ms);
      if (c.ok()) {
        auto info = c->Command({"CLUSTER", "INFO"});
        if (info.ok() && info->str.find("cluster_state:ok") != std::string::npos) break;
      }
      std::this_thread::sleep_for(50ms);
    }
  }
  return true;
}

}  // namespace prefixd::it
