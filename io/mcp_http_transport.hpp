// The MCP transport over streamable HTTP: one POST per JSON-RPC message, answered by a JSON body or
// an SSE stream (AS-62).
#pragma once

#include "actors/mcp_transport.hpp"

#include <cstddef>
#include <memory>

namespace troupe::io {

// Longest JSON body, SSE line or SSE event accepted from a server; a longer one closes the transport.
inline constexpr std::size_t mcp_http_max_message_bytes = std::size_t{4} << 20;

// Each send() is one POST to protocol::mcp_endpoint_url(config.url) (http or https, peer verified),
// on the transport's own io thread. The Mcp-Session-Id the initialize answer carries goes with
// every later request, with the negotiated MCP-Protocol-Version; messages sent while initialize is
// in flight wait for its answer. A 202 or an empty body delivers nothing. on_closed: "session
// expired" (404 to a request with a session id), any other non-2xx status ("... HTTP 500: ..."),
// connection errors, a bound hit. close() aborts what is in flight and sends DELETE with the
// session id, waiting at most 1 s for it; it must not be called from a handler.
std::unique_ptr<mcp_transport> make_mcp_http_transport(const protocol::mcp_server_config& config);

} // namespace troupe::io
