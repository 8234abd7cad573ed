// Strict integer parsing with Redis's string2ll rules (no '+', no leading zeros, no "-0",
// no overflow), shared by the wire parser and command argument readers. Pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace prefixd {

std::optional<int64_t> ParseInt64(std::string_view text);

// Redis-style "%.17g" rendering used for RESP doubles and INFO fields.
std::string FormatDouble(double value);

// Redis's string2ld: the whole text is a long double (strtold), no leading space, no NaN, no
// overflow or underflow to zero (INCRBYFLOAT, HINCRBYFLOAT).
std::optional<long double> ParseLongDouble(std::string_view text);
// Redis's ld2string in LD_STR_HUMAN mode: %.17Lf without trailing zeros, "-0" as "0".
std::string HumanLongDouble(long double value);

// A SCAN cursor as Redis's parseScanCursorOrReply reads it (SCAN, HSCAN, ZSCAN): an optional sign
// ("-1" wraps to 2^64 - 1), decimal digits, nothing after them, no overflow.
std::optional<uint64_t> ParseScanCursor(std::string_view text);

// Bytes in Redis's human form ("1.50M").
std::string HumanBytes(uint64_t bytes);

}  // namespace prefixd
