// prefixd-commands-doc: prints docs/commands.md, rendered from the command table, or with
// --conf the default config file (etc/prefixd.conf) rendered from the settings table.
#include <iostream>
#include <string_view>

#include "commands/docs.h"
#include "commands/families.h"
#include "engine/engine.h"
#include "engine/registry.h"

int main(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--conf") {
    std::cout << prefixd::commands::DefaultConfig();
    return 0;
  }
  prefixd::Settings settings;
  prefixd::commands::Engine engine(settings);
  prefixd::commands::Registry registry(engine, prefixd::commands::AddCommands);
  std::cout << prefixd::commands::CommandsMarkdown(registry);
  return 0;
}
