#include "commands/arg_reader.h"

#include "common/ascii.h"
#include "common/numbers.h"

namespace prefixd::commands {

bool ArgReader::Keyword(std::string_view keyword, size_t values) {
  if (remaining() <= values || !EqualsIgnoreCase(Peek(), keyword)) return false;
  ++next_;
  return true;
}

std::optional<size_t> ArgReader::OneOf(std::initializer_list<std::string_view> keywords,
                                       size_t values) {
  if (remaining() <= values) return std::nullopt;
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

std::optional<ScanOptions> ReadScanOptions(Context& ctx, size_t first, bool with_type) {
  ScanOptions out;
  ArgReader r(ctx, first);
  while (r.more()) {
    // Every option takes a value (Redis checks the pairing before the option's name).
    if (r.remaining() < 2) return r.Fail(errors::kSyntax), std::nullopt;
    auto option = with_type ? r.OneOf({"COUNT", "MATCH", "TYPE"}) : r.OneOf({"COUNT", "MATCH"});
    if (!option) return r.Fail(errors::kSyntax), std::nullopt;
    if (*option == 0) {
      auto n = r.Integer();
      if (!n) return std::nullopt;
      if (*n < 1) return r.Fail(errors::kSyntax), std::nullopt;
      out.count = *n;
    } else if (*option == 1) {
      out.pattern = r.Next();
    } else {
      out.type_name = r.Next();
    }
  }
  return out;
}

void ReplyEmptyScan(Context& ctx) {
  ctx.reply.ArrayLen(2);
  ctx.reply.Bulk("0");
  ctx.reply.ArrayLen(0);
}

}  // namespace prefixd::commands
