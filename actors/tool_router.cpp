#include "actors/tool_router.hpp"

#include "actors/errors.hpp"

#include <caf/all.hpp>

#include <atomic>
#include <set>

namespace troupe {

namespace {

// One MCP call in flight: whichever of the server's answer and cancel() comes first completes it.
struct mcp_call_handle : cancel_handle {
  mcp_server_actor server;
  std::string call_key;
  tool_port::completion done;
  std::atomic<bool> completed{false};

  void complete(tool_outcome outcome) {
    if (!completed.exchange(true))
      done(std::move(outcome));
  }

  void cancel() override {
    if (completed.exchange(true))
      return;
    caf::anon_send(server, cancel_atom::value, call_key);
    done({"", true});
  }
};

} // namespace

tool_router::tool_router(caf::actor_system& sys, std::shared_ptr<tool_port> builtins)
  : sys_(sys), builtins_(std::move(builtins)), builtin_schemas_(builtins_->tools()) {}

tool_router::server_entry& tool_router::entry(const std::string& name) {
  for (auto& s : servers_)
    if (s.name == name)
      return s;
  mcp_server_status status;
  status.name = name;
  status.error = "starting";
  servers_.push_back({name, mcp_server_actor{}, std::move(status)});
  return servers_.back();
}

void tool_router::add_server(const std::string& name, mcp_server_actor server) {
  std::lock_guard<std::mutex> lock(mu_);
  entry(name).actor = std::move(server);
  rebuild();
}

void tool_router::update(const mcp_server_status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  entry(status.name).status = status;
  rebuild();
}

void tool_router::rebuild() {
  std::set<std::string> taken;
  for (auto& t : builtin_schemas_)
    taken.insert(t.name);
  routes_.clear();
  duplicate_errors_.assign(servers_.size(), "");
  for (std::size_t i = 0; i < servers_.size(); ++i) {
    for (auto& tool : servers_[i].status.tools) {
      auto name = protocol::mcp_registered_name(servers_[i].name, tool.name);
      if (!taken.insert(name).second) {
        if (duplicate_errors_[i].empty())
          duplicate_errors_[i] = "duplicate tool name: " + name;
        continue;
      }
      routes_.push_back({name, i, tool});
    }
  }
}

std::vector<protocol::tool_schema> tool_router::tools() const {
  auto out = builtin_schemas_;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& r : routes_) {
    auto description = r.tool.description.empty() ? "Tool " + r.tool.name + " of MCP server " + servers_[r.server].name
                                                   : r.tool.description;
    out.push_back({r.registered, std::move(description), r.tool.input_schema});
  }
  return out;
}

std::shared_ptr<cancel_handle> tool_router::execute(tool_invocation call, completion done) {
  mcp_server_actor server;
  std::string tool;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& r : routes_)
      if (r.registered == call.name) {
        server = servers_[r.server].actor;
        tool = r.tool.name;
        break;
      }
  }
  if (!server)
    return builtins_->execute(std::move(call), std::move(done));
  auto handle = std::make_shared<mcp_call_handle>();
  handle->server = server;
  handle->call_key = call.run_id + "/" + call.call_id;
  handle->done = std::move(done);
  // A one-shot actor awaits the server's answer so that no thread waits for it.
  sys_.spawn([handle, server, tool, args = std::move(call.arguments)](caf::event_based_actor* self) {
    self->request(server, caf::infinite, mcp_call_atom::value, tool, args, handle->call_key)
      .then([handle](std::string& text) { handle->complete({std::move(text), false}); },
            [handle](caf::error& err) { handle->complete({"[MCP_ERROR] " + message_of(err), false}); });
  });
  return handle;
}

std::vector<mcp_server_status> tool_router::servers() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<mcp_server_status> out;
  for (std::size_t i = 0; i < servers_.size(); ++i) {
    out.push_back(servers_[i].status);
    if (!duplicate_errors_[i].empty())
      out.back().error = duplicate_errors_[i];
  }
  return out;
}

std::vector<std::string> tool_router::mcp_tool_names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (auto& r : routes_)
    out.push_back(r.registered);
  return out;
}

bool tool_router::mcp_ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& s : servers_)
    if (!s.status.alive)
      return false;
  return true;
}

std::vector<protocol::tool_schema> tool_router::builtin_tools() const {
  return builtin_schemas_;
}

} // namespace troupe
