#include "commands/arg_reader.h"

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

}  // namespace prefixd::commands
