// The error replies shared by command families, worded exactly as Redis 7 words them where Redis
// has the same case. Pure functions and constants.
#pragma once

#include <string>
#include <string_view>

#include "protocol/request.h"

namespace prefixd::commands::errors {

inline constexpr std::string_view kSyntax = "ERR syntax error";
inline constexpr std::string_view kNotInteger = "ERR value is not an integer or out of range";
inline constexpr std::string_view kNoAuth = "NOAUTH Authentication required.";
inline constexpr std::string_view kWrongPass =
    "WRONGPASS invalid username-password pair or user is disabled.";
inline constexpr std::string_view kInvalidCommandSpecified = "ERR Invalid command specified";
inline constexpr std::string_view kNoKeyArguments = "ERR The command has no key arguments";
inline constexpr std::string_view kInvalidArgumentCount =
    "ERR Invalid number of arguments specified for command";
inline constexpr std::string_view kInvalidArguments = "ERR Invalid arguments specified for command";
inline constexpr std::string_view kOom = "OOM command not allowed when used memory > 'maxmemory'.";

std::string WrongArity(std::string_view full_name);
std::string UnknownCommand(const protocol::Request& request);
std::string UnknownSubcommand(std::string_view subcommand, std::string_view command);

}  // namespace prefixd::commands::errors
