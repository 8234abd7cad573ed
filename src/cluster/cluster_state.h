// ClusterState: this node's current view of the cluster and the nodes.conf file that keeps it.
// Readers on any io thread take a snapshot (a shared pointer copied under a shared lock); changes
// (CLUSTER ADDSLOTS, SETSLOT, ...) are made one at a time on a copy, written to the file and
// synced before the copy is published, so a restart finds what clients were last told.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "cluster/topology.h"

namespace prefixd::cluster {

class ClusterState {
 public:
  // Loads `path`, or creates it with a new node id, this node as a master and no slots. This
  // node's address becomes `ip`:`port` (bus port `port` + 10000) unless the file names an ip.
  // Null with `error` set when the file cannot be read, parsed or written.
  static std::unique_ptr<ClusterState> Open(const std::string& path, const std::string& ip,
                                            int port, std::string& error);

  std::shared_ptr<const Topology> Snapshot() const {
    std::shared_lock lock(mu_);
    return current_;
  }

  // Runs `change` on a copy of the topology; when it returns no error text, saves the copy and
  // publishes it. Returns the error text (Redis's reply text, without '-'), or empty.
  std::string Change(const std::function<std::string(Topology&)>& change);
  // Writes the current topology to the file again (CLUSTER SAVECONFIG).
  std::string Save();

  const std::string& path() const { return path_; }

 private:
  ClusterState(std::string path, std::shared_ptr<const Topology> topology)
      : path_(std::move(path)), current_(std::move(topology)) {}

  std::string path_;
  std::mutex change_mu_;  // one change at a time, file write included
  mutable std::shared_mutex mu_;
  std::shared_ptr<const Topology> current_;
};

// Writes `text` to `path` through a temporary file, synced and renamed into place.
std::string WriteFileAtomically(const std::string& path, const std::string& text);

}  // namespace prefixd::cluster
