// Every error reply of the connection and server commands and those shared by command families,
// worded exactly as Redis 7 words them where Redis has the same case. Pure functions and
// constants.
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

// Connection and server commands.
inline constexpr std::string_view kProtocolVersionNotInteger =
    "ERR Protocol version is not an integer or out of range";
inline constexpr std::string_view kNoProto = "NOPROTO unsupported protocol version";
inline constexpr std::string_view kDbIndexOutOfRange = "ERR DB index is out of range";
inline constexpr std::string_view kDbIndexNotInt32 =
    "ERR value is out of range, value must between -2147483648 and 2147483647";
inline constexpr std::string_view kClientName =
    "ERR Client names cannot contain spaces, newlines or special characters.";
inline constexpr std::string_view kInvalidClientId = "ERR Invalid client ID";
inline constexpr std::string_view kNoSuchClient = "ERR No such client";
inline constexpr std::string_view kClientIdNotPositive = "ERR client-id should be greater than 0";
inline constexpr std::string_view kNoShutdownInProgress = "ERR No shutdown in progress.";
inline constexpr std::string_view kBgsaveInProgress = "ERR Background save already in progress";
std::string HelloSyntax(std::string_view option);
std::string UnrecognizedOption(std::string_view option);
std::string LibField(bool name);  // CLIENT SETINFO's text for a bad lib-name / lib-ver
std::string UnknownClientType(std::string_view type);
std::string NoSuchUser(std::string_view user);
std::string ConfigSetUnknown(std::string_view name);
std::string ConfigSetFailed(std::string_view name, std::string_view why);

std::string WrongArity(std::string_view full_name);
std::string UnknownCommand(const protocol::Request& request);
std::string UnknownSubcommand(std::string_view subcommand, std::string_view command);

}  // namespace prefixd::commands::errors
