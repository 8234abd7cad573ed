#include "engine/errors.h"

#include <string>
#include <string_view>

#include "common/ascii.h"

namespace prefixd::commands::errors {
namespace {

// Text as C's "%.*s" prints it: up to the first NUL.
std::string_view CString(std::string_view s) {
  auto nul = s.find('\0');
  return nul == std::string_view::npos ? s : s.substr(0, nul);
}

}  // namespace

std::string HelloSyntax(std::string_view option) {
  return "ERR Syntax error in HELLO option '" + std::string(option) + "'";
}
std::string UnrecognizedOption(std::string_view option) {
  return "ERR Unrecognized option '" + std::string(option) + "'";
}
std::string LibField(bool name) {
  return std::string("ERR ") + (name ? "lib-name" : "lib-ver") +
         " cannot contain spaces, newlines or special characters.";
}
std::string UnknownClientType(std::string_view type) {
  return "ERR Unknown client type '" + std::string(type) + "'";
}
std::string NoSuchUser(std::string_view user) {
  return "ERR No such user '" + std::string(user) + "'";
}
std::string ConfigSetUnknown(std::string_view name) {
  return "ERR Unknown option or number of arguments for CONFIG SET - '" + std::string(name) + "'";
}
std::string ConfigSetFailed(std::string_view name, std::string_view why) {
  return "ERR CONFIG SET failed (possibly related to argument '" + std::string(name) + "') - " +
         std::string(why);
}

std::string WrongArity(std::string_view full_name) {
  return "ERR wrong number of arguments for '" + std::string(full_name) + "' command";
}

std::string UnknownCommand(const protocol::Request& request) {
  std::string args;
  for (size_t i = 1; i < request.size() && args.size() < 128; ++i) {
    std::string_view arg = CString(request[i]).substr(0, 128 - args.size());
    args += '\'';
    args += arg;
    args += "' ";
  }
  std::string_view name = CString(request[0]).substr(0, 128);
  return "ERR unknown command '" + std::string(name) + "', with args beginning with: " + args;
}

std::string UnknownSubcommand(std::string_view subcommand, std::string_view command) {
  return "ERR unknown subcommand '" + std::string(CString(subcommand).substr(0, 128)) + "'. Try " +
         AsciiUpper(command) + " HELP.";
}

}  // namespace prefixd::commands::errors
