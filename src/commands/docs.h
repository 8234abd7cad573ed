// Renders docs/commands.md from the command table, so the reference can never drift from what
// the server dispatches. Pure function of the registry.
#pragma once

#include <string>

#include "commands/registry.h"

namespace prefixd::commands {

std::string CommandsMarkdown(const Registry& registry);

}  // namespace prefixd::commands
