#include "engine/monitor.h"

#include <cctype>
#include <chrono>
#include <cstdio>

#include "common/ascii.h"

namespace prefixd::commands {
namespace {

// An argument as Redis's sdscatrepr quotes it.
void AppendQuoted(std::string& out, std::string_view arg) {
  out += '"';
  for (unsigned char c : arg) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\a':
        out += "\\a";
        break;
      case '\b':
        out += "\\b";
        break;
      default:
        if (std::isprint(c)) {
          out += static_cast<char>(c);
        } else {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\x%02x", c);
          out += hex;
        }
    }
  }
  out += '"';
}

// Passwords never reach a monitor: AUTH's arguments, HELLO's AUTH pair and MIGRATE's AUTH
// password and AUTH2 pair read "(redacted)".
bool Redacted(const protocol::Request& args, size_t i) {
  if (EqualsIgnoreCase(args[0], "auth")) return i >= 1;
  if (EqualsIgnoreCase(args[0], "migrate")) {
    for (size_t k = 6; k < i && !EqualsIgnoreCase(args[k], "KEYS"); ++k) {
      if (EqualsIgnoreCase(args[k], "AUTH")) {
        if (i == k + 1) return true;
        k += 1;
      } else if (EqualsIgnoreCase(args[k], "AUTH2")) {
        if (i <= k + 2) return true;
        k += 2;
      }
    }
  }
  if (EqualsIgnoreCase(args[0], "hello")) {
    for (size_t k = 2; k < i; ++k) {
      if (EqualsIgnoreCase(args[k], "AUTH") && i <= k + 2) return true;
    }
  }
  return false;
}

}  // namespace

std::string MonitorLine(const server::ClientState& client, const protocol::Request& args) {
  using namespace std::chrono;
  auto us = duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
  char head[64];
  std::snprintf(head, sizeof head, "+%lld.%06lld [0 ", static_cast<long long>(us / 1000000),
                static_cast<long long>(us % 1000000));
  std::string out = head;
  if (client.unix_socket) {
    std::string_view path = client.addr;  // "<path>:0"
    if (path.ends_with(":0")) path.remove_suffix(2);
    out += "unix:" + std::string(path);
  } else {
    out += client.addr;
  }
  out += "]";
  for (size_t i = 0; i < args.size(); ++i) {
    out += ' ';
    if (Redacted(args, i)) {
      out += "\"(redacted)\"";
    } else {
      AppendQuoted(out, args[i]);
    }
  }
  out += "\r\n";
  return out;
}

}  // namespace prefixd::commands
