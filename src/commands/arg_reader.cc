#include "commands/arg_reader.h"

#include <charconv>

#include "common/ascii.h"
#include "common/numbers.h"

namespace prefixd::commands {

bool ArgReader::Keyword(std::string_view keyword) {
  if (!more() || !EqualsIgnoreCase(Peek(), keyword)) return false;
  ++next_;
  return true;
}

std::optional<size_t> ArgReader::OneOf(std::initializer_list<std::string_view> keywords) {
  if (!more()) return std::nullopt;
  size_t index = 0;
  for (std::string_view k : keywords) {
    if (EqualsIgnoreCase(Peek(), k)) {
      ++next_;
      return index;
    }
    ++index;
  }
  return std::nullopt;
}

std::optional<int64_t> ArgReader::Integer(int64_t min, int64_t max, std::string_view error) {
  auto v = more() ? ParseInt64(Next()) : std::nullopt;
  if (!v || *v < min || *v > max) {
    Fail(error);
    return std::nullopt;
  }
  return v;
}

bool ArgReader::Fail(std::string_view error) {
  ctx_.reply.Error(error);
  return false;
}

std::optional<uint64_t> ParseCursor(std::string_view text) {
  bool negative = false;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return negative ? uint64_t{0} - value : value;
}

}  // namespace prefixd::commands
