// A Responses request's MCP tools (RS-30): which server a declaration reaches, and which of its
// tools the request lets the model see.
#pragma once

#include "protocol/config.hpp"
#include "protocol/errors.hpp"
#include "protocol/mcp.hpp"
#include "protocol/responses_request.hpp"

#include <string>
#include <variant>

namespace troupe::protocol::responses {

// A request-declared server (one with `server_url`) as troupe reaches it, when this server allows
// it (mcp.allow_request_servers, mcp.allowed_hosts): streamable HTTP at `server_url`, sent the
// declaration's `headers` and `authorization`. `at` is the declaration's param ("tools[2]").
std::variant<mcp_server_config, problem> declared_server(const mcp_config& mcp, const mcp_declaration& d,
                                                         const std::string& at);

// Whether `allowed_tools` (RS-30; absent: every tool) lets the model see `tool`: every part the
// filter gives holds for it.
bool tool_allowed(const std::optional<tool_filter>& allowed_tools, const mcp_tool& tool);

// RS-33: whether `require_approval` asks for approval before `tool` runs: a tool that `always`
// names (by name or read-only hint) does, else one that `never` names does not, else it does.
bool needs_approval(const approval_policy& require_approval, const mcp_tool& tool);

// A server's mcp_list_tools item (RS-32): its tools, or, when `error` says why it could not list
// them, none and an mcp_protocol_error.
item list_tools_item(const std::string& server_label, const std::vector<mcp_tool>& tools, const std::string& error);

// An mcp_call's `error` (RS-25, RS-26, RS-34): `mcp_tool_execution_error` carries the tool's text as
// content, any other type a JSON-RPC `code` and `message`.
std::string mcp_call_error(const char* type, const std::string& message, int code = 0);

// The approval requests the input approves (RS-33), from history + input, in the input's order.
std::vector<const item*> approved_requests(const std::vector<item>& history, const std::vector<item>& input);

} // namespace troupe::protocol::responses
