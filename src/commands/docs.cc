#include "commands/docs.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "common/ascii.h"
#include "common/settings.h"

namespace prefixd::commands {
namespace {

std::string Arity(int arity) {
  return arity >= 0 ? std::to_string(arity) : "at least " + std::to_string(-arity);
}

std::string Flags(uint32_t flags) {
  std::string out;
  for (auto f : FlagNames(flags)) {
    if (!out.empty()) out += ", ";
    out += f;
  }
  return out.empty() ? "-" : out;
}

// The key positions as COMMAND INFO's (first, last, step) triple says them.
std::string Keys(const CommandSpec& spec) {
  if (spec.first_key == 0) return "-";
  std::string out = std::to_string(spec.first_key);
  if (spec.last_key != spec.first_key) out += ".." + std::to_string(spec.last_key);
  if (spec.key_step > 1) out += " step " + std::to_string(spec.key_step);
  return out;
}

std::string Categories(const CommandSpec& spec) {
  std::string out;
  uint32_t acl = EffectiveAclCategories(spec);
  for (size_t bit = 0; bit < AclCategoryNames().size(); ++bit) {
    if (!(acl & (1u << bit))) continue;
    if (!out.empty()) out += " ";
    out += "@" + std::string(AclCategoryNames()[bit]);
  }
  return out;
}

void Row(std::string& out, const CommandSpec& spec, const std::string& display) {
  std::string usage = display + (spec.syntax.empty() ? "" : " " + spec.syntax);
  // Pipes would split the markdown table cell.
  std::string escaped;
  for (char c : usage) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
  out += "| `" + escaped + "` | " + Arity(spec.arity) + " | " + Keys(spec) + " | " +
         Flags(spec.flags) + " | " + Categories(spec) + " | " + spec.summary + " |\n";
}

}  // namespace

std::string CommandsMarkdown(const Registry& registry) {
  std::map<std::string, std::vector<const CommandSpec*>> groups;
  for (const CommandSpec* spec : registry.All()) groups[spec->group].push_back(spec);
  std::string out =
      "# Commands\n\n"
      "Generated from the server's command table by `prefixd-commands-doc`; a test fails when "
      "this file is out of date. Arity counts the command name, as Redis's COMMAND does; keys are "
      "the argument positions of the keys (first..last), flags and ACL categories are what "
      "`COMMAND INFO` reports, in Redis's order.\n";
  static const std::map<std::string, std::string> kTitles = {
      {"connection", "Connection"},
      {"server", "Server"},
      {"ssm", "SSM.PREFIX: recurrent state"},
      {"vstore", "V-store: attention-layer rows"},
      {"kvprefix", "KV.PREFIX: attention-layer prefixes"},
      {"prefixindex", "Prefix index: blocks, checkpoints, the match (docs/prefix-index.md)"},
      {"shm", "SHM: same-host transport (docs/shm-transport.md)"},
      {"transactions", "Transactions"}};
  for (const auto& [group, specs] : groups) {
    auto title = kTitles.count(group) ? kTitles.at(group) : group;
    out += "\n## " + title +
           "\n\n| command | arity | keys | flags | ACL categories | summary "
           "|\n|---|---|---|---|---|---|\n";
    for (const CommandSpec* spec : specs) {
      if (spec->handler != nullptr || spec->subcommands.empty())
        Row(out, *spec, AsciiUpper(spec->name));
      for (const CommandSpec& sub : spec->subcommands) {
        Row(out, sub, AsciiUpper(spec->name) + " " + AsciiUpper(sub.name));
      }
    }
  }
  out +=
      "\n## Settings\n\nFlags (`--name value`), config-file directives and `CONFIG GET/SET` "
      "names.\n\n| setting | default | CONFIG SET | meaning |\n|---|---|---|---|\n";
  for (size_t k = 0; k < Settings::Specs().size(); ++k) {
    const SettingSpec& spec = Settings::Specs()[k];
    const std::string_view alias = Settings::Alias(static_cast<Setting>(k));
    std::string def = spec.default_value.empty() ? "\"\"" : std::string(spec.default_value);
    std::string help(spec.help);
    if (!spec.choices.empty()) help += " (" + std::string(spec.choices) + ")";
    if (!alias.empty()) help += "; also named `" + std::string(alias) + "`";
    out += "| `" + std::string(spec.name) + "` | `" + def + "` | " +
           (spec.runtime_mutable ? "yes" : "no") + " | " + help + " |\n";
  }
  return out;
}

std::string DefaultConfig() {
  std::string out =
      "# prefixd configuration file: every directive, set to its default.\n"
      "#\n"
      "# Start with: prefixd-server /etc/prefixd/prefixd.conf [--directive value ...]\n"
      "# Flags on the command line override this file. Lines are 'directive value'; quote a\n"
      "# value that contains spaces. Memory sizes take Redis's units (1k = 1000, 1kb = 1024,\n"
      "# mb, gb). Directives marked 'runtime' can also be changed with CONFIG SET.\n"
      "# Generated from the settings table by `prefixd-commands-doc --conf`; a test fails when\n"
      "# this file is out of date. docs/operations.md explains deployment.\n";
  for (const SettingSpec& spec : Settings::Specs()) {
    out += "\n# " + std::string(spec.help) + ".\n";
    if (!spec.choices.empty()) out += "# One of: " + std::string(spec.choices) + ".\n";
    if (spec.type == SettingType::kBool) out += "# One of: yes|no.\n";
    if (spec.type == SettingType::kInteger || spec.type == SettingType::kMemory) {
      out += "# Range: " + std::to_string(spec.min) + " to " + std::to_string(spec.max) + ".\n";
    }
    out += std::string(spec.runtime_mutable ? "# runtime: CONFIG SET can change it.\n"
                                            : "# Read at start only.\n");
    std::string value(spec.default_value);
    if (value.empty() || value.find(' ') != std::string::npos) value = "\"" + value + "\"";
    out += std::string(spec.name) + " " + value + "\n";
  }
  return out;
}

}  // namespace prefixd::commands
