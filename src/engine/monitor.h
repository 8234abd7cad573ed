// The line every MONITOR client receives for each command run, in Redis's format:
// +<unix time>.<microseconds> [<db> <addr>] "arg" "arg" ... with passwords redacted. A pure
// function; the dispatcher calls it on the io thread that runs the command.
#pragma once

#include <string>

#include "protocol/request.h"
#include "server_api/client_state.h"

namespace prefixd::commands {

// The line, CRLF included, for `args` as run by `client`.
std::string MonitorLine(const server::ClientState& client, const protocol::Request& args);

}  // namespace prefixd::commands
