// What the edge checks of every request from its head alone, before it reads a body: that the Host
// is one troupe serves (a DNS-rebinding page names its own), that an unsafe request from a browser
// comes from troupe's own origin or a trusted one (CO-10), and that a body is JSON. Pure: the edge
// renders a refusal in the path's dialect.
#pragma once

#include "protocol/errors.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::protocol {

struct edge_policy {
  std::string listener_host;                // service.host
  std::vector<std::string> allowed_hosts;   // service.allowed_hosts: further names the Host may carry
  std::vector<std::string> trusted_origins; // service.trusted_origins: `scheme://host[:port]`, CO-10
};

struct edge_refusal {
  errc code;
  std::string message;
};

// `headers` has lower-case names. `has_body`: the request announces a body (Content-Length > 0 or
// chunked). A WebSocket upgrade that fails only the origin check is not refused here: WS-44 completes
// every upgrade, so `cross_origin` tells the route to close it with 4403.
struct edge_verdict {
  std::optional<edge_refusal> refusal;
  bool cross_origin = false;
};
edge_verdict check_request_head(const edge_policy& policy, std::string_view method,
                                const std::map<std::string, std::string>& headers, bool has_body, bool upgrade);

// True when `value` may be written as a header value: no CR, LF or NUL.
bool is_header_value(std::string_view value);

} // namespace troupe::protocol
