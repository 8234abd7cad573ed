// Command-line and config-file parsing: turns argv (and an optional redis.conf-style file given
// as the first argument) into Settings. Runs once on the main thread before the server starts.
#pragma once

#include <optional>
#include <string>

#include "app/config_text.h"
#include "common/settings.h"

namespace prefixd::app {

struct StartupOptions {
  std::string config_file;  // empty when none was given
};

// Applies the config file, then the flags, to `settings`. Returns an exit code when the process
// should stop now (--help, --version, or an error, which has been printed).
std::optional<int> ParseCommandLine(int argc, char** argv, Settings& settings,
                                    StartupOptions& startup);

}  // namespace prefixd::app
