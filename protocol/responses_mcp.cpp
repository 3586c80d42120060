#include "protocol/responses_mcp.hpp"

#include "protocol/http_edge.hpp"
#include "protocol/http_url.hpp"
#include "protocol/json.hpp"

#include <algorithm>

namespace troupe::protocol::responses {

std::variant<mcp_server_config, problem> declared_server(const mcp_config& mcp, const mcp_declaration& d,
                                                         const std::string& at) {
  auto bad = [&](std::string message, const std::string& field) {
    return problem{errc::bad_request, std::move(message), at + "." + field, "invalid_value"};
  };
  if (!mcp.allow_request_servers)
    return bad("Request-declared MCP servers are not enabled on this server (mcp.allow_request_servers).",
               "server_url");
  auto url = parse_http_url(d.server_url, "/?#");
  if (url.problem != url_problem::none)
    return bad("Invalid 'server_url' for MCP server '" + d.server_label + "': " + describe(url.problem) + ".",
               "server_url");
  if (!mcp.allowed_hosts.empty()
      && std::find(mcp.allowed_hosts.begin(), mcp.allowed_hosts.end(), url.host) == mcp.allowed_hosts.end())
    return bad("MCP server host '" + url.host + "' is not allowed on this server (mcp.allowed_hosts).", "server_url");
  mcp_server_config config;
  config.name = d.server_label;
  config.transport = "http";
  config.url = d.server_url;
  // A value is checked as every header the edge writes is (no CR, LF or NUL); a name also has no space,
  // colon, other control character or byte past ASCII.
  auto header_name = [](const std::string& text) {
    return !text.empty() && std::none_of(text.begin(), text.end(), [](unsigned char ch) {
      return ch <= ' ' || ch == ':' || ch >= 0x7f;
    });
  };
  if (!d.headers.empty()) {
    auto doc = json::parse(d.headers);
    for (auto& m : doc->GetObject()) {
      std::string name(m.name.GetString(), m.name.GetStringLength());
      if (!m.value.IsString())
        return bad("Invalid header '" + name + "': expected a string.", "headers." + name);
      std::string value(m.value.GetString(), m.value.GetStringLength());
      if (!header_name(name) || !is_header_value(value))
        return bad("Invalid header '" + name + "': not a valid HTTP header name and value.", "headers." + name);
      config.headers.emplace_back(std::move(name), std::move(value));
    }
  }
  if (!d.authorization.empty()) {
    if (!is_header_value(d.authorization))
      return bad("Invalid 'authorization': not a valid HTTP header value.", "authorization");
    config.headers.emplace_back("Authorization", "Bearer " + d.authorization);
  }
  return config;
}

bool tool_allowed(const std::string& filter, const mcp_tool& tool) {
  if (filter.empty())
    return true;
  auto doc = json::parse(filter);
  if (!doc)
    return true;
  auto named = [&](const json::value& names) {
    for (auto& n : names.GetArray())
      if (n.IsString() && tool.name == n.GetString())
        return true;
    return false;
  };
  if (doc->IsArray())
    return named(*doc);
  if (auto names = json::member(*doc, "tool_names"); names && names->IsArray() && !named(*names))
    return false;
  if (auto ro = json::get_bool(*doc, "read_only"); ro && *ro != tool.read_only)
    return false;
  return true;
}

} // namespace troupe::protocol::responses
