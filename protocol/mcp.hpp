// MCP over JSON-RPC 2.0 as troupe speaks it to tool servers (AS-61..AS-65): configuration, the
// messages troupe sends, and decoding of what servers answer.
#pragma once

#include "protocol/json.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe::protocol {

// One entry of mcp.servers[] (AS-61).
struct mcp_server_config {
  std::string name;
  std::string command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  std::string transport = "stdio"; // stdio | http
  std::string url;                 // http: used as-is when it has a path, else "<url>/message"
  std::string isolation = "shared"; // shared | per_user | lazy_per_user
  double idle_timeout = 300;
  int max_instances = 10;
  std::optional<double> timeout_seconds; // else mcp.call_timeout_seconds
  std::string description;
  // http: sent with every request; a request-declared server's `headers` and `authorization` (RS-30).
  std::vector<std::pair<std::string, std::string>> headers;
};

// Parses mcp.servers (JSON array text; empty text or null is no servers) into `out` and returns the
// errors. Errors name the path: `mcp.servers[1].command: expected a string, got 3`; a duplicate name
// is `mcp.servers[2].name: duplicate server name "x"`; a stdio server needs `command`, an http
// server an http(s) `url`. A name is letters, digits, _ and -, so `{server}_{tool}` stays a valid
// function name. A null member counts as absent, like everywhere in the config. Good entries are
// appended to `out`; an entry with any error is left out, and every error is reported in one pass.
std::vector<std::string> parse_mcp_servers(std::string_view json_array_text, std::vector<mcp_server_config>& out);

// The URL an http server is reached at (AS-61): as given when it has a path, else with /message
// (a bare root, with or without its trailing slash; a query is kept after the new path).
std::string mcp_endpoint_url(std::string_view url);

// --- messages troupe sends (one line of JSON each, no trailing newline) ---
// protocolVersion 2025-03-26, capabilities {}, clientInfo {name:"troupe", version}. The one-argument
// form sends mcp_default_client_version; the host passes TROUPE_VERSION (protocol/ cannot see it).
inline constexpr const char* mcp_protocol_version = "2025-03-26";
inline constexpr const char* mcp_default_client_version = "0.1.0";
std::string mcp_initialize_request(int64_t id);
std::string mcp_initialize_request(int64_t id, std::string_view client_version);
std::string mcp_initialized_notification();
std::string mcp_tools_list_request(int64_t id, const std::optional<std::string>& cursor);
// Why `arguments_json` cannot be a tools/call's arguments: the parse error with its offset, or that it
// is not a JSON object; nullopt when it is one, or blank (no arguments, sent as {}). Parsed without
// recursion, so any nesting is safe.
std::optional<std::string> tool_arguments_error(std::string_view arguments_json);
// `arguments_json` is re-serialized onto one line; text that is empty or not a JSON object is sent as
// {}: callers repair (AS-18) or refuse (RS-25, tool_arguments_error) such arguments first, so no call
// runs with other arguments than the ones shown.
std::string mcp_tools_call_request(int64_t id, std::string_view tool, std::string_view arguments_json);
// An empty reason is left out.
std::string mcp_cancelled_notification(int64_t request_id, std::string_view reason);
// The answer to a request the server sent troupe, echoing its id (ping gets {}; anything else -32601
// "Method not found"). Empty when the line is not a request: notifications and responses get none.
std::string mcp_answer_to_server_request(std::string_view request_line);

// --- what servers send ---
struct jsonrpc_message {
  enum class kind { response, error, request, notification, invalid };
  kind type = kind::invalid;
  // Responses to troupe's requests carry troupe's integer ids; a string of digits counts too. Other
  // ids (another string, an error's null) leave it empty.
  std::optional<int64_t> id;
  std::string method;        // requests and notifications
  std::string result = "null"; // response: the result's JSON text
  std::string error;         // error: the message (with its code); invalid: why
};

jsonrpc_message parse_jsonrpc(std::string_view line);

struct mcp_tool {
  std::string name;        // the server's own name
  std::string description;
  std::string input_schema = R"({"type":"object","properties":{}})"; // JSON Schema text
  bool read_only = false;  // annotations.readOnlyHint
  bool idempotent = false; // annotations.idempotentHint
  bool destructive = true; // annotations.destructiveHint (MCP's default is true)
  bool open_world = true;  // annotations.openWorldHint (MCP's default is true)
};

struct mcp_tools_page {
  std::vector<mcp_tool> tools;
  std::optional<std::string> next_cursor;
};

// The result of tools/list; tools without a name are skipped, an inputSchema that is not an object
// becomes the empty object schema, and next_cursor is set only for a non-empty string.
mcp_tools_page parse_tools_list(std::string_view result_json);

// The text the model sees for a tools/call result (AS-62): the content's items joined with "\n"
// (structuredContent when there is no content), or "[MCP_ERROR] <text>" when isError is set
// ("[MCP_ERROR] tool reported an error" without text).
std::string mcp_tool_result_text(std::string_view result_json);

// One content[] item as the model reads it: a text item's text; binary data only described, never
// pasted: `[image: image/png, 1024 bytes]`, `[audio: audio/wav, N bytes]`, `[resource: <uri>]` then
// an embedded text resource's text on the next line (a blob: `[resource: <uri>, <mimeType>, N bytes]`),
// `[resource_link: <uri> (<name>)]`, any other type `[<type> content]`. Names and URIs are cut at
// 512 bytes.
std::string mcp_content_text(const json::value& item);

// `{server}_{tool}` (AS-62); a character of the tool's name outside [A-Za-z0-9_-] becomes '_' so the
// name stays a valid function name.
std::string mcp_registered_name(std::string_view server, std::string_view tool);

} // namespace troupe::protocol
