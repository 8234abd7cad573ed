#include "cluster/cluster_state.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace prefixd::cluster {
namespace {

std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

std::string DirectoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::string WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string temp = path + ".tmp";
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", temp);
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string error = Errno("cannot write", temp);
      ::close(fd);
      return error;
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    std::string error = Errno("cannot sync", temp);
    ::close(fd);
    return error;
  }
  ::close(fd);
  if (::rename(temp.c_str(), path.c_str()) != 0) return Errno("cannot rename to", path);
  int dir = ::open(DirectoryOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)::fsync(dir);
    ::close(dir);
  }
  return {};
}

std::unique_ptr<ClusterState> ClusterState::Open(const std::string& path, const std::string& ip,
                                                 int port, std::string& error) {
  auto topology = std::make_shared<Topology>();
  std::ifstream in(path, std::ios::binary);
  if (in) {
    std::stringstream text;
    text << in.rdbuf();
    ParsedTopology parsed = ParseNodesConf(text.str());
    if (!parsed.error.empty()) {
      error = path + ": " + parsed.error;
      return nullptr;
    }
    *topology = std::move(parsed.topology);
  } else if (errno != ENOENT) {
    error = Errno("cannot read", path);
    return nullptr;
  } else {
    Node self;
    self.id = RandomNodeId();
    self.flags = {"myself", "master"};
    topology->nodes.push_back(std::move(self));
    topology->myself = 0;
  }
  // This node answers on the port it listens on, whatever an older file said (as Redis does).
  Node& self = topology->nodes[topology->myself];
  if (self.ip.empty()) self.ip = ip;
  if (self.port != port) {
    self.port = port;
    self.bus_port = port + 10000 <= 65535 ? port + 10000 : 0;
  }
  topology->assigned_slots = topology->CountAssignedSlots();
  std::unique_ptr<ClusterState> state(new ClusterState(path, std::move(topology)));
  error = state->Save();
  if (!error.empty()) return nullptr;
  return state;
}

std::string ClusterState::Change(const std::function<std::string(Topology&)>& change) {
  std::lock_guard serial(change_mu_);
  auto next = std::make_shared<Topology>(*Snapshot());
  if (std::string error = change(*next); !error.empty()) return error;
  next->assigned_slots = next->CountAssignedSlots();
  if (std::string error = WriteFileAtomically(path_, FormatNodes(*next, true)); !error.empty()) {
    return "ERR cannot save the cluster configuration: " + error;
  }
  std::unique_lock lock(mu_);
  current_ = std::move(next);
  return {};
}

std::string ClusterState::Save() {
  std::lock_guard serial(change_mu_);
  return WriteFileAtomically(path_, FormatNodes(*Snapshot(), true));
}

}  // namespace prefixd::cluster
