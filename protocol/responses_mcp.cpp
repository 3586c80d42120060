#include "protocol/responses_mcp.hpp"

#include "protocol/http_edge.hpp"
#include "protocol/http_url.hpp"
#include "protocol/json.hpp"

#include <algorithm>
#include <map>

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

bool tool_allowed(const std::optional<tool_filter>& filter, const mcp_tool& tool) {
  if (!filter)
    return true;
  auto& names = filter->tool_names;
  if (names && std::find(names->begin(), names->end(), tool.name) == names->end())
    return false;
  return !filter->read_only || *filter->read_only == tool.read_only;
}

bool needs_approval(const approval_policy& policy, const mcp_tool& tool) {
  if (policy.what != approval_policy::kind::filters)
    return policy.what == approval_policy::kind::always;
  auto names = [&](const std::optional<tool_filter>& f) {
    if (!f)
      return false;
    if (f->tool_names && std::find(f->tool_names->begin(), f->tool_names->end(), tool.name) != f->tool_names->end())
      return true;
    return f->read_only && *f->read_only == tool.read_only;
  };
  if (names(policy.always))
    return true;
  return !names(policy.never);
}

namespace {

std::string tools_json(const std::vector<mcp_tool>& tools) {
  rapidjson::StringBuffer buf;
  json::writer w(buf);
  w.StartArray();
  for (auto& t : tools) {
    w.StartObject();
    w.Key("name");
    w.String(t.name.c_str());
    w.Key("description");
    w.String(t.description.c_str());
    w.Key("input_schema");
    json::write_raw(w, t.input_schema);
    w.Key("annotations");
    w.StartObject();
    w.Key("readOnlyHint");
    w.Bool(t.read_only);
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  return std::string(buf.GetString(), buf.GetSize());
}

} // namespace

item list_tools_item(const std::string& server_label, const std::vector<mcp_tool>& tools, const std::string& error) {
  item list;
  list.type = item_kind::mcp_list_tools;
  list.id = mint_item_id(item_kind::mcp_list_tools);
  list.server_label = server_label;
  if (error.empty()) {
    list.tools = tools_json(tools);
    return list;
  }
  list.tools = "[]";
  list.error = json::object([&](json::writer& w) {
    w.Key("type");
    w.String("mcp_protocol_error");
    w.Key("message");
    w.String(error.c_str());
  });
  return list;
}

std::string mcp_call_error(const char* type, const std::string& message, int code) {
  return json::object([&](json::writer& w) {
    w.Key("type");
    w.String(type);
    if (std::string(type) == "mcp_tool_execution_error") {
      w.Key("content");
      w.StartArray();
      w.StartObject();
      w.Key("type");
      w.String("text");
      w.Key("text");
      w.String(message.c_str(), static_cast<rapidjson::SizeType>(message.size()));
      w.EndObject();
      w.EndArray();
    } else {
      w.Key("code");
      w.Int(code);
      w.Key("message");
      w.String(message.c_str(), static_cast<rapidjson::SizeType>(message.size()));
    }
  });
}

std::vector<const item*> approved_requests(const std::vector<item>& history, const std::vector<item>& input) {
  std::map<std::string, const item*> requests;
  for (auto* items : {&history, &input})
    for (auto& it : *items)
      if (it.type == item_kind::mcp_approval_request)
        requests[it.id] = &it;
  std::vector<const item*> out;
  for (auto& it : input)
    if (it.type == item_kind::mcp_approval_response && it.approve)
      if (auto r = requests.find(it.approval_request_id); r != requests.end())
        out.push_back(r->second);
  return out;
}

} // namespace troupe::protocol::responses
