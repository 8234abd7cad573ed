// prefixd::ClusterClient: the slot map (read with CLUSTER SLOTS), the nodes with their lazily
// made connections, and the following of redirects (include/prefixd/cluster_client.h); what the
// servers send is parsed in cluster_map.h. The slot function is the server's own
// (common/key_slot.h), so client and server cannot disagree.
#include "prefixd/cluster_client.h"

#include <array>
#include <thread>
#include <utility>

#include "cluster_map.h"
#include "common/key_slot.h"
#include "connection.h"

namespace prefixd {

using client_internal::ClusterAddress;
using client_internal::FormatClusterAddress;
using client_internal::ParseClusterAddress;
using client_internal::ParseClusterSlots;
using client_internal::ParseRedirect;
using client_internal::Redirect;
using client_internal::RedirectKind;

namespace {

constexpr int32_t kNoNode = -1;

// The errors after which the node's connection is gone (the Client closed it).
bool IsNodeLost(const Status& status) {
  return status.code() == StatusCode::kIoError || status.code() == StatusCode::kTimeout ||
         status.code() == StatusCode::kUnavailable;
}

// A short pause before another try of TRYAGAIN or CLUSTERDOWN, longer each time.
void BackOff(int tries) {
  std::this_thread::sleep_for(std::chrono::milliseconds(std::min(10 << tries, 200)));
}

}  // namespace

bool IsClusterRedirect(const Status& status) {
  return ParseRedirect(status).kind != RedirectKind::kNone;
}

struct ClusterClient::State {
  struct Node {
    ClusterAddress address;
    std::optional<Client> client;  // made on first use
  };

  explicit State(const ClusterOptions& o) : options(o) { owner.fill(kNoNode); }

  std::string AddressOf(size_t node) const { return FormatClusterAddress(nodes[node]->address); }

  // The node at `address`; an empty host means `reached_via`'s (an unknown endpoint is the
  // address the answer came from).
  size_t FindOrAdd(ClusterAddress address, std::optional<size_t> reached_via = std::nullopt) {
    if (address.host.empty() && reached_via) address.host = nodes[*reached_via]->address.host;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i]->address == address) return i;
    }
    nodes.push_back(std::make_unique<Node>(Node{std::move(address), std::nullopt}));
    return nodes.size() - 1;
  }

  // The node's connection, made or remade as needed.
  Result<Client*> Connected(size_t node) {
    Node& n = *nodes[node];
    if (!n.client) {
      PREFIXD_ASSIGN_OR_RETURN(Client client,
                               Client::Connect(n.address.host, n.address.port, options.client));
      if (options.password) {
        PREFIXD_RETURN_IF_ERROR(options.username ? client.Auth(*options.username, *options.password)
                                                 : client.Auth(*options.password));
      }
      n.client.emplace(std::move(client));
    } else if (!n.client->connected()) {
      PREFIXD_RETURN_IF_ERROR(n.client->Reconnect());
    }
    return &*n.client;
  }

  // Reads the whole map from `node`; the map is replaced only when the reply is well formed.
  Status RefreshFrom(size_t node) {
    PREFIXD_ASSIGN_OR_RETURN(Client * client, Connected(node));
    PREFIXD_ASSIGN_OR_RETURN(Reply reply, client->Command({"CLUSTER", "SLOTS"}));
    auto ranges = ParseClusterSlots(reply);
    if (!ranges.ok()) {
      return Status::ProtocolError("CLUSTER SLOTS from " + AddressOf(node) + ": " +
                                   ranges.status().message());
    }
    std::array<int32_t, kClusterSlots> fresh;
    fresh.fill(kNoNode);
    for (const client_internal::SlotRange& range : *ranges) {
      const auto owner_node = static_cast<int32_t>(FindOrAdd(range.owner, node));
      for (uint32_t slot = range.first; slot <= range.last; ++slot) fresh[slot] = owner_node;
    }
    owner = fresh;
    return Status::Ok();
  }

  // The map from the first node that answers, `prefer` first and never `exclude`.
  Status Refresh(std::optional<size_t> prefer, std::optional<size_t> exclude) {
    std::string errors;
    std::vector<size_t> order;
    if (prefer) order.push_back(*prefer);
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (i != prefer && i != exclude) order.push_back(i);
    }
    for (size_t node : order) {
      const Status st = RefreshFrom(node);
      if (st.ok()) return st;
      errors += (errors.empty() ? "" : "; ") + AddressOf(node) + ": " + st.ToString();
    }
    return Status::Unavailable("cluster: no node answered CLUSTER SLOTS (" + errors + ")");
  }

  ClusterOptions options;
  std::vector<std::unique_ptr<Node>> nodes;  // stable addresses: a Client* outlives a growth
  std::array<int32_t, kClusterSlots> owner;  // slot -> index into nodes, or kNoNode
};

ClusterClient::ClusterClient(std::unique_ptr<State> state) : state_(std::move(state)) {}
ClusterClient::ClusterClient(ClusterClient&&) noexcept = default;
ClusterClient& ClusterClient::operator=(ClusterClient&&) noexcept = default;
ClusterClient::~ClusterClient() = default;

Result<ClusterClient> ClusterClient::Connect(std::span<const std::string> seeds,
                                             const ClusterOptions& options) {
  if (seeds.empty()) return Status::InvalidArgument("cluster: no seed node given");
  if (options.max_retries < 0) return Status::InvalidArgument("cluster: max_retries < 0");
  auto state = std::make_unique<State>(options);
  for (const std::string& seed : seeds) {
    std::optional<ClusterAddress> address = ParseClusterAddress(seed);
    if (!address || address->host.empty()) {
      return Status::InvalidArgument("cluster: seed '" + seed + "' is not host:port");
    }
    state->FindOrAdd(std::move(*address));
  }
  PREFIXD_RETURN_IF_ERROR(state->Refresh(std::nullopt, std::nullopt));
  return ClusterClient(std::move(state));
}

Result<ClusterClient> ClusterClient::Connect(std::string_view seed, const ClusterOptions& options) {
  const std::string seeds[1] = {std::string(seed)};
  return Connect(seeds, options);
}

uint16_t ClusterClient::SlotOf(std::string_view key) { return KeySlot(key); }

Result<Client*> ClusterClient::BeginTry(Try& t) {
  if (!state_) {
    t.final = true;
    return client_internal::MovedFrom();
  }
  State& s = *state_;
  if (t.ask_node) {
    t.node = *t.ask_node;
    t.ask_node.reset();
    PREFIXD_ASSIGN_OR_RETURN(Client * client, s.Connected(t.node));
    PREFIXD_RETURN_IF_ERROR(client->Command({"ASKING"}).status());
    return client;
  }
  if (s.owner[t.slot] == kNoNode) static_cast<void>(s.Refresh(std::nullopt, std::nullopt));
  if (s.owner[t.slot] == kNoNode) {
    t.final = true;
    return Status::Unavailable("cluster: no node serves slot " + std::to_string(t.slot) +
                               " (CLUSTER SLOTS names none)");
  }
  t.node = static_cast<size_t>(s.owner[t.slot]);
  return s.Connected(t.node);
}

bool ClusterClient::EndTry(Try& t, const Status& status) {
  if (status.ok() || t.final) return false;
  State& s = *state_;
  const Redirect r = ParseRedirect(status);
  if (r.kind == RedirectKind::kNone && !IsNodeLost(status)) return false;
  if (t.tries >= s.options.max_retries) {
    t.gave_up =
        Status(status.code(), "cluster: slot " + std::to_string(t.slot) + ": gave up after " +
                                  std::to_string(t.tries + 1) + " tries: " + status.message());
    return false;
  }
  ++t.tries;
  // A redirect naming ":port" means the host this node was reached at.
  auto target = [&] { return s.FindOrAdd(r.to, t.node); };
  switch (r.kind) {
    case RedirectKind::kMoved: {
      const size_t to = target();
      // The map from the new owner first; the MOVED itself is the freshest word on its slot.
      static_cast<void>(s.Refresh(to, std::nullopt));
      s.owner[r.slot] = static_cast<int32_t>(to);
      break;
    }
    case RedirectKind::kAsk:
      t.ask_node = target();
      break;
    case RedirectKind::kTryAgain:
      BackOff(t.tries);
      break;
    case RedirectKind::kClusterDown:
      BackOff(t.tries);
      static_cast<void>(s.Refresh(std::nullopt, std::nullopt));
      break;
    case RedirectKind::kNone:  // the node stopped answering
      static_cast<void>(s.Refresh(std::nullopt, t.node));
      break;
  }
  return true;
}

Result<Reply> ClusterClient::Command(std::string_view key,
                                     const std::vector<std::string_view>& argv) {
  return WithKey(key, [&](Client& c) { return c.Command(argv); });
}

Status ClusterClient::Store(std::string_view sid, uint32_t layer, std::span<const uint8_t> blob) {
  return WithKey(sid, [&](Client& c) { return c.Store(sid, layer, blob); });
}

Status ClusterClient::Store(std::string_view sid, uint32_t layer, std::string_view blob) {
  return WithKey(sid, [&](Client& c) { return c.Store(sid, layer, blob); });
}

Result<std::optional<Blob>> ClusterClient::Fetch(std::string_view sid, uint32_t layer) {
  return WithKey(sid, [&](Client& c) { return c.Fetch(sid, layer); });
}

Result<std::optional<size_t>> ClusterClient::FetchInto(std::string_view sid, uint32_t layer,
                                                       std::span<uint8_t> out, size_t chunk_bytes,
                                                       int depth) {
  return WithKey(sid, [&](Client& c) { return c.FetchInto(sid, layer, out, chunk_bytes, depth); });
}

Status ClusterClient::MStore(std::string_view sid, std::span<const LayerBlob> layers) {
  return WithKey(sid, [&](Client& c) { return c.MStore(sid, layers); });
}

Result<std::vector<std::optional<Blob>>> ClusterClient::MFetch(std::string_view sid,
                                                               std::span<const uint32_t> layers) {
  return WithKey(sid, [&](Client& c) { return c.MFetch(sid, layers); });
}

Result<std::vector<LayerInfo>> ClusterClient::Layers(std::string_view sid) {
  return WithKey(sid, [&](Client& c) { return c.Layers(sid); });
}

Status ClusterClient::Drop(std::string_view sid) {
  return WithKey(sid, [&](Client& c) { return c.Drop(sid); });
}

Status ClusterClient::Drop(std::string_view sid, uint32_t layer) {
  return WithKey(sid, [&](Client& c) { return c.Drop(sid, layer); });
}

Status ClusterClient::RefreshSlots() {
  if (!state_) return client_internal::MovedFrom();
  return state_->Refresh(std::nullopt, std::nullopt);
}

std::string ClusterClient::NodeOf(std::string_view key) const {
  if (!state_) return {};
  const int32_t node = state_->owner[KeySlot(key)];
  return node == kNoNode ? std::string() : state_->AddressOf(static_cast<size_t>(node));
}

size_t ClusterClient::node_count() const { return state_ ? state_->nodes.size() : 0; }

}  // namespace prefixd
