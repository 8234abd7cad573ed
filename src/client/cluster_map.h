// What ClusterClient reads from the servers: node addresses, redirect errors (MOVED, ASK,
// TRYAGAIN, CLUSTERDOWN) and the CLUSTER SLOTS reply, parsed into plain values. Anything the
// server could send is either accepted or refused with a reason, never trusted. Pure functions;
// any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "prefixd/client.h"
#include "prefixd/status.h"

namespace prefixd::client_internal {

struct ClusterAddress {
  std::string host;  // may be empty: the endpoint is the address the answer came from
  int port = 0;
  friend bool operator==(const ClusterAddress&, const ClusterAddress&) = default;
};

// "host:port" or "[v6 address]:port", port 1..65535; the host may be empty (":port").
std::optional<ClusterAddress> ParseClusterAddress(std::string_view text);
// host:port, brackets around an IPv6 host.
std::string FormatClusterAddress(const ClusterAddress& address);

enum class RedirectKind : uint8_t { kNone, kMoved, kAsk, kTryAgain, kClusterDown };

struct Redirect {
  RedirectKind kind = RedirectKind::kNone;
  uint16_t slot = 0;  // MOVED, ASK
  ClusterAddress to;  // MOVED, ASK
};

// The redirect a server error reply asks for; kNone for any other status, and for a MOVED/ASK
// whose slot or address does not parse.
Redirect ParseRedirect(const Status& status);

// One range of CLUSTER SLOTS: slots first..last (inclusive) and their master.
struct SlotRange {
  uint16_t first = 0;
  uint16_t last = 0;
  ClusterAddress owner;  // host empty when the server gave "" or "?"
};

// CLUSTER SLOTS's reply, [[start, end, [host, port, ...], replicas...], ...], checked: slots in
// 0..16383, start <= end, port 1..65535, no slot in two ranges. kProtocolError says what is wrong.
Result<std::vector<SlotRange>> ParseClusterSlots(const Reply& reply);

}  // namespace prefixd::client_internal
