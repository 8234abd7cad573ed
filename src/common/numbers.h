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

// Bytes in Redis's human form ("1.50M").
std::string HumanBytes(uint64_t bytes);

}  // namespace prefixd
