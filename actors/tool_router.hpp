// The tool port the runs see: the built-in tools, then every MCP server's tools under
// `{server}_{tool}` (AS-60, AS-62), each call routed to whoever provides it.
#pragma once

#include "actors/mcp_server.hpp"
#include "actors/tool_port.hpp"

#include <caf/actor_system.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace troupe {

class tool_router : public tool_port {
public:
  tool_router(caf::actor_system& sys, std::shared_ptr<tool_port> builtins);

  // Registers a server; servers registered first win a clash of names (config order). Its status
  // may already have arrived through update().
  void add_server(const std::string& name, mcp_server_actor server);

  // Records a server's latest status (thread-safe; the server's on_status hook calls it).
  void update(const mcp_server_status& status);

  std::vector<protocol::tool_schema> tools() const override;
  std::shared_ptr<cancel_handle> execute(tool_invocation call, completion done) override;

  // Each server's status, with the names it could not register reported in `error` (AS-62, AS-65).
  std::vector<mcp_server_status> servers() const;
  // The registered names of the MCP tools, in order.
  std::vector<std::string> mcp_tool_names() const;
  // Every server is alive (also when none is configured).
  bool mcp_ready() const;
  // The built-in tools' schemas.
  std::vector<protocol::tool_schema> builtin_tools() const;

private:
  struct route {
    std::string registered;
    std::size_t server; // index into servers_
    protocol::mcp_tool tool;
  };
  struct server_entry {
    std::string name;
    mcp_server_actor actor;
    mcp_server_status status;
  };

  // Recomputes routes_ from the servers' statuses; mu_ held.
  void rebuild();
  // The server's entry, created on first mention (its first status may come before add_server).
  server_entry& entry(const std::string& name);

  caf::actor_system& sys_;
  std::shared_ptr<tool_port> builtins_;
  std::vector<protocol::tool_schema> builtin_schemas_;
  mutable std::mutex mu_;
  std::vector<server_entry> servers_;
  std::vector<route> routes_;
  std::vector<std::string> duplicate_errors_; // per server, parallel to servers_
};

} // namespace troupe
