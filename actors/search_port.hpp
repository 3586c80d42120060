// The Responses gateway's search tools (RS-27) as the run executes them: a tool port per configured
// provider, which calls an MCP server's tool or POSTs to an HTTP endpoint, and the steps a response
// run takes to start a search call and to end its item from what the provider answered.
#pragma once

#include "actors/agent_loop.hpp"
#include "actors/tool_call.hpp"
#include "actors/tool_port.hpp"
#include "actors/web_port.hpp"
#include "protocol/config.hpp"
#include "protocol/responses_request.hpp"
#include "protocol/responses_stream.hpp"

#include <caf/actor_system.hpp>

#include <memory>
#include <string>

namespace troupe {

class tool_router;

// The port of one search provider. Its output is the provider's reply text, or
// protocol::responses::search_failure_marker and why the search failed. `mcp` serves an MCP
// provider (tools.<t>.provider.mcp_server), `web` an HTTP one.
std::shared_ptr<tool_port> make_search_port(caf::actor_system& sys, const protocol::search_provider_config& provider,
                                            std::shared_ptr<tool_router> mcp, web_port_actor web);

// The loop call of a pending search call (`p`, whose item is `it`), run on `port` (may be null: no
// provider, and the gate refuses it). The provider is sent the request's declaration with the query.
loop_call search_call(const std::shared_ptr<tool_port>& port, const protocol::responses::request& req,
                      const protocol::responses::pending_call& p, const protocol::responses::item& it,
                      const std::string& run_id);

// Why a search call may not run (no provider, no usable query), or "" when it may.
std::string search_refusal(const loop_call& call, const protocol::responses::item& it);

// Ends a search call's item from its result (RS-27, RS-25): its results, or failed with the model
// told why. `timeout_seconds` words a timed-out call.
void end_search(protocol::responses::response_stream& stream, const protocol::responses::request& req,
                const loop_call& call, call_result result, double timeout_seconds);

} // namespace troupe
