#include "actors/mcp_server.hpp"

#include "troupe_version.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <optional>

namespace troupe {

namespace {

using std::chrono::milliseconds;

milliseconds to_ms(double seconds) {
  return milliseconds(static_cast<int64_t>(std::llround(seconds * 1000)));
}

std::string seconds_text(double s) {
  auto text = std::to_string(s);
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.')
    text.pop_back();
  return text;
}

// One tools/call as the caller sees it: it may take several attempts on several instances.
struct pending_call {
  std::string tool;
  std::string arguments;
  caf::typed_response_promise<std::string> promise;
  int attempts = 0;
  std::optional<int64_t> rpc_id; // set while an attempt is in flight
};

struct mcp_server_state {
  static inline const char* name = "mcp_server";

  mcp_server_actor::pointer self = nullptr;
  mcp_server_options options;
  mcp_transport_factory factory;

  std::unique_ptr<mcp_transport> transport;
  uint64_t generation = 0; // which instance a transport message belongs to
  enum class phase { starting, listing, ready, down } current = phase::down;
  int64_t next_rpc_id = 1;
  int64_t init_rpc = 0;
  int64_t list_rpc = 0;
  int failed_starts = 0;
  bool relisting = false; // a tools/list after notifications/tools/list_changed is in flight

  mcp_server_status status;
  std::vector<protocol::mcp_tool> listing; // tools/list pages gathered so far
  std::map<std::string, pending_call> calls;
  std::map<int64_t, std::string> call_by_rpc;
  std::deque<std::string> waiting; // calls ready to be sent once the server is
  // A cancel can overtake its call (they come from different senders): remember the latest ones.
  std::deque<std::string> cancelled_early;
  static constexpr std::size_t max_cancelled_early = 1024;

  void publish() {
    if (options.on_status)
      options.on_status(status);
  }

  void send(std::string message) {
    if (transport)
      transport->send(std::move(message));
  }

  void start_instance() {
    auto gen = ++generation;
    transport = factory(options.config);
    mcp_server_actor me = self;
    auto err = transport->start({
      [me, gen](std::string msg) { caf::anon_send(me, mcp_message_atom::value, gen, std::move(msg)); },
      [me, gen](std::string reason) { caf::anon_send(me, mcp_closed_atom::value, gen, std::move(reason)); },
    });
    if (!err.empty()) {
      instance_down("cannot start: " + err);
      return;
    }
    current = phase::starting;
    listing.clear();
    init_rpc = next_rpc_id++;
    send(protocol::mcp_initialize_request(init_rpc, TROUPE_VERSION));
    self->delayed_send(self, to_ms(options.start_timeout_seconds), start_timeout_atom::value, gen);
  }

  void on_message(uint64_t gen, const std::string& line) {
    if (gen != generation || current == phase::down)
      return;
    auto msg = protocol::parse_jsonrpc(line);
    using kind = protocol::jsonrpc_message::kind;
    switch (msg.type) {
      case kind::invalid:
        // Servers print logs and banners on stdout; a line that is not JSON-RPC is skipped.
        spdlog::debug("mcp: server={} skipped a line that is not JSON-RPC: {}", options.config.name, msg.error);
        return;
      case kind::request:
        send(protocol::mcp_answer_to_server_request(line));
        return;
      case kind::notification:
        // The server's tools changed: list them again while calls go on (MCP tools capability).
        if (msg.method == "notifications/tools/list_changed" && current == phase::ready && !relisting) {
          relisting = true;
          listing.clear();
          request_tools(std::nullopt);
        }
        return;
      case kind::response:
      case kind::error:
        break;
    }
    if (!msg.id)
      return;
    auto id = *msg.id;
    bool failed = msg.type == kind::error;
    if (id == init_rpc && current == phase::starting) {
      if (failed)
        return instance_down("initialize failed: " + msg.error);
      send(protocol::mcp_initialized_notification());
      current = phase::listing;
      request_tools(std::nullopt);
    } else if (id == list_rpc && (current == phase::listing || relisting)) {
      if (failed && relisting) { // keep serving the tools listed before
        relisting = false;
        spdlog::warn("mcp: server={} tools/list after a change failed: {}", options.config.name, msg.error);
        return;
      }
      if (failed)
        return instance_down("tools/list failed: " + msg.error);
      auto page = protocol::parse_tools_list(msg.result);
      for (auto& t : page.tools)
        listing.push_back(std::move(t));
      if (page.next_cursor) {
        request_tools(page.next_cursor);
      } else if (relisting) {
        relisting = false;
        status.tools = listing;
        publish();
      } else {
        become_ready();
      }
    } else if (auto it = call_by_rpc.find(id); it != call_by_rpc.end()) {
      auto call_id = it->second;
      call_by_rpc.erase(it);
      finish(call_id, failed ? "[MCP_ERROR] " + msg.error : protocol::mcp_tool_result_text(msg.result));
    }
  }

  void request_tools(const std::optional<std::string>& cursor) {
    list_rpc = next_rpc_id++;
    send(protocol::mcp_tools_list_request(list_rpc, cursor));
  }

  void become_ready() {
    current = phase::ready;
    failed_starts = 0;
    status.alive = true;
    status.error.clear();
    status.tools = listing;
    publish();
    while (!waiting.empty()) {
      auto id = waiting.front();
      waiting.pop_front();
      dispatch(id);
    }
  }

  const protocol::mcp_tool* find_tool(const std::string& name) const {
    for (auto& t : status.tools)
      if (t.name == name)
        return &t;
    return nullptr;
  }

  void dispatch(const std::string& call_id) {
    auto it = calls.find(call_id);
    if (it == calls.end())
      return;
    auto& call = it->second;
    if (current != phase::ready) {
      // Waiting for the server is bounded like an attempt; the negative tag marks the wait.
      waiting.push_back(call_id);
      self->delayed_send(self, to_ms(options.call_timeout_seconds), timeout_atom::value, call_id,
                         -(call.attempts + 1));
      return;
    }
    if (!find_tool(call.tool))
      return finish(call_id, "[MCP_ERROR] Unknown tool: " + call.tool);
    ++call.attempts;
    auto rpc = next_rpc_id++;
    call.rpc_id = rpc;
    call_by_rpc[rpc] = call_id;
    send(protocol::mcp_tools_call_request(rpc, call.tool, call.arguments));
    self->delayed_send(self, to_ms(options.call_timeout_seconds), timeout_atom::value, call_id, call.attempts);
  }

  // A timeout is a transport failure (AS-64): the server is told to stop, and the call is retried
  // when a repeat is harmless and attempts are left.
  void timed_out(const std::string& call_id, int attempt) {
    auto it = calls.find(call_id);
    if (attempt < 0) {
      if (it != calls.end() && !it->second.rpc_id && it->second.attempts == -attempt - 1) {
        waiting.erase(std::remove(waiting.begin(), waiting.end(), call_id), waiting.end());
        finish(call_id, "[MCP_ERROR] server " + options.config.name + " is not available: " + status.error);
      }
      return;
    }
    if (it == calls.end() || it->second.attempts != attempt || !it->second.rpc_id)
      return;
    auto& call = it->second;
    send(protocol::mcp_cancelled_notification(*call.rpc_id, "timeout"));
    call_by_rpc.erase(*call.rpc_id);
    call.rpc_id.reset();
    auto reason = "Tool call timed out after " + seconds_text(options.call_timeout_seconds) + " seconds";
    settle_failed_attempt(call_id, reason);
  }

  // After an attempt failed in transit: retry it 1 s later when the tool says a repeat is harmless
  // and attempts are left, else answer the error.
  void settle_failed_attempt(const std::string& call_id, const std::string& reason) {
    auto& call = calls.at(call_id);
    auto tool = find_tool(call.tool);
    bool repeatable = tool && (tool->read_only || tool->idempotent);
    if (!repeatable)
      finish(call_id, "[MCP_ERROR] " + reason);
    else if (call.attempts > options.max_retries)
      finish(call_id, "[MCP_ERROR] " + reason + " (after " + std::to_string(call.attempts) + " attempts)");
    else
      self->delayed_send(self, to_ms(options.retry_delay_seconds), retry_atom::value, call_id);
  }

  void finish(const std::string& call_id, std::string text) {
    auto it = calls.find(call_id);
    if (it == calls.end())
      return;
    if (it->second.rpc_id)
      call_by_rpc.erase(*it->second.rpc_id);
    it->second.promise.deliver(std::move(text));
    calls.erase(it);
  }

  // The instance is gone: close it, settle its calls, and schedule a restart with backoff.
  void instance_down(const std::string& reason) {
    if (transport) {
      transport->close();
      transport.reset();
    }
    ++generation; // late messages of the old instance are ignored
    current = phase::down;
    relisting = false;
    status.alive = false;
    status.error = reason;
    spdlog::warn("mcp: server={} down: {}", options.config.name, reason);
    publish();
    std::vector<std::string> in_flight;
    for (auto& [rpc, call_id] : call_by_rpc)
      in_flight.push_back(call_id);
    call_by_rpc.clear();
    // The calls in flight may have reached the server: only a harmless repeat is retried.
    for (auto& call_id : in_flight) {
      calls.at(call_id).rpc_id.reset();
      settle_failed_attempt(call_id, reason);
    }
    auto backoff = std::min(options.restart_backoff_max_seconds,
                            options.restart_backoff_seconds * std::pow(2.0, failed_starts));
    ++failed_starts;
    self->delayed_send(self, to_ms(backoff), restart_atom::value, generation);
  }

  caf::typed_response_promise<std::string> call(std::string tool, std::string arguments, std::string call_id) {
    auto promise = self->make_response_promise<std::string>();
    if (auto it = std::find(cancelled_early.begin(), cancelled_early.end(), call_id); it != cancelled_early.end()) {
      cancelled_early.erase(it);
      promise.deliver(std::string("[MCP_ERROR] cancelled"));
      return promise;
    }
    if (calls.count(call_id) != 0) {
      promise.deliver(std::string("[MCP_ERROR] duplicate call id " + call_id));
      return promise;
    }
    calls.emplace(call_id, pending_call{std::move(tool), std::move(arguments), promise, 0, std::nullopt});
    dispatch(call_id);
    return promise;
  }

  void cancel(const std::string& call_id, const char* reason) {
    auto it = calls.find(call_id);
    if (it == calls.end()) {
      cancelled_early.push_back(call_id);
      if (cancelled_early.size() > max_cancelled_early)
        cancelled_early.pop_front();
      return;
    }
    if (it->second.rpc_id)
      send(protocol::mcp_cancelled_notification(*it->second.rpc_id, reason));
    finish(call_id, std::string("[MCP_ERROR] ") + reason);
  }

  void shutdown() {
    for (auto& [call_id, call] : calls)
      call.promise.deliver(std::string("[MCP_ERROR] server " + options.config.name + " is shutting down"));
    calls.clear();
    call_by_rpc.clear();
    if (transport)
      transport->close();
    transport.reset();
  }
};

mcp_server_actor::behavior_type mcp_server_behavior(mcp_server_actor::stateful_pointer<mcp_server_state> self,
                                                    mcp_server_options options, mcp_transport_factory factory) {
  auto& st = self->state;
  st.self = self;
  st.options = std::move(options);
  st.factory = std::move(factory);
  st.status.name = st.options.config.name;
  st.status.transport = st.options.config.transport;
  st.status.isolation = st.options.config.isolation;
  st.status.error = "starting";
  self->set_exit_handler([self](caf::exit_msg& msg) {
    self->state.shutdown();
    self->quit(msg.reason);
  });
  st.start_instance();
  return {
    [=](mcp_call_atom, std::string& tool, std::string& args, std::string& call_id) {
      return self->state.call(std::move(tool), std::move(args), std::move(call_id));
    },
    [=](cancel_atom, const std::string& call_id) { self->state.cancel(call_id, "cancelled"); },
    [=](status_atom) { return self->state.status; },
    [=](mcp_message_atom, uint64_t gen, const std::string& line) { self->state.on_message(gen, line); },
    [=](mcp_closed_atom, uint64_t gen, const std::string& reason) {
      if (gen == self->state.generation && self->state.current != mcp_server_state::phase::down)
        self->state.instance_down(reason);
    },
    [=](restart_atom, uint64_t gen) {
      if (gen == self->state.generation && self->state.current == mcp_server_state::phase::down)
        self->state.start_instance();
    },
    [=](start_timeout_atom, uint64_t gen) {
      auto& s = self->state;
      if (gen == s.generation && (s.current == mcp_server_state::phase::starting
                                  || s.current == mcp_server_state::phase::listing))
        s.instance_down("no answer to initialize within " + seconds_text(s.options.start_timeout_seconds) + " s");
    },
    [=](timeout_atom, const std::string& call_id, int attempt) { self->state.timed_out(call_id, attempt); },
    [=](retry_atom, const std::string& call_id) { self->state.dispatch(call_id); },
  };
}

} // namespace

mcp_server_actor spawn_mcp_server(caf::actor_system& sys, mcp_server_options options,
                                  mcp_transport_factory factory) {
  return sys.spawn<caf::detached>(mcp_server_behavior, std::move(options), std::move(factory));
}

} // namespace troupe
