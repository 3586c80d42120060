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

// Whether `allowed_tools` (RS-30: a list of names, or {tool_names?, read_only?}; "" = all) lets
// the model see `tool`.
bool tool_allowed(const std::string& allowed_tools, const mcp_tool& tool);

} // namespace troupe::protocol::responses
