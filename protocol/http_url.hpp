// http[s]:// URLs as troupe's clients reach them (model servers, MCP servers): split, checked, and
// what is wrong said in words.
#pragma once

#include <string>
#include <string_view>

namespace troupe::protocol {

enum class url_problem { none, scheme, ipv6, host_port };

// What is wrong, in words: "expected http://host[:port]/path or https://...", ...
const char* describe(url_problem problem);

struct http_url {
  bool tls = false;
  std::string host;        // without IPv6 brackets
  std::string port;        // as written, else 443 or 80
  std::string host_header; // the authority as written (empty when there is a problem)
  std::string target;      // what follows the authority, as written (empty when there is a problem)
  url_problem problem = url_problem::none;
};

// Splits http[s]://authority<target>; the authority ends at the first of `authority_ends`.
http_url parse_http_url(std::string_view url, std::string_view authority_ends);

} // namespace troupe::protocol
