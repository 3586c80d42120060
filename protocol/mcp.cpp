#include "protocol/mcp.hpp"

#include "protocol/config_reader.hpp"
#include "protocol/json.hpp"
#include "protocol/utf8.hpp"

#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <cmath>
#include <set>

namespace troupe::protocol {

namespace {


bool is_blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

bool is_name_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// ^[A-Za-z0-9][A-Za-z0-9_-]*$: the server part of `{server}_{tool}`, which must stay a function name.
bool is_server_name(std::string_view s) {
  if (s.empty() || s.front() == '_' || s.front() == '-')
    return false;
  for (char c : s)
    if (!is_name_char(c))
      return false;
  return true;
}

bool has_http_scheme(std::string_view url) {
  for (std::string_view scheme : {"http://", "https://"})
    if (url.substr(0, scheme.size()) == scheme)
      return url.size() > scheme.size() && url.find_first_of("/?#", scheme.size()) != scheme.size();
  return false;
}


// An upper bound that keeps a typo from asking for millions of child processes.
constexpr int max_instances_limit = 100000;

void write_header(json::writer& w) {
  w.Key("jsonrpc");
  w.String("2.0");
}

void write_id(json::writer& w, int64_t id) {
  w.Key("id");
  w.Int64(id);
}

void write_string(json::writer& w, const char* key, std::string_view value) {
  w.Key(key);
  w.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
}

// An id that is an integer, or a string of digits that fits one.
std::optional<int64_t> integer_id(const json::value& id) {
  if (id.IsInt64())
    return id.GetInt64();
  if (!id.IsString() || id.GetStringLength() == 0 || id.GetStringLength() > 18)
    return std::nullopt; // 18 digits always fit an int64_t
  int64_t n = 0;
  for (rapidjson::SizeType i = 0; i < id.GetStringLength(); ++i) {
    char c = id.GetString()[i];
    if (c < '0' || c > '9')
      return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

jsonrpc_message invalid(std::string why) {
  jsonrpc_message m;
  m.type = jsonrpc_message::kind::invalid;
  m.error = std::move(why);
  return m;
}

std::string error_text(const json::value& error) {
  if (!error.IsObject())
    return "malformed error " + json_preview(error);
  auto message = json::get_string(error, "message");
  if (message.empty())
    message = "unknown error";
  auto code = json::member(error, "code");
  if (code && code->IsInt64())
    message += " (code " + std::to_string(code->GetInt64()) + ")";
  return message;
}

// A name or address a content item gives, as the model may read it: at most 512 bytes of it.
std::string bounded(std::string_view s) {
  constexpr std::size_t max_label = 512;
  if (s.size() <= max_label)
    return std::string(s);
  return utf8_repaired(s.substr(0, max_label)) + "...";
}

std::string described(const json::value& obj, const char* key, const char* otherwise) {
  auto v = json::get_string(obj, key);
  return v.empty() ? std::string(otherwise) : bounded(v);
}

// ", N bytes" for the base64 data under `key`: its decoded size, never its text (AS-62).
std::string base64_size(const json::value& obj, const char* key) {
  auto v = json::member(obj, key);
  if (!v || !v->IsString())
    return "";
  std::size_t symbols = 0;
  for (auto p = v->GetString(), end = p + v->GetStringLength(); p != end; ++p)
    if (*p != '=' && *p != '\n' && *p != '\r' && *p != ' ')
      ++symbols;
  return ", " + std::to_string(symbols * 3 / 4) + " bytes";
}

} // namespace

std::vector<std::string> parse_mcp_servers(std::string_view json_array_text, std::vector<mcp_server_config>& out) {
  std::vector<std::string> errors;
  const std::string root = "mcp.servers";
  if (is_blank(json_array_text))
    return errors;
  json::document doc;
  doc.Parse(json_array_text.data(), json_array_text.size());
  if (doc.HasParseError()) {
    errors.push_back(root + ": invalid JSON at offset " + std::to_string(doc.GetErrorOffset()) + " ("
                     + rapidjson::GetParseError_En(doc.GetParseError()) + ")");
    return errors;
  }
  if (doc.IsNull())
    return errors;
  if (!doc.IsArray()) {
    errors.push_back(root + ": expected an array of server objects, got " + json_preview(doc));
    return errors;
  }
  std::set<std::string> names;
  config_keys keys;
  for (rapidjson::SizeType i = 0; i < doc.Size(); ++i) {
    auto path = root + "[" + std::to_string(i) + "]";
    auto& entry = doc[i];
    if (!entry.IsObject()) {
      errors.push_back(path + ": expected an object, got " + json_preview(entry));
      continue;
    }
    auto before = errors.size();
    mcp_server_config c;
    config_reader r(&entry, path, errors, &keys);
    if (!r.find("name"))
      r.error("name", "required: letters, digits, _ and -, starting with a letter or digit");
    else if (r.string("name", c.name)) {
      if (!is_server_name(c.name))
        r.fail("name", "expected letters, digits, _ and -, starting with a letter or digit", *r.find("name"));
      else if (!names.insert(c.name).second)
        r.error("name", "duplicate server name " + json::quote(c.name));
    }
    r.one_of("transport", c.transport, {"stdio", "http"});
    bool command_given = r.string("command", c.command);
    r.strings("args", c.args);
    r.string_map("env", c.env);
    if (r.string("url", c.url) && !has_http_scheme(c.url))
      r.fail("url", "expected a URL starting with http:// or https://", *r.find("url"));
    r.one_of("isolation", c.isolation, {"shared", "per_user", "lazy_per_user"});
    r.seconds("idle_timeout", c.idle_timeout, 0);
    r.integer("max_instances", c.max_instances, 1, max_instances_limit);
    if (double timeout = 0; r.seconds("timeout_seconds", timeout, 0, false))
      c.timeout_seconds = timeout;
    r.string("description", c.description);

    // What each transport needs; a member that is there with the wrong type was reported above.
    if (c.transport == "stdio" && c.command.empty() && (command_given || !r.find("command")))
      r.error("command", "required for a stdio server: the program to start");
    if (c.transport == "http" && !r.find("url"))
      r.error("url", "required for an http server: its http:// or https:// endpoint");
    if (errors.size() == before)
      out.push_back(std::move(c));
  }
  keys.refuse_unknown(errors);
  return errors;
}

std::string mcp_endpoint_url(std::string_view url) {
  auto scheme = url.find("://");
  if (scheme == std::string_view::npos)
    return std::string(url);
  auto path = url.find_first_of("/?#", scheme + 3);
  if (path == std::string_view::npos)
    return std::string(url) + "/message";
  auto rest = url.substr(path); // "/", "/mcp", "?q", "/?q", ...
  if (rest.front() == '/' && rest.size() > 1 && rest[1] != '?' && rest[1] != '#')
    return std::string(url); // a real path: used as given
  if (rest.front() == '/')
    rest.remove_prefix(1);
  return std::string(url.substr(0, path)) + "/message" + std::string(rest);
}

std::string mcp_initialize_request(int64_t id) {
  return mcp_initialize_request(id, mcp_default_client_version);
}

std::string mcp_initialize_request(int64_t id, std::string_view client_version) {
  return json::object([&](json::writer& w) {
    write_header(w);
    write_id(w, id);
    write_string(w, "method", "initialize");
    w.Key("params");
    w.StartObject();
    write_string(w, "protocolVersion", mcp_protocol_version);
    w.Key("capabilities");
    w.StartObject();
    w.EndObject();
    w.Key("clientInfo");
    w.StartObject();
    write_string(w, "name", "troupe");
    write_string(w, "version", client_version);
    w.EndObject();
    w.EndObject();
  });
}

std::string mcp_initialized_notification() {
  return json::object([](json::writer& w) {
    write_header(w);
    write_string(w, "method", "notifications/initialized");
  });
}

std::string mcp_tools_list_request(int64_t id, const std::optional<std::string>& cursor) {
  return json::object([&](json::writer& w) {
    write_header(w);
    write_id(w, id);
    write_string(w, "method", "tools/list");
    w.Key("params");
    w.StartObject();
    if (cursor && !cursor->empty())
      write_string(w, "cursor", *cursor);
    w.EndObject();
  });
}

std::optional<std::string> tool_arguments_error(std::string_view arguments_json) {
  if (is_blank(arguments_json))
    return std::nullopt; // no arguments at all: some upstreams send "" for a tool without parameters
  rapidjson::MemoryStream input(arguments_json.data(), arguments_json.size());
  rapidjson::BaseReaderHandler<> accept_all;
  rapidjson::Reader reader;
  auto result = reader.Parse<rapidjson::kParseIterativeFlag>(input, accept_all);
  if (result.IsError())
    return std::string("arguments are not valid JSON: ") + rapidjson::GetParseError_En(result.Code()) + " (at byte "
           + std::to_string(result.Offset()) + ")";
  auto first = arguments_json.find_first_not_of(" \t\r\n");
  if (arguments_json[first] != '{')
    return std::string("arguments must be a JSON object");
  return std::nullopt;
}

std::string mcp_tools_call_request(int64_t id, std::string_view tool, std::string_view arguments_json) {
  // Parsed and written again so the message is one line whatever whitespace the model used.
  auto args = json::parse(arguments_json);
  bool usable = args && args->IsObject();
  return json::object([&](json::writer& w) {
    write_header(w);
    write_id(w, id);
    write_string(w, "method", "tools/call");
    w.Key("params");
    w.StartObject();
    write_string(w, "name", tool);
    w.Key("arguments");
    if (usable)
      args->Accept(w);
    else {
      w.StartObject();
      w.EndObject();
    }
    w.EndObject();
  });
}

std::string mcp_cancelled_notification(int64_t request_id, std::string_view reason) {
  return json::object([&](json::writer& w) {
    write_header(w);
    write_string(w, "method", "notifications/cancelled");
    w.Key("params");
    w.StartObject();
    w.Key("requestId");
    w.Int64(request_id);
    if (!reason.empty())
      write_string(w, "reason", reason);
    w.EndObject();
  });
}

std::string mcp_answer_to_server_request(std::string_view request_line) {
  auto msg = parse_jsonrpc(request_line);
  if (msg.type != jsonrpc_message::kind::request)
    return {};
  auto doc = json::parse(request_line); // parse_jsonrpc accepted it, so it is an object with an id
  const json::value& id = *json::member(*doc, "id");
  return json::object([&](json::writer& w) {
    write_header(w);
    w.Key("id");
    id.Accept(w);
    if (msg.method == "ping") {
      w.Key("result");
      w.StartObject();
      w.EndObject();
    } else {
      w.Key("error");
      w.StartObject();
      w.Key("code");
      w.Int(-32601);
      write_string(w, "message", "Method not found");
      w.EndObject();
    }
  });
}

jsonrpc_message parse_jsonrpc(std::string_view line) {
  if (is_blank(line))
    return invalid("empty line");
  auto parsed = json::parse_text(line);
  if (auto failure = std::get_if<json::parse_failure>(&parsed)) {
    if (failure->why != json::parse_failure::reason::syntax)
      return invalid(failure->message());
    auto at = failure->offset;
    return invalid("not JSON at offset " + std::to_string(at) + (at < line.size() && line[at] == '\0' ? ": a NUL byte" : ""));
  }
  auto& doc = std::get<json::document>(parsed);
  if (doc.IsArray())
    return invalid("batches are not supported");
  if (!doc.IsObject())
    return invalid("expected a JSON-RPC object, got " + json_preview(doc));

  auto id = json::member(doc, "id");
  auto method = json::member(doc, "method");
  auto result = json::member(doc, "result");
  auto error = json::member(doc, "error");
  if (id && !id->IsString() && !id->IsNumber() && !id->IsNull())
    return invalid("id: expected a string or a number, got " + json_preview(*id));
  if (method && !method->IsString())
    return invalid("method: expected a string, got " + json_preview(*method));

  jsonrpc_message m;
  if (id)
    m.id = integer_id(*id);
  if (result || error) {
    if (method)
      return invalid("a message cannot have both a method and a " + std::string(result ? "result" : "error"));
    if (result && error)
      return invalid("a response cannot have both a result and an error");
    if (!id)
      return invalid(std::string(result ? "a response" : "an error") + " needs an id");
    if (result) {
      if (id->IsNull())
        return invalid("a response needs an id, got null");
      m.type = jsonrpc_message::kind::response;
      m.result = json::serialize(*result);
    } else {
      m.type = jsonrpc_message::kind::error; // a null id is allowed: the server could not read ours
      m.error = error_text(*error);
    }
    return m;
  }
  if (method) {
    m.method.assign(method->GetString(), method->GetStringLength());
    if (!id) {
      m.type = jsonrpc_message::kind::notification;
      return m;
    }
    if (id->IsNull())
      return invalid("a request needs an id, got null");
    m.type = jsonrpc_message::kind::request;
    return m;
  }
  return invalid("neither a request, a notification nor a response: no method, result or error");
}

mcp_tools_page parse_tools_list(std::string_view result_json) {
  mcp_tools_page page;
  auto doc = json::parse(result_json);
  if (!doc || !doc->IsObject())
    return page;
  if (auto tools = json::member(*doc, "tools"); tools && tools->IsArray()) {
    for (auto& t : tools->GetArray()) {
      auto name = json::get_string(t, "name");
      if (name.empty())
        continue;
      mcp_tool tool;
      tool.name = std::move(name);
      tool.description = json::get_string(t, "description");
      if (auto schema = json::member(t, "inputSchema"); schema && schema->IsObject())
        tool.input_schema = json::serialize(*schema);
      if (auto a = json::member(t, "annotations"); a && a->IsObject()) {
        tool.read_only = json::get_bool(*a, "readOnlyHint").value_or(tool.read_only);
        tool.idempotent = json::get_bool(*a, "idempotentHint").value_or(tool.idempotent);
        tool.destructive = json::get_bool(*a, "destructiveHint").value_or(tool.destructive);
        tool.open_world = json::get_bool(*a, "openWorldHint").value_or(tool.open_world);
      }
      page.tools.push_back(std::move(tool));
    }
  }
  auto cursor = json::get_string(*doc, "nextCursor");
  if (!cursor.empty())
    page.next_cursor = std::move(cursor);
  return page;
}

std::string mcp_content_text(const json::value& item) {
  auto type = json::get_string(item, "type");
  auto t = json::member(item, "text");
  if (type == "text" && t && t->IsString())
    return std::string(t->GetString(), t->GetStringLength());
  if (type == "image" || type == "audio")
    return "[" + type + ": " + described(item, "mimeType", "unknown type") + base64_size(item, "data") + "]";
  if (type == "resource") {
    auto r = json::member(item, "resource");
    if (!r || !r->IsObject())
      return "[resource]";
    auto head = "[resource: " + described(*r, "uri", "no uri");
    if (auto text = json::member(*r, "text"); text && text->IsString())
      return head + "]\n" + std::string(text->GetString(), text->GetStringLength());
    return head + ", " + described(*r, "mimeType", "unknown type") + base64_size(*r, "blob") + "]";
  }
  if (type == "resource_link") {
    auto name = json::get_string(item, "name");
    return "[resource_link: " + described(item, "uri", "no uri")
           + (name.empty() ? std::string() : " (" + described(item, "name", "") + ")") + "]";
  }
  return type.empty() ? std::string("[content]") : "[" + bounded(type) + " content]";
}

std::string mcp_tool_result_text(std::string_view result_json) {
  auto doc = json::parse(result_json);
  if (!doc || !doc->IsObject())
    return "[MCP_ERROR] malformed tools/call result";
  std::string text;
  bool any = false;
  if (auto content = json::member(*doc, "content"); content && content->IsArray()) {
    for (auto& item : content->GetArray()) {
      if (any)
        text += '\n';
      any = true;
      text += mcp_content_text(item);
    }
  }
  if (!any)
    if (auto structured = json::member(*doc, "structuredContent"); structured && !structured->IsNull())
      text = json::serialize(*structured);
  text = utf8_repaired(text);
  if (json::get_bool(*doc, "isError").value_or(false))
    return "[MCP_ERROR] " + (text.empty() ? std::string("tool reported an error") : text);
  return text;
}

std::string mcp_registered_name(std::string_view server, std::string_view tool) {
  std::string name;
  name.reserve(server.size() + 1 + tool.size());
  name.append(server);
  name += '_';
  for (char c : tool)
    name += is_name_char(c) ? c : '_';
  return name;
}

} // namespace troupe::protocol
