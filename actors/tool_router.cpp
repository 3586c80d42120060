#include "actors/tool_router.hpp"

#include "actors/errors.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <set>

namespace troupe {

namespace {

using sweep_atom = caf::atom_constant<caf::atom("sweep")>;

// One MCP call in flight: whichever of the server's answer and cancel() comes first completes it.
struct mcp_call_handle : cancel_handle {
  mcp_server_actor server;
  std::string call_key;
  tool_port::completion done;
  std::function<void()> on_end; // runs once, however the call ended
  std::atomic<bool> completed{false};

  void complete(tool_outcome outcome) {
    if (completed.exchange(true))
      return;
    done(std::move(outcome));
    if (on_end)
      on_end();
  }

  void cancel() override {
    if (completed.exchange(true))
      return;
    caf::anon_send(server, cancel_atom::value, call_key);
    done({"", true});
    if (on_end)
      on_end();
  }
};

bool per_user(const mcp_server_options& o) {
  return o.config.isolation != "shared";
}

// The spawned helpers below take their state as arguments rather than captures: CAF 0.17 binds a
// null empty tuple when a function is spawned without arguments (UBSan reports it).

// Awaits one MCP call's answer so that no thread waits for it.
void await_mcp_call(caf::event_based_actor* self, std::shared_ptr<mcp_call_handle> handle, std::string tool,
                    std::string arguments) {
  self->request(handle->server, caf::infinite, mcp_call_atom::value, std::move(tool), std::move(arguments),
                handle->call_key)
    .then([handle](std::string& text) { handle->complete({std::move(text), false}); },
          [handle](caf::error& err) { handle->complete({"[MCP_ERROR] " + message_of(err), false}); });
}

// Answers a call that cannot start, after execute() returned (as the port promises).
void answer_later(caf::event_based_actor* self, tool_port::completion done, std::string text) {
  done({std::move(text), false});
  self->quit();
}

// Asks the router once a second to stop idle lazy_per_user instances, for as long as it lives.
caf::behavior idle_sweeper(caf::event_based_actor* self, std::weak_ptr<tool_router> router) {
  self->delayed_send(self, std::chrono::seconds(1), sweep_atom::value);
  return {[=](sweep_atom) {
    auto r = router.lock();
    if (!r)
      return self->quit();
    r->sweep(std::chrono::steady_clock::now());
    self->delayed_send(self, std::chrono::seconds(1), sweep_atom::value);
  }};
}

} // namespace

tool_router::tool_router(caf::actor_system& sys, std::shared_ptr<tool_port> builtins)
  : sys_(sys), builtins_(std::move(builtins)) {
  if (builtins_)
    builtin_schemas_ = builtins_->tools();
}

tool_router::server_entry& tool_router::entry(const std::string& name) {
  for (auto& s : servers_)
    if (s.name == name)
      return s;
  server_entry e;
  e.name = name;
  e.status.name = name;
  e.status.error = "starting";
  servers_.push_back(std::move(e));
  return servers_.back();
}

void tool_router::add_server(mcp_server_options options, mcp_transport_factory factory) {
  std::weak_ptr<tool_router> self = weak_from_this();
  auto first = options;
  first.on_status = [self, also = options.on_status](const mcp_server_status& s) {
    if (auto r = self.lock())
      r->update(s);
    if (also)
      also(s);
  };
  auto actor = spawn_mcp_server(sys_, first, factory);
  std::lock_guard<std::mutex> lock(mu_);
  auto& e = entry(options.config.name);
  e.options = std::move(options);
  e.factory = std::move(factory);
  e.actor = std::move(actor);
  e.status.transport = e.options.config.transport;
  e.status.isolation = e.options.config.isolation;
  if (e.options.config.isolation == "lazy_per_user" && !sweeping_) {
    sweeping_ = true;
    sys_.spawn(idle_sweeper, self);
  }
  rebuild();
}

void tool_router::update(const mcp_server_status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& e = entry(status.name);
  e.status = status;
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

mcp_server_actor tool_router::user_actor(server_entry& s, const std::string& user_key, std::string& error) {
  auto now = std::chrono::steady_clock::now();
  if (auto it = s.users.find(user_key); it != s.users.end()) {
    it->second.last_used = now;
    ++it->second.in_flight;
    return it->second.actor;
  }
  if (static_cast<int>(s.users.size()) >= s.options.config.max_instances) {
    auto lru = s.users.end();
    for (auto it = s.users.begin(); it != s.users.end(); ++it)
      if (it->second.in_flight == 0 && (lru == s.users.end() || it->second.last_used < lru->second.last_used))
        lru = it;
    if (lru == s.users.end()) {
      error = "[MCP_ERROR] max_instances reached for server " + s.name;
      return {};
    }
    caf::anon_send_exit(lru->second.actor, caf::exit_reason::user_shutdown);
    s.users.erase(lru);
  }
  auto options = s.options;
  options.on_status = nullptr; // the tools and readiness come from the server's first instance
  auto actor = spawn_mcp_server(sys_, options, s.factory);
  spdlog::info("mcp: server={} started an instance for user={}", s.name, user_key);
  s.users[user_key] = {actor, now, 1};
  return actor;
}

void tool_router::release(const std::string& server, const std::string& user_key) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& s : servers_)
    if (s.name == server)
      if (auto it = s.users.find(user_key); it != s.users.end()) {
        --it->second.in_flight;
        it->second.last_used = std::chrono::steady_clock::now();
      }
}

void tool_router::sweep(std::chrono::steady_clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& s : servers_) {
    if (s.options.config.isolation != "lazy_per_user")
      continue;
    auto idle = std::chrono::duration<double>(s.options.config.idle_timeout);
    for (auto it = s.users.begin(); it != s.users.end();) {
      if (it->second.in_flight == 0 && now - it->second.last_used >= idle) {
        spdlog::info("mcp: server={} stopped the idle instance of user={}", s.name, it->first);
        caf::anon_send_exit(it->second.actor, caf::exit_reason::user_shutdown);
        it = s.users.erase(it);
      } else {
        ++it;
      }
    }
  }
}

void tool_router::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& s : servers_) {
    if (s.actor)
      caf::anon_send_exit(s.actor, caf::exit_reason::user_shutdown);
    for (auto& [user, instance] : s.users)
      caf::anon_send_exit(instance.actor, caf::exit_reason::user_shutdown);
    s.users.clear();
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
  auto handle = std::make_shared<mcp_call_handle>();
  std::string tool;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const route* found = nullptr;
    for (auto& r : routes_)
      if (r.registered == call.name)
        found = &r;
    if (!found && builtins_)
      return builtins_->execute(std::move(call), std::move(done));
    if (!found) {
      sys_.spawn(answer_later, std::move(done), "[MCP_ERROR] unknown tool: " + call.name);
      return handle;
    }
    auto& server = servers_[found->server];
    tool = found->tool.name;
    if (!per_user(server.options)) {
      handle->server = server.actor;
    } else {
      // AS-63: one instance per (tenant_key, user_key).
      auto user = call.tenant_key + "\x1f" + call.user_key;
      std::string error;
      handle->server = user_actor(server, user, error);
      if (!handle->server) {
        sys_.spawn(answer_later, std::move(done), std::move(error));
        return handle;
      }
      std::weak_ptr<tool_router> self = weak_from_this();
      handle->on_end = [self, name = server.name, user] {
        if (auto r = self.lock())
          r->release(name, user);
      };
    }
  }
  handle->call_key = call.run_id + "/" + call.call_id;
  handle->done = std::move(done);
  sys_.spawn(await_mcp_call, handle, std::move(tool), std::move(call.arguments));
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

std::string tool_router::registered_name(const std::string& server, const std::string& tool) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& r : routes_)
    if (servers_[r.server].name == server && r.tool.name == tool)
      return r.registered;
  return {};
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

std::size_t tool_router::instance_count(const std::string& server) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& s : servers_)
    if (s.name == server)
      return (s.actor ? 1 : 0) + s.users.size();
  return 0;
}

} // namespace troupe
