#include "app/options.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <sstream>

#include "engine/engine.h"

namespace prefixd::app {

std::optional<int> ParseCommandLine(int argc, char** argv, Settings& settings,
                                    StartupOptions& startup) {
  // Catch misspelt flags first so the message can name the nearest valid one.
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (!arg.starts_with("--") || arg == "--help" || arg == "--version") continue;
    std::string_view name = arg.substr(
        2, arg.find('=') == std::string_view::npos ? std::string_view::npos : arg.find('=') - 2);
    if (!Settings::Find(name)) {
      std::cerr << fmt::format("prefixd-server: unknown option '--{}' (did you mean '--{}'?)\n",
                               name, Settings::Nearest(name));
      return 1;
    }
  }

  CLI::App cli{
      "prefixd: LLM prefix state (recurrent SSM state and attention K/V) behind the "
      "Redis protocol"};
  cli.set_version_flag("--version", std::string(commands::kPrefixdVersion));
  std::string config_file;
  cli.add_option("config", config_file,
                 "Optional config file of 'directive value' lines (redis.conf style); flags "
                 "given on the command line override it")
      ->check(CLI::ExistingFile);
  std::vector<std::string> values(Settings::Specs().size());
  std::vector<CLI::Option*> options;
  for (size_t i = 0; i < Settings::Specs().size(); ++i) {
    const SettingSpec& spec = Settings::Specs()[i];
    std::string description = std::string(spec.help);
    if (!spec.choices.empty()) description += " (" + std::string(spec.choices) + ")";
    if (spec.runtime_mutable) description += "; CONFIG SET can change it";
    // Redis 7.0's older name of a setting is a flag too (--hash-max-ziplist-entries).
    const std::string_view alias = Settings::Alias(static_cast<Setting>(i));
    auto* opt = cli.add_option(
        "--" + std::string(spec.name) + (alias.empty() ? "" : ",--" + std::string(alias)),
        values[i], description);
    opt->default_str(std::string(spec.default_value));
    opt->type_name(spec.type == SettingType::kMemory    ? "BYTES"
                   : spec.type == SettingType::kInteger ? "INT"
                                                        : "TEXT");
    options.push_back(opt);
  }
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e);
  }

  if (!config_file.empty()) {
    std::ifstream in(config_file);
    std::stringstream text;
    text << in.rdbuf();
    std::string err = ApplyConfigText(text.str(), config_file, settings);
    if (!err.empty()) {
      std::cerr << "prefixd-server: " << err << "\n";
      return 1;
    }
    startup.config_file = config_file;
  }
  for (size_t i = 0; i < options.size(); ++i) {
    if (options[i]->count() == 0) continue;
    std::string err = settings.Set(static_cast<Setting>(i), values[i], /*at_startup=*/true);
    if (!err.empty()) {
      std::cerr << fmt::format("prefixd-server: --{} {}: {}\n", Settings::Specs()[i].name,
                               values[i], err);
      return 1;
    }
  }
  return std::nullopt;
}

}  // namespace prefixd::app
