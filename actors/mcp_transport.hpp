// The MCP transport port: one connection to an MCP server, a child process over stdio or a
// streamable-HTTP session. The mcp_server actor speaks JSON-RPC through it; adapters live in io/.
#pragma once

#include "protocol/mcp.hpp"

#include <functional>
#include <memory>
#include <string>

namespace troupe {

class mcp_transport {
public:
  struct handlers {
    // One complete JSON-RPC message (a line of stdout, a JSON body or one SSE event's data).
    std::function<void(std::string message)> on_message;
    // The connection is gone (the child exited, a pipe broke, a line was over the bound, the HTTP
    // session failed); runs at most once, never after close() returned.
    std::function<void(std::string reason)> on_closed;
  };

  virtual ~mcp_transport() = default;

  // Starts the child process or prepares the HTTP session. Handlers run on the transport's own
  // threads. An error is returned as text (e.g. "cannot start /bin/x: No such file or directory").
  virtual std::string start(handlers h) = 0;

  // Sends one JSON-RPC message. Thread-safe and never blocks the caller on the server.
  virtual void send(std::string message) = 0;

  // Ends the connection: a child gets SIGTERM, then SIGKILL after a short grace, and is reaped.
  // Idempotent; blocks until the transport's threads are done, so it never runs on a scheduler
  // thread with a live child.
  virtual void close() = 0;
};

using mcp_transport_factory = std::function<std::unique_ptr<mcp_transport>(const protocol::mcp_server_config&)>;

} // namespace troupe
