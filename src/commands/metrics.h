// The Prometheus text exposition (format 0.0.4) of the server's figures: what /metrics serves.
// Built on demand from the same counters INFO reads; safe on any thread.
#pragma once

#include <string>

namespace prefixd::commands {

class Engine;

// Every metric family, with HELP and TYPE lines.
std::string PrometheusText(Engine& engine);

}  // namespace prefixd::commands
