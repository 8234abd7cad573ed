// Open-files limit: raises the soft RLIMIT_NOFILE to the hard limit at start and keeps maxclients
// within what that limit can serve, as Redis does (with the same log lines). Main thread at start;
// the CONFIG SET hook runs on the io thread that serves the command.
#pragma once

#include <cstdint>
#include <string>

#include "common/settings.h"

namespace prefixd::app {

// Descriptors kept free for everything but clients (log segments, snapshots, listeners), on top
// of those already open when the limit is checked: Redis's CONFIG_MIN_RESERVED_FDS.
inline constexpr uint64_t kReservedFds = 32;

// Raises the soft limit to the hard one, then lowers maxclients (logged) if the limit cannot hold
// it. Returns false, logged, when not even one client would fit.
bool AdjustOpenFilesLimit(Settings& settings);

// For CONFIG SET maxclients: empty when the limit holds the new value (raising the soft limit
// if it must), else Redis's error naming the most it can.
std::string CheckMaxClients(const Settings& settings);

}  // namespace prefixd::app
