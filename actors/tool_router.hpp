// The tool port the runs see: the built-in tools, then every MCP server's tools under
// `{server}_{tool}` (AS-60, AS-62), each call routed to the instance that serves its caller.
#pragma once

#include "actors/mcp_server.hpp"
#include "actors/tool_port.hpp"

#include <caf/actor_system.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace troupe {

class tool_router : public tool_port, public std::enable_shared_from_this<tool_router> {
public:
  // `builtins` may be null: a router of MCP servers only, such as one request's own (RS-30).
  tool_router(caf::actor_system& sys, std::shared_ptr<tool_port> builtins);

  // Starts a configured server (call on a router owned by a shared_ptr). `shared` servers get their
  // one instance now. Per-user servers (AS-63) get one instance now that only learns the tools and
  // reports readiness; a user's own instance starts on that user's first call, at most
  // max_instances at once (the least recently used idle one makes room), and a lazy_per_user
  // instance stops after idle_timeout without calls. Servers added first win a clash of names.
  // The options' own on_status, if any, is told too, after the router has recorded the status.
  void add_server(mcp_server_options options, mcp_transport_factory factory);

  // Records a server's latest status (thread-safe; the server's on_status hook calls it).
  void update(const mcp_server_status& status);

  // Stops lazy_per_user instances idle for longer than their idle_timeout.
  void sweep(std::chrono::steady_clock::time_point now);

  // Stops every instance; each closes its child.
  void stop();

  std::vector<protocol::tool_schema> tools() const override;
  std::shared_ptr<cancel_handle> execute(tool_invocation call, completion done) override;

  // Each server's status, with the names it could not register reported in `error` (AS-62, AS-65).
  std::vector<mcp_server_status> servers() const;
  // The name under which `server`'s `tool` is registered, or "" when it is not (a clash, or unknown).
  std::string registered_name(const std::string& server, const std::string& tool) const;
  // The registered names of the MCP tools, in order.
  std::vector<std::string> mcp_tool_names() const;
  // Every server is alive (also when none is configured).
  bool mcp_ready() const;
  // Instances of a server running now (the per-user ones included).
  std::size_t instance_count(const std::string& server) const;

private:
  struct user_instance {
    mcp_server_actor actor;
    std::chrono::steady_clock::time_point last_used;
    int in_flight = 0;
  };
  struct server_entry {
    std::string name;
    mcp_server_options options;
    mcp_transport_factory factory;
    mcp_server_actor actor; // shared: the instance; per-user: the one that learns the tools
    mcp_server_status status;
    std::map<std::string, user_instance> users; // by tenant and user key
  };
  struct route {
    std::string registered;
    std::size_t server; // index into servers_
    protocol::mcp_tool tool;
  };

  // Recomputes routes_ from the servers' statuses; mu_ held.
  void rebuild();
  // The server's entry, created on first mention (its first status may come before add_server).
  server_entry& entry(const std::string& name);
  // The instance that serves `user_key` on a per-user server, started when needed; mu_ held.
  // An empty actor with `error` set when max_instances are all busy.
  mcp_server_actor user_actor(server_entry& s, const std::string& user_key, std::string& error);
  void release(const std::string& server, const std::string& user_key);

  caf::actor_system& sys_;
  std::shared_ptr<tool_port> builtins_;
  std::vector<protocol::tool_schema> builtin_schemas_;
  mutable std::mutex mu_;
  std::vector<server_entry> servers_;
  std::vector<route> routes_;
  std::vector<std::string> duplicate_errors_; // per server, parallel to servers_
  bool sweeping_ = false;
};

} // namespace troupe
