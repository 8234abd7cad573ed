// libFuzzer target for the two configuration texts a server reads at start: the config file
// (src/app/config_text.h) — any text is applied or refused with a message naming its line, and
// what it accepted reads back — and the cluster's nodes.conf (src/cluster/topology.h) — any text
// is parsed or refused with its line named, and what it accepted is written and read back to the
// same topology.
#include <cstddef>
#include <cstdint>
#include <string>

#include "app/config_text.h"
#include "cluster/topology.h"
#include "common/settings.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace prefixd;
  Settings settings;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string err = app::ApplyConfigText(text, "fuzz.conf", settings);
  if (!err.empty() && err.rfind("fuzz.conf:", 0) != 0) __builtin_trap();
  for (size_t i = 0; i < Settings::Specs().size(); ++i) (void)settings.Get(static_cast<Setting>(i));

  const cluster::ParsedTopology topology = cluster::ParseNodesConf(text);
  if (!topology.error.empty()) {
    if (topology.error.rfind("nodes.conf line ", 0) != 0) __builtin_trap();
    return 0;
  }
  const std::string written = cluster::FormatNodes(topology.topology, true);
  const cluster::ParsedTopology again = cluster::ParseNodesConf(written);
  if (!again.error.empty() || cluster::FormatNodes(again.topology, true) != written) {
    __builtin_trap();
  }
  return 0;
}
