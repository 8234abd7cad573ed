// Renders docs/commands.md from the command table, so the reference can never drift from what
// the server dispatches. Pure function of the registry.
#pragma once

#include <string>

#include "engine/registry.h"

namespace prefixd::commands {

std::string CommandsMarkdown(const Registry& registry);
// Renders etc/prefixd.conf: every setting with its help, choices and default, as redis.conf.
std::string DefaultConfig();

}  // namespace prefixd::commands
