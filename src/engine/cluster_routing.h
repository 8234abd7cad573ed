// Cluster routing: where a keyed request must be served when cluster-enabled is yes, as Redis's
// getNodeByQuery decides it (MOVED, ASK, CROSSSLOT, TRYAGAIN, CLUSTERDOWN). Reads one snapshot of
// the topology; runs on the io thread of the calling connection.
#pragma once

#include <string>

#include "cluster/topology.h"
#include "engine/command.h"
#include "engine/engine.h"

namespace prefixd::commands {

// Whether the cluster serves requests: every slot assigned, unless
// cluster-require-full-coverage is no (CLUSTER INFO's cluster_state, CLUSTERDOWN).
bool ClusterOk(const Engine& engine, const cluster::Topology& t);

// The error reply (without '-') that sends `args` elsewhere, or empty to serve it here. A
// request without keys is always served here. Also asked with only the arguments received before
// a large one (the key of a 300 MB SSM.PREFIX.STORE): a redirect found from those is final, so
// the rest of the request is discarded as it arrives. `migrating` (when given) is set when the
// request is to be served here from a slot this node is migrating away.
std::string ClusterRedirect(Engine& engine, const server::ClientState& client,
                            const CommandSpec& spec, const protocol::Request& args,
                            bool* migrating = nullptr);

}  // namespace prefixd::commands
