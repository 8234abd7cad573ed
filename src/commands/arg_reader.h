// ArgReader: how a handler reads its arguments, left to right: keywords matched in any case (an
// option's name only when its values follow), integers parsed strictly within a range, and on a
// bad argument Redis's error text queued on the reply (the texts live in errors.h), and the SCAN
// family's options. Made per handler call on the calling io thread.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string_view>

#include "engine/command.h"
#include "engine/errors.h"

namespace prefixd::commands {

class ArgReader {
 public:
  // Reads ctx.args from index `first` (1: just after the command name).
  ArgReader(Context& ctx, size_t first) : ctx_(ctx), next_(first) {}

  bool more() const { return next_ < ctx_.args.size(); }
  size_t remaining() const { return more() ? ctx_.args.size() - next_ : 0; }
  // The index in ctx.args of the next argument.
  size_t position() const { return next_; }
  std::string_view Peek() const { return ctx_.args[next_]; }
  // The next argument, consumed. Call only while more().
  std::string_view Next() { return ctx_.args[next_++]; }

  // Consumes the next argument when it is `keyword` in any case and at least `values` arguments
  // follow it (an option's values, as Redis's parsers check them before the option's name).
  bool Keyword(std::string_view keyword, size_t values = 0);
  // Consumes the next argument when it is one of `keywords` in any case and at least `values`
  // arguments follow it; returns its index in `keywords`.
  std::optional<size_t> OneOf(std::initializer_list<std::string_view> keywords, size_t values = 0);

  // Consumes the next argument as an integer within [min, max]; otherwise queues `error` and
  // returns nullopt.
  std::optional<int64_t> Integer(int64_t min = std::numeric_limits<int64_t>::min(),
                                 int64_t max = std::numeric_limits<int64_t>::max(),
                                 std::string_view error = errors::kNotInteger);

  // Queues `error` and returns false: for a handler's `return r.Fail(...)` paths.
  bool Fail(std::string_view error);

 private:
  Context& ctx_;
  size_t next_;
};

// The options of SCAN and of HSCAN/ZSCAN after the cursor.
struct ScanOptions {
  std::string_view pattern = "*";
  int64_t count = 10;
  std::optional<std::string_view> type_name;  // SCAN's TYPE
};

// Reads `COUNT n`, `MATCH pattern` and, when `with_type`, `TYPE name` from ctx.args[first] on,
// checked in Redis's order (every option takes a value, then its name, then COUNT >= 1); on a
// bad one queues Redis's error and returns nullopt.
std::optional<ScanOptions> ReadScanOptions(Context& ctx, size_t first, bool with_type);
// What HSCAN and ZSCAN answer for a missing key, before reading their options (as Redis does):
// cursor 0, nothing found.
void ReplyEmptyScan(Context& ctx);

}  // namespace prefixd::commands
