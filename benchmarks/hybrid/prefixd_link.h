// PrefixdLink: the hybrid client's way to prefixd — one server (prefixd::Client, --host/--port)
// or a cluster (prefixd::ClusterClient, --cluster host:port) — behind one rule: every call is
// routed by the key it concerns (a session id or a namespace), whose hash tag keeps the keys a
// prefix needs on one node (PrefixNamespace names it `{hyb…}`, so its `_pk`/`_pv` sessions go
// with it). One thread at a time, like the clients it holds.
#pragma once

#include <optional>
#include <string_view>
#include <utility>

#include "prefixd/client.h"
#include "prefixd/cluster_client.h"

namespace prefixd::hybrid {

class PrefixdLink {
 public:
  explicit PrefixdLink(Client client) : client_(std::move(client)) {}
  explicit PrefixdLink(ClusterClient cluster) : cluster_(std::move(cluster)) {}

  // Calls f(Client&) on the node serving `key` (following the cluster's redirects), or on the
  // one server.
  template <typename F>
  auto WithKey(std::string_view key, F&& f) -> std::invoke_result_t<F&, Client&> {
    if (cluster_) return cluster_->WithKey(key, std::forward<F>(f));
    return f(*client_);
  }

  bool is_cluster() const { return cluster_.has_value(); }

 private:
  std::optional<Client> client_;
  std::optional<ClusterClient> cluster_;
};

}  // namespace prefixd::hybrid
