// prefixd-commands-doc: prints docs/commands.md, rendered from the command table.
#include <iostream>

#include "commands/docs.h"
#include "commands/engine.h"
#include "commands/registry.h"

int main() {
  prefixd::Settings settings;
  prefixd::commands::Engine engine(settings);
  prefixd::commands::Registry registry(engine);
  std::cout << prefixd::commands::CommandsMarkdown(registry);
  return 0;
}
