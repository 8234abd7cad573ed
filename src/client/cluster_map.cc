// Parsing of what ClusterClient reads from the servers (cluster_map.h).
#include "cluster_map.h"

#include <bitset>

#include "common/key_slot.h"
#include "reply_reader.h"

namespace prefixd::client_internal {

std::optional<ClusterAddress> ParseClusterAddress(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::optional<int64_t> port = ParseInteger(text.substr(colon + 1));
  if (!port || *port <= 0 || *port > 65535) return std::nullopt;
  return ClusterAddress{std::string(host), static_cast<int>(*port)};
}

std::string FormatClusterAddress(const ClusterAddress& address) {
  const bool v6 = address.host.find(':') != std::string::npos;
  return (v6 ? "[" + address.host + "]" : address.host) + ":" + std::to_string(address.port);
}

Redirect ParseRedirect(const Status& status) {
  if (status.code() != StatusCode::kServerError) return {};
  const std::string_view text = status.message();
  if (text.starts_with("TRYAGAIN")) return {.kind = RedirectKind::kTryAgain, .slot = 0, .to = {}};
  if (text.starts_with("CLUSTERDOWN")) {
    return {.kind = RedirectKind::kClusterDown, .slot = 0, .to = {}};
  }
  RedirectKind kind;
  std::string_view rest;
  if (text.starts_with("MOVED ")) {
    kind = RedirectKind::kMoved;
    rest = text.substr(6);
  } else if (text.starts_with("ASK ")) {
    kind = RedirectKind::kAsk;
    rest = text.substr(4);
  } else {
    return {};
  }
  const size_t space = rest.find(' ');
  if (space == std::string_view::npos) return {};
  const std::optional<int64_t> slot = ParseInteger(rest.substr(0, space));
  std::optional<ClusterAddress> to = ParseClusterAddress(rest.substr(space + 1));
  if (!slot || *slot < 0 || *slot >= kClusterSlots || !to) return {};
  return {.kind = kind, .slot = static_cast<uint16_t>(*slot), .to = std::move(*to)};
}

Result<std::vector<SlotRange>> ParseClusterSlots(const Reply& reply) {
  if (reply.type != Reply::Type::kArray) return Status::ProtocolError("not an array");
  std::vector<SlotRange> ranges;
  std::bitset<kClusterSlots> seen;
  for (const Reply& range : reply.elements) {
    const std::vector<Reply>& e = range.elements;
    if (range.type != Reply::Type::kArray || e.size() < 3 || e[0].type != Reply::Type::kInteger ||
        e[1].type != Reply::Type::kInteger || e[2].type != Reply::Type::kArray ||
        e[2].elements.size() < 2 || e[2].elements[0].type != Reply::Type::kString ||
        e[2].elements[1].type != Reply::Type::kInteger) {
      return Status::ProtocolError("a range is not [start, end, [host, port, ...], ...]");
    }
    const int64_t start = e[0].integer, end = e[1].integer, port = e[2].elements[1].integer;
    const std::string what = "range " + std::to_string(start) + "-" + std::to_string(end);
    if (start < 0 || start > end || end >= kClusterSlots) {
      return Status::ProtocolError(what + " is not within 0-16383");
    }
    if (port <= 0 || port > 65535) {
      return Status::ProtocolError(what + " names port " + std::to_string(port));
    }
    for (int64_t s = start; s <= end; ++s) {
      if (seen.test(static_cast<size_t>(s))) {
        return Status::ProtocolError(what + " repeats slot " + std::to_string(s));
      }
      seen.set(static_cast<size_t>(s));
    }
    std::string host = e[2].elements[0].str;
    if (host == "?") host.clear();
    ranges.push_back({.first = static_cast<uint16_t>(start),
                      .last = static_cast<uint16_t>(end),
                      .owner = {std::move(host), static_cast<int>(port)}});
  }
  return ranges;
}

}  // namespace prefixd::client_internal
