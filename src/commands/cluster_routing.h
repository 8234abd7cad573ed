// Cluster routing: where a keyed request must be served when cluster-enabled is yes, as Redis's
// getNodeByQuery decides it (MOVED, ASK, CROSSSLOT, TRYAGAIN, CLUSTERDOWN). Reads one snapshot of
// the topology; runs on the io thread of the calling connection.
#pragma once

#include <string>

#include "commands/command.h"
#include "commands/engine.h"

namespace prefixd::commands {

// The error reply (without '-') that sends `args` elsewhere, or empty to serve it here. A
// request without keys is always served here. Also asked with only the arguments received before
// a large one (the key of a 300 MB SSM.PREFIX.STORE): a redirect found from those is final, so
// the rest of the request is discarded as it arrives.
std::string ClusterRedirect(Engine& engine, const server::ClientState& client,
                            const CommandSpec& spec, const protocol::Request& args);

}  // namespace prefixd::commands
