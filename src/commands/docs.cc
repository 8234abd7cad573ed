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

void Row(std::string& out, const CommandSpec& spec, const std::string& display) {
  std::string usage = display + (spec.syntax.empty() ? "" : " " + spec.syntax);
  // Pipes would split the markdown table cell.
  std::string escaped;
  for (char c : usage) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
  out += "| `" + escaped + "` | " + Arity(spec.arity) + " | " + Flags(spec.flags) + " | " +
         spec.summary + " |\n";
}

}  // namespace

std::string CommandsMarkdown(const Registry& registry) {
  std::map<std::string, std::vector<const CommandSpec*>> groups;
  for (const CommandSpec* spec : registry.All()) groups[spec->group].push_back(spec);
  std::string out =
      "# Commands\n\n"
      "Generated from the server's command table by `prefixd-commands-doc`; a test fails when "
      "this file is out of date. Arity counts the command name, as Redis's COMMAND does.\n";
  static const std::map<std::string, std::string> kTitles = {
      {"connection", "Connection"},
      {"server", "Server"},
      {"ssm", "SSM.PREFIX: recurrent state"},
      {"vstore", "V-store: attention-layer rows"},
      {"kvprefix", "KV.PREFIX: attention-layer prefixes"},
      {"prefixindex", "Prefix index: blocks, checkpoints, the match (docs/prefix-index.md)"}};
  for (const auto& [group, specs] : groups) {
    auto title = kTitles.count(group) ? kTitles.at(group) : group;
    out += "\n## " + title + "\n\n| command | arity | flags | summary |\n|---|---|---|---|\n";
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
  for (const SettingSpec& spec : Settings::Specs()) {
    std::string def = spec.default_value.empty() ? "\"\"" : std::string(spec.default_value);
    std::string help(spec.help);
    if (!spec.choices.empty()) help += " (" + std::string(spec.choices) + ")";
    out += "| `" + std::string(spec.name) + "` | `" + def + "` | " +
           (spec.runtime_mutable ? "yes" : "no") + " | " + help + " |\n";
  }
  return out;
}

}  // namespace prefixd::commands
