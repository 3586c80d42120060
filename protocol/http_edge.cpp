#include "protocol/http_edge.hpp"

#include "protocol/auth.hpp"

#include <algorithm>

namespace troupe::protocol {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  return out;
}

struct authority {
  std::string host; // lower case, IPv6 without brackets
  std::string port; // "" when absent
};

// `host[:port]` or `[v6]:port`, as in a Host header or after an origin's `scheme://`.
authority split_authority(std::string_view s) {
  authority a;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos)
      return {lower(s), ""};
    a.host = lower(s.substr(1, close - 1));
    if (close + 1 < s.size() && s[close + 1] == ':')
      a.port = std::string(s.substr(close + 2));
    return a;
  }
  auto colon = s.rfind(':');
  if (colon == std::string_view::npos)
    return {lower(s), ""};
  return {lower(s.substr(0, colon)), std::string(s.substr(colon + 1))};
}

bool is_loopback(std::string_view host) {
  if (host == "localhost" || host == "::1")
    return true;
  if (host.substr(0, 4) != "127.")
    return false;
  return std::all_of(host.begin(), host.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

const std::string& header(const std::map<std::string, std::string>& headers, const std::string& name) {
  static const std::string none;
  auto it = headers.find(name);
  return it == headers.end() ? none : it->second;
}

bool listed(const std::vector<std::string>& names, std::string_view name) {
  return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return lower(n) == name; });
}

// CO-10: the origin's host and port are the Host's (ports defaulted by scheme).
bool same_origin(std::string_view origin, const authority& host) {
  auto sep = origin.find("://");
  if (sep == std::string_view::npos)
    return false;
  auto scheme = lower(origin.substr(0, sep));
  auto o = split_authority(origin.substr(sep + 3));
  auto default_port = scheme == "https" ? "443" : "80";
  auto origin_port = o.port.empty() ? default_port : o.port;
  auto host_port = host.port.empty() ? default_port : host.port;
  return o.host == host.host && origin_port == host_port;
}

bool is_json_media_type(std::string_view content_type) {
  auto media = lower(trim_ows(content_type.substr(0, content_type.find(';'))));
  return media == "application/json"
         || (media.size() > 5 && media.compare(media.size() - 5, 5, "+json") == 0 && media.rfind("application/", 0) == 0);
}

} // namespace

edge_verdict check_request_head(const edge_policy& policy, std::string_view method,
                                const std::map<std::string, std::string>& headers, bool has_body, bool upgrade) {
  edge_verdict v;
  auto refuse = [&](errc code, std::string message) {
    v.refusal = edge_refusal{code, std::move(message)};
    return v;
  };
  auto& host_value = header(headers, "host");
  if (trim_ows(host_value).empty())
    return refuse(errc::bad_request, "Host header required");
  auto host = split_authority(trim_ows(host_value));
  bool named = listed(policy.allowed_hosts, host.host);
  auto listener = lower(policy.listener_host);
  // A loopback listener answers only loopback names: a page whose name a DNS rebinding points here
  // reaches troupe with its own name in Host.
  if (is_loopback(listener) ? !(is_loopback(host.host) || named)
                            : !(policy.allowed_hosts.empty() || named || host.host == listener))
    return refuse(errc::misdirected, "Host is not a name this troupe serves (see service.allowed_hosts)");

  bool unsafe = method != "GET" && method != "HEAD" && method != "OPTIONS";
  auto& origin = header(headers, "origin");
  if ((unsafe || upgrade) && headers.count("origin")) {
    auto o = trim_ows(origin);
    bool trusted = listed(policy.trusted_origins, lower(o));
    if (!trusted && (o == "null" || !same_origin(o, host))) {
      if (upgrade)
        v.cross_origin = true;
      else
        return refuse(errc::forbidden, "Cross-origin request refused");
    }
  }
  if (has_body && unsafe && !upgrade && !is_json_media_type(header(headers, "content-type")))
    return refuse(errc::unsupported_media_type, "Content-Type must be application/json");
  return v;
}

bool is_header_value(std::string_view value) {
  return value.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

} // namespace troupe::protocol
