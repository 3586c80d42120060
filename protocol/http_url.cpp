#include "protocol/http_url.hpp"

#include <algorithm>
#include <string>

namespace troupe::protocol {

const char* describe(url_problem problem) {
  switch (problem) {
  case url_problem::none:
    return "";
  case url_problem::scheme:
    return "expected http://host[:port]/path or https://...";
  case url_problem::ipv6:
    return "unterminated IPv6 address";
  case url_problem::host_port:
    return "expected a host and an optional port 1..65535";
  }
  return "";
}

http_url parse_http_url(std::string_view url, std::string_view authority_ends) {
  http_url out;
  std::string_view rest = url;
  if (rest.substr(0, 8) == "https://") {
    out.tls = true;
    rest.remove_prefix(8);
  } else if (rest.substr(0, 7) == "http://") {
    rest.remove_prefix(7);
  } else {
    out.problem = url_problem::scheme;
    return out;
  }
  auto end = rest.find_first_of(authority_ends);
  std::string_view authority = rest.substr(0, end);
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos) {
      out.problem = url_problem::ipv6;
      return out;
    }
    out.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size() && authority[close + 1] == ':')
      port = authority.substr(close + 2);
  } else {
    auto colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos)
      port = authority.substr(colon + 1);
  }
  bool port_ok = port.empty() ||
    (port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
     std::stoi(std::string(port)) >= 1 && std::stoi(std::string(port)) <= 65535);
  if (out.host.empty() || !port_ok) {
    out.problem = url_problem::host_port;
    return out;
  }
  out.port = port.empty() ? (out.tls ? "443" : "80") : std::string(port);
  out.host_header = std::string(authority);
  out.target = end == std::string_view::npos ? "" : std::string(rest.substr(end));
  return out;
}

} // namespace troupe::protocol
