#include "io/agent_routes.hpp"

#include "actors/errors.hpp"
#include "io/agent_http.hpp"
#include "io/prompt_files.hpp"
#include "io/route_ask.hpp"
#include "protocol/agent_event.hpp"
#include "protocol/chat_request.hpp"
#include "protocol/errors.hpp"
#include "protocol/json.hpp"
#include "protocol/skills.hpp"
#include "protocol/sse.hpp"
#include "protocol/timestamp.hpp"
#include "protocol/workspace_path.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <chrono>

namespace troupe::io {

namespace {

using protocol::json::writer;
using disconnect_atom = caf::atom_constant<caf::atom("gone")>;

struct shared_context {
  caf::actor_system* sys;
  run_registry_actor registry;
  agent_service_info info;
  std::shared_ptr<const prompt_files> skills;

  bool authorized(const http_request& req) const { return operator_allowed(info.config, req); }
};

// One chat completion in flight: receives the run's events and turns them into SSE frames, or
// collects them for the non-streaming summary (AS-11, AS-15).
struct chat_relay_state {
  static inline const char* name = "chat_relay";
  std::shared_ptr<http_exchange> exchange;
  std::shared_ptr<event_stream> stream;
  run_spec spec;
  bool streaming = true;
  bool cancel_on_disconnect = true;
  run_actor run;
  bool ended = false;
  int64_t next_sequence = 0;
  std::vector<std::string> events;       // payloads, for the summary
  std::vector<protocol::agent_event> tool_calls;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

void open_stream(caf::stateful_actor<chat_relay_state>* self) {
  auto& st = self->state;
  if (st.stream || !st.streaming)
    return;
  st.stream = st.exchange->open_event_stream({{"X-FastReAct-Run-ID", st.spec.run_id},
                                              {"X-FastReAct-Session-ID", st.spec.request.session_id},
                                              {"X-FastReAct-Event-Schema", protocol::agent_event_schema}});
}

std::string summary_json(const chat_relay_state& st, const run_result& r) {
  return protocol::json::object([&](writer& w) {
    w.Key("type");
    w.String(r.error.empty() ? "chat.completion" : "error");
    w.Key("run_id");
    w.String(r.run_id);
    w.Key("session_id");
    w.String(r.session_id);
    w.Key("content");
    w.String(r.content);
    w.Key("events");
    w.StartArray();
    for (auto& e : st.events)
      protocol::json::write_raw(w, e);
    w.EndArray();
    w.Key("tool_calls");
    w.StartArray();
    for (auto& c : st.tool_calls) {
      w.StartObject();
      w.Key("event_id");
      w.String(c.run_id + ":" + std::to_string(c.sequence));
      w.Key("tool_call_id");
      w.String(c.tool_call_id.value_or(""));
      w.Key("tool_name");
      w.String(c.tool_name.value_or(""));
      w.Key("tool_args");
      protocol::json::write_raw(w, c.tool_args.value_or("{}"));
      w.EndObject();
    }
    w.EndArray();
    w.Key("duration_ms");
    w.Double(protocol::elapsed_ms(st.started, std::chrono::steady_clock::now()));
    w.Key("metadata");
    w.StartObject();
    w.Key("schema");
    w.String(protocol::agent_event_schema);
    w.Key("event_count");
    w.Int64(static_cast<int64_t>(st.events.size()));
    w.EndObject();
    w.Key("status");
    w.String(r.status);
    w.Key("cited_source_ids");
    w.StartArray();
    for (auto& id : r.cited_source_ids)
      w.String(id);
    w.EndArray();
    if (!r.error.empty()) {
      w.Key("error");
      w.String(r.error);
    }
  });
}

void finish(caf::stateful_actor<chat_relay_state>* self, const run_result& r) {
  auto& st = self->state;
  st.ended = true;
  if (st.streaming) {
    open_stream(self);
    st.stream->send(protocol::sse_done_frame());
    st.stream->finish();
  } else {
    st.exchange->respond(json_response(200, summary_json(st, r)));
  }
  self->quit();
}

caf::behavior chat_relay(caf::stateful_actor<chat_relay_state>* self, run_registry_actor registry,
                         std::shared_ptr<http_exchange> exchange, run_spec spec, bool cancel_on_disconnect) {
  auto& st = self->state;
  st.exchange = exchange;
  st.streaming = spec.request.stream;
  st.cancel_on_disconnect = cancel_on_disconnect;
  st.spec = spec;
  caf::actor me = caf::actor_cast<caf::actor>(self);
  exchange->on_disconnect([me] { caf::anon_send(me, disconnect_atom::value); });
  self->request(registry, caf::infinite, spawn_run_atom::value, std::move(spec), me)
    .then(
      [=](run_actor& run) {
        self->state.run = run;
        self->monitor(run);
        open_stream(self);
      },
      [=](caf::error& err) {
        self->state.exchange->respond(agent_error(code_of(err), message_of(err)));
        self->quit();
      });
  // A run that dies without its end event still gets a terminal error and `done` (AS-11, AS-90).
  self->set_down_handler([=](caf::down_msg&) {
    auto& s = self->state;
    if (s.ended)
      return;
    auto e = protocol::error_event(s.spec.run_id, s.spec.request.session_id, s.next_sequence,
                                   "Internal error: the run stopped unexpectedly", "internal_error");
    if (s.streaming) {
      open_stream(self);
      s.stream->send(protocol::to_sse_frame(e));
    }
    s.events.push_back(protocol::to_json(e));
    finish(self, {s.spec.run_id, s.spec.request.session_id, "failed", "", e.content, 0, s.next_sequence + 1, {}});
  });
  return {
    [=](event_atom, protocol::agent_event& e) {
      auto& s = self->state;
      s.next_sequence = e.sequence + 1;
      if (s.streaming) {
        open_stream(self);
        s.stream->send(protocol::to_sse_frame(e));
      } else {
        if (e.type == "tool_call")
          s.tool_calls.push_back(e);
        s.events.push_back(protocol::to_json(e));
      }
    },
    [=](run_end_atom, run_result& r) { finish(self, r); },
    [=](disconnect_atom) {
      auto& s = self->state;
      if (s.ended)
        return;
      if (s.cancel_on_disconnect) {
        spdlog::info("chat: client disconnected run_id={} action=cancel", s.spec.run_id);
        self->send(registry, cancel_atom::value, s.spec.run_id);
      } else {
        spdlog::info("chat: client disconnected run_id={} action=continue", s.spec.run_id);
      }
      s.ended = true;
      self->quit();
    },
  };
}

void handle_chat(const std::shared_ptr<shared_context>& ctx, http_request& req,
                 std::shared_ptr<http_exchange> ex) {
  admit_caller(*ctx->sys, ctx->info.store, ctx->info.config, req, protocol::request_kind::chat, std::move(ex),
               [ctx](run_spec spec, std::shared_ptr<http_exchange> ex) {
                 bool cancel = spec.request.on_disconnect.value_or(ctx->info.config.service.chat_on_disconnect)
                               != "continue";
                 ctx->sys->spawn(chat_relay, ctx->registry, std::move(ex), std::move(spec), cancel);
               });
}

void write_strings(writer& w, const std::vector<std::string>& items) {
  w.StartArray();
  for (auto& s : items)
    w.String(s);
  w.EndArray();
}

// AS-65: {name, alive, error?, transport, isolation, tool_count} per server.
void write_mcp_servers(writer& w, const tool_router& router) {
  w.StartArray();
  for (auto& s : router.servers()) {
    w.StartObject();
    w.Key("name");
    w.String(s.name);
    w.Key("alive");
    w.Bool(s.alive);
    if (!s.error.empty()) {
      w.Key("error");
      w.String(s.error);
    }
    w.Key("transport");
    w.String(s.transport);
    w.Key("isolation");
    w.String(s.isolation);
    w.Key("tool_count");
    w.Uint64(s.tools.size());
    w.EndObject();
  }
  w.EndArray();
}

std::string health_json() {
  return protocol::json::object([](writer& w) {
    w.Key("status");
    w.String("healthy");
    w.Key("agent_ready");
    w.Bool(true);
    w.Key("service_contract");
    w.String(protocol::agent_event_schema);
    w.Key("timestamp");
    w.String(protocol::iso_now());
  });
}

// The store as /ready reports it (CJ-11): the engine, whether it answered, its schema version.
struct store_report {
  protocol::store_health health;
  std::string error; // "" = it answered
};

void write_store(writer& w, const store_report& store) {
  w.Key("store");
  w.StartObject();
  w.Key("kind");
  w.String(store.health.kind);
  w.Key("reachable");
  w.Bool(store.error.empty());
  w.Key("schema_version");
  w.Int64(store.health.schema_version);
  if (!store.error.empty()) {
    w.Key("error");
    w.String(store.error);
  }
  w.EndObject();
}

std::string ready_json(const shared_context& ctx, const store_report& store) {
  auto& c = ctx.info.config;
  bool mcp_ready = ctx.info.tools->mcp_ready();
  auto& sandbox = ctx.info.sandbox;
  bool exec_ready = !sandbox || sandbox->unavailable().empty();
  // CJ-14, CJ-15: a draining node finishes what it has and a fenced one waits for the database; neither
  // takes new work.
  auto node_state = ctx.info.node ? ctx.info.node->current() : node_status::state::alive;
  bool node_working = node_state == node_status::state::alive;
  return protocol::json::object([&](writer& w) {
    w.Key("status");
    // AS-58: exec's state is reported on its own below; without its store the service cannot work.
    w.String(!store.error.empty() ? "unavailable" : mcp_ready && node_working ? "ready" : "degraded");
    w.Key("agent_ready");
    w.Bool(store.error.empty() && node_state != node_status::state::fenced);
    if (ctx.info.node) {
      w.Key("node");
      w.StartObject();
      w.Key("node_id");
      w.String(ctx.info.node->node_id());
      w.Key("state");
      w.String(to_string(node_state));
      w.EndObject();
    }
    w.Key("service_contract");
    w.String(protocol::agent_event_schema);
    write_store(w, store);
    w.Key("auth");
    w.StartObject();
    w.Key("required");
    w.Bool(!c.service.service_tokens.empty());
    w.Key("mode");
    w.String("service_token");
    w.Key("header");
    w.String("Authorization: Bearer <token>");
    w.Key("alternate_header");
    w.String("X-FastReAct-Service-Token");
    w.EndObject();
    w.Key("model");
    w.StartObject();
    w.Key("name");
    w.String(c.model.name);
    w.Key("provider");
    w.String(c.model.provider);
    w.Key("api_base_configured");
    w.Bool(!c.model.base_url.empty());
    w.Key("api_key_configured");
    w.Bool(!c.model.api_key.empty());
    w.EndObject();
    w.Key("multitenant");
    w.StartObject();
    w.Key("enabled");
    w.Bool(true);
    w.Key("workspaces_root");
    w.String(c.workspaces_root);
    w.EndObject();
    w.Key("exec");
    w.StartObject();
    w.Key("sandbox");
    w.String(sandbox && sandbox->enabled() ? "bwrap" : "none");
    w.Key("ready");
    w.Bool(exec_ready);
    if (!exec_ready) {
      w.Key("error");
      w.String(sandbox->unavailable());
    }
    w.EndObject();
    w.Key("mcp");
    w.StartObject();
    w.Key("ready");
    w.Bool(mcp_ready);
    w.Key("servers");
    write_mcp_servers(w, *ctx.info.tools);
    w.Key("tools");
    write_strings(w, ctx.info.tools->mcp_tool_names());
    w.EndObject();
    w.Key("timestamp");
    w.String(protocol::iso_now());
  });
}

std::string tools_json(const shared_context& ctx) {
  auto& router = *ctx.info.tools;
  auto all = router.tools();
  return protocol::json::object([&](writer& w) {
    w.Key("tools");
    w.StartArray();
    for (auto& t : all)
      w.String(t.name);
    w.EndArray();
    w.Key("mcp_tools");
    write_strings(w, router.mcp_tool_names());
    w.Key("tool_summaries");
    w.StartArray();
    for (auto& t : all) {
      w.StartObject();
      w.Key("name");
      w.String(t.name);
      w.Key("description");
      w.String(t.description);
      w.EndObject();
    }
    w.EndArray();
    w.Key("mcp_servers");
    write_mcp_servers(w, router);
  });
}

std::string root_json(const shared_context& ctx) {
  return protocol::json::object([&](writer& w) {
    w.Key("name");
    w.String("troupe");
    w.Key("version");
    w.String(ctx.info.version);
    w.Key("service_contract");
    w.String(protocol::agent_event_schema);
    w.Key("endpoints");
    w.StartObject();
    for (auto [name, path] :
         {std::pair{"health", "GET /health"}, {"ready", "GET /ready"}, {"tools", "GET /v1/tools"}, {"skills", "GET /v1/skills"},
          {"chat", "POST /v1/chat/completions"}, {"runs", "POST /v1/runs"}, {"run", "GET /v1/runs/{run_id}"},
          {"run_events", "GET /v1/runs/{run_id}/events"}, {"run_stream", "GET /v1/runs/{run_id}/stream"},
          {"run_cancel", "POST /v1/runs/{run_id}/cancel"}, {"traces", "GET /v1/traces"},
          {"metrics", "GET /v1/metrics"}, {"prometheus", "GET /metrics"}}) {
      w.Key(name);
      w.String(path);
    }
    w.EndObject();
  });
}

} // namespace

void add_agent_routes(router& routes, caf::actor_system& sys, run_registry_actor registry,
                      agent_service_info info) {
  auto skills = std::make_shared<const prompt_files>(info.config.skills.dirs);
  auto ctx = std::make_shared<shared_context>(shared_context{&sys, std::move(registry), std::move(info), skills});
  routes.add("GET", "/", [ctx](http_request&, std::shared_ptr<http_exchange> ex) {
    ex->respond(json_response(200, root_json(*ctx)));
  });
  routes.add("GET", "/health", [](http_request&, std::shared_ptr<http_exchange> ex) {
    ex->respond(json_response(200, health_json()));
  });
  routes.add("GET", "/ready", [ctx](http_request& req, std::shared_ptr<http_exchange> ex) {
    if (!ctx->authorized(req))
      return ex->respond(unauthorized());
    spawn_task(*ctx->sys, [ctx, ex](caf::event_based_actor* self) {
      auto answer = [ctx, ex](store_report store) {
        if (store.health.kind.empty())
          store.health.kind = ctx->info.config.postgres_url.empty() ? "sqlite" : "postgres";
        ex->respond(json_response(store.error.empty() ? 200 : 503, ready_json(*ctx, store)));
      };
      if (!ctx->info.store)
        return answer({{}, "no store"});
      self->request(ctx->info.store, std::chrono::seconds(2), ping_atom::value)
        .then([answer](protocol::store_health& h) { answer({std::move(h), {}}); },
              [answer](caf::error& err) { answer({{}, message_of(err)}); });
    });
  });
  routes.add("GET", "/v1/tools", [ctx](http_request&, std::shared_ptr<http_exchange> ex) {
    ex->respond(json_response(200, tools_json(*ctx)));
  });
  // AS-25: public, as GET /v1/tools is (AS-1): everyone sees the skills.dirs' skills; a caller the
  // request identifies (as POST /v1/chat/completions would) sees its own workspace's first, as its runs do.
  routes.add("GET", "/v1/skills", [ctx](http_request& req, std::shared_ptr<http_exchange> ex) {
    std::string workspace;
    auto caller = identify_caller(ctx->info.config, req);
    if (auto id = std::get_if<protocol::identity>(&caller))
      workspace = protocol::user_workspace_dir(ctx->info.config.workspaces_root, id->tenant_key, id->user_key);
    spawn_task(*ctx->sys, [ctx, ex, workspace](caf::event_based_actor* self) { // file reads: off the I/O thread
      auto listing = ctx->skills->skills(workspace);
      ex->respond(json_response(200, protocol::skills_list_json(listing.skills, listing.skipped)));
      self->quit();
    });
  });
  routes.add("POST", "/v1/chat/completions", [ctx](http_request& req, std::shared_ptr<http_exchange> ex) {
    handle_chat(ctx, req, std::move(ex));
  });
}

} // namespace troupe::io
