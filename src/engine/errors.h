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

// Redis 7.0.15's reply to a client refused by protected mode, word for word (its typo included).
inline constexpr std::string_view kProtectedMode =
    "DENIED Redis is running in protected mode because protected mode is enabled and "
    "no password is set for the default user. In this mode connections are only "
    "accepted from the loopback interface. If you want to connect from external "
    "computers to Redis you may adopt one of the following solutions: 1) Just "
    "disable protected mode sending the command 'CONFIG SET protected-mode no' from "
    "the loopback interface by connecting to Redis from the same host the server is "
    "running, however MAKE SURE Redis is not publicly accessible from internet if "
    "you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively "
    "you can just disable the protected mode by editing the Redis configuration "
    "file, and setting the protected mode option to 'no', and then restarting the "
    "server. 3) If you started the server manually just for testing, restart it with "
    "the '--protected-mode no' option. 4) Setup a an authentication password for the "
    "default user. NOTE: You only need to do one of the above things in order for "
    "the server to start accepting connections from the outside.";
// CONFIG SET and DEBUG refused by enable-protected-configs / enable-debug-command.
inline constexpr std::string_view kDebugNotAllowed =
    "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you "
    "can run it from a local connection, otherwise you need to set this option in the "
    "configuration file, and then restart the server.";
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
// Key commands.
inline constexpr std::string_view kWrongType =
    "WRONGTYPE Operation against a key holding the wrong kind of value";
inline constexpr std::string_view kInvalidCursor = "ERR invalid cursor";
inline constexpr std::string_view kNotFloat = "ERR value is not a valid float";
inline constexpr std::string_view kLfuNotSelected =
    "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note "
    "that when switching between policies at runtime LRU and LFU data will take some time to "
    "adjust.";
inline constexpr std::string_view kLfuSelected =
    "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when "
    "switching between policies at runtime LRU and LFU data will take some time to adjust.";
// Cluster mode (Redis's cluster.c).
inline constexpr std::string_view kClusterDisabled =
    "ERR This instance has cluster support disabled";
inline constexpr std::string_view kCrossSlot =
    "CROSSSLOT Keys in request don't hash to the same slot";
inline constexpr std::string_view kTryAgain =
    "TRYAGAIN Multiple keys request during rehashing of slot";
inline constexpr std::string_view kClusterDown = "CLUSTERDOWN The cluster is down";
inline constexpr std::string_view kSlotNotServed = "CLUSTERDOWN Hash slot not served";
inline constexpr std::string_view kSelectInCluster = "ERR SELECT is not allowed in cluster mode";
inline constexpr std::string_view kInvalidSlot = "ERR Invalid or out of range slot";
inline constexpr std::string_view kInvalidSetslot =
    "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP";

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
