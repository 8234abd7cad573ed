// The config-file parser: redis.conf-style "directive value" lines applied to Settings. Kept
// apart from the command-line parsing so it can be fuzzed alone. Runs once on the main thread.
#pragma once

#include <string>

#include "common/settings.h"

namespace prefixd::app {

// Applies "directive value" lines; returns an error naming the line, or empty.
std::string ApplyConfigText(const std::string& text, const std::string& origin, Settings& settings);

}  // namespace prefixd::app
