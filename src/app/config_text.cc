#include "app/config_text.h"

#include <fmt/format.h>

#include <sstream>
#include <string_view>

namespace prefixd::app {
namespace {

std::string Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

std::string Unquote(std::string v) {
  if (v.size() >= 2 &&
      ((v.front() == '"' && v.back() == '"') || (v.front() == '\'' && v.back() == '\''))) {
    return v.substr(1, v.size() - 2);
  }
  return v;
}

}  // namespace

std::string ApplyConfigText(const std::string& text, const std::string& origin,
                            Settings& settings) {
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::string trimmed = Trim(line);
    if (trimmed.empty() || trimmed[0] == '#') continue;
    size_t space = trimmed.find_first_of(" \t");
    std::string directive = trimmed.substr(0, space);
    std::string value =
        space == std::string::npos ? std::string() : Unquote(Trim(trimmed.substr(space)));
    if (!Settings::Find(directive)) {
      return fmt::format("{}:{}: unknown directive '{}' (did you mean '{}'?)", origin, number,
                         directive, Settings::Nearest(directive));
    }
    std::string err = settings.Set(directive, value, /*at_startup=*/true);
    if (!err.empty()) return fmt::format("{}:{}: '{}': {}", origin, number, directive, err);
  }
  return {};
}

}  // namespace prefixd::app
