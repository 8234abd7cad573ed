// PrefixdLink: the hybrid client's way to prefixd — one server (prefixd::Client, over TCP with
// --host/--port or over its unix socket with --unix-socket), or a cluster (prefixd::ClusterClient,
// --cluster host:port) — behind one rule: every call is routed by the key it concerns (a session
// id or a namespace), whose hash tag keeps the keys a prefix needs on one node (PrefixNamespace
// names it `{hyb…}`, so its `_pk`/`_pv` sessions go with it). Over a unix socket it also holds a
// ShmClient beside the Client, the same-host path fetches read through (docs/shm-transport.md).
// One thread at a time, like the clients it holds.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "prefixd/client.h"
#include "prefixd/cluster_client.h"
#include "prefixd/shm.h"
#include "prefixd/status.h"

namespace prefixd::hybrid {

// How fetches reach the server: TCP, the unix socket (bytes through the socket), or the shared
// arenas (a lease and a pointer; the unix socket carries only the places).
enum class LinkTransport : uint8_t { kTcp, kUnix, kShm };

// "tcp" / "unix" / "shm".
inline std::string_view LinkTransportName(LinkTransport transport) {
  switch (transport) {
    case LinkTransport::kTcp:
      return "tcp";
    case LinkTransport::kUnix:
      return "unix";
    case LinkTransport::kShm:
      return "shm";
  }
  return "?";
}

inline bool IsUnknownCommand(const Status& st) {
  return st.code() == StatusCode::kServerError &&
         st.message().find("unknown command") != std::string::npos;
}

// A shared call the server answered with an error it would not give the socket's command (the
// per-connection lease cap, above all): the socket still serves the same bytes, so the caller
// does that call again over it (and counts a fallback).
inline bool IsRefusedSharedCall(const Status& st) {
  return st.code() == StatusCode::kServerError && !IsUnknownCommand(st) && !IsClusterRedirect(st);
}

class PrefixdLink {
 public:
  explicit PrefixdLink(Client client, LinkTransport transport = LinkTransport::kTcp)
      : client_(std::move(client)), transport_(transport) {}
  explicit PrefixdLink(ClusterClient cluster) : cluster_(std::move(cluster)) {}
  // Over the unix socket, with the shared path open beside `client`.
  PrefixdLink(Client client, std::unique_ptr<ShmClient> shm)
      : client_(std::move(client)), shm_(std::move(shm)), transport_(LinkTransport::kShm) {}

  // Calls f(Client&) on the node serving `key` (following the cluster's redirects), or on the
  // one server.
  template <typename F>
  auto WithKey(std::string_view key, F&& f) -> std::invoke_result_t<F&, Client&> {
    if (cluster_) return cluster_->WithKey(key, std::forward<F>(f));
    return f(*client_);
  }

  bool is_cluster() const { return cluster_.has_value(); }
  // The shared path, when it is open (null over TCP, a cluster, or where SHM.HELLO was refused).
  ShmClient* shm() const { return shm_.get(); }
  LinkTransport transport() const { return transport_; }
  // Why the shared path was asked for and is not used (SHM.HELLO's refusal); empty otherwise.
  const std::string& shm_refused() const { return shm_refused_; }
  void set_shm_refused(std::string why) { shm_refused_ = std::move(why); }

 private:
  std::optional<Client> client_;
  std::optional<ClusterClient> cluster_;
  std::unique_ptr<ShmClient> shm_;
  LinkTransport transport_ = LinkTransport::kTcp;
  std::string shm_refused_;
};

}  // namespace prefixd::hybrid
