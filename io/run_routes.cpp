#include "io/run_routes.hpp"

#include "actors/errors.hpp"
#include "io/agent_http.hpp"
#include "io/route_ask.hpp"
#include "io/run_stream.hpp"
#include "protocol/chat_request.hpp"
#include "protocol/metrics.hpp"
#include "protocol/runs.hpp"

#include <caf/all.hpp>


namespace troupe::io {

namespace {

struct context {
  caf::actor_system* sys;
  run_registry_actor registry;
  store_actor store;
  std::shared_ptr<node_metrics> metrics;
  protocol::config config;
  cluster_peers_actor peers;
};

http_response snapshot(const run_record& r) {
  return json_response(200, protocol::run_snapshot_json(r));
}

// AS-74: Last-Event-ID wins over ?after_sequence=; -1 without either.
std::variant<int64_t, http_response> stream_cursor(const http_request& req) {
  auto& header = req.header("last-event-id");
  if (!header.empty()) {
    auto q = protocol::parse_page_query("", header);
    if (std::holds_alternative<protocol::request_error>(q))
      return agent_error(errc::bad_request, "Last-Event-ID must be an integer");
    return std::get<protocol::page_query>(q).after_sequence;
  }
  auto it = req.query.find("after_sequence");
  auto q = protocol::parse_page_query("", it == req.query.end() ? "" : it->second);
  if (auto err = std::get_if<protocol::request_error>(&q))
    return agent_error(err->what);
  return std::get<protocol::page_query>(q).after_sequence;
}

// On PostgreSQL another node may run the attempts, and a stream then reads their events from the
// store (CJ-27); an embedded store's one process runs every attempt and feeds the stream itself.
caf::timespan stream_tail(const protocol::config& config) {
  if (config.postgres_url.empty())
    return caf::timespan{0};
  return std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(config.cluster.tail_poll_seconds));
}

std::string query_value(const http_request& req, const char* key) {
  auto it = req.query.find(key);
  return it == req.query.end() ? std::string() : it->second;
}

void events_page(const std::shared_ptr<context>& ctx, http_request& req, std::shared_ptr<http_exchange> ex,
                 const protocol::tenant_scope& scope, bool trace) {
  auto q = protocol::parse_page_query(query_value(req, "limit"), query_value(req, "after_sequence"));
  if (auto err = std::get_if<protocol::request_error>(&q))
    return ex->respond(agent_error(err->what));
  auto page = std::get<protocol::page_query>(q);
  // AS-55: the trace variant has its own 404; AS-84: another tenant's run has the same.
  auto not_found = trace ? "Trace events not found" : "Run not found";
  auto on_page = [page, trace, scope, not_found](run_events_page& p) {
    if (!scope.sees(p.run.tenant_key))
      return agent_error(errc::not_found, not_found);
    return json_response(200, protocol::events_page_json(p.run, page, p.events, !trace));
  };
  ask_as<run_events_page>(*ctx->sys, std::move(ex), trace ? not_found : nullptr, ctx->store, on_page,
                          events_atom::value, req.params["run_id"], page.after_sequence, page.limit);
}

// AS-84: `next` goes on only when the run is the caller's tenant's; another tenant's run is
// `not_found`, exactly like a missing one. The operator, who sees every tenant, goes on at once.
void when_visible(const std::shared_ptr<context>& ctx, std::shared_ptr<http_exchange> ex,
                  const protocol::tenant_scope& scope, std::string run_id, const char* not_found,
                  std::function<void(std::shared_ptr<http_exchange>)> next) {
  if (!scope.tenant)
    return next(std::move(ex));
  spawn_task(*ctx->sys, [ex = std::move(ex), store = ctx->store, scope, run_id = std::move(run_id), not_found,
                         next = std::move(next)](caf::event_based_actor* self) {
    self->request(store, ask_timeout, get_run_atom::value, run_id)
      .then(
        [=](run_record& r) {
          if (!scope.sees(r.tenant_key))
            return ex->respond(agent_error(errc::not_found, not_found));
          next(ex);
        },
        [=](caf::error& err) {
          ex->respond(code_of(err) == errc::not_found ? agent_error(errc::not_found, not_found) : error_response(err));
        });
  });
}

// The node's live attempts and the store's counts, rendered by `render`.
template <class Render>
void metrics_page(const std::shared_ptr<context>& ctx, std::shared_ptr<http_exchange> ex, bool detailed,
                  Render render) {
  ctx->sys->spawn(
    [](caf::event_based_actor* self, std::shared_ptr<http_exchange> ex, std::shared_ptr<context> ctx, bool detailed,
       Render render) {
      self->request(ctx->registry, ask_timeout, count_atom::value)
        .then(
          [=](uint64_t live) {
            self->request(ctx->store, ask_timeout, stats_atom::value, detailed, protocol::tenant_scope{})
              .then([=](protocol::store_stats& stats) { ex->respond(render(stats, live)); },
                    [=](caf::error& err) { ex->respond(error_response(err)); });
          },
          [=](caf::error& err) { ex->respond(error_response(err)); });
    },
    std::move(ex), ctx, detailed, std::move(render));
}

// GET /v1/metrics for a caller confined to its tenant (AS-84): that tenant's counts only, without the
// store section and its paths. The node's live attempts span tenants, so its live_count is the
// tenant's running runs, wherever they run.
void tenant_metrics(const std::shared_ptr<context>& ctx, std::shared_ptr<http_exchange> ex,
                    const protocol::tenant_scope& scope) {
  ask<protocol::store_stats>(
    *ctx->sys, std::move(ex), ctx->store,
    [](protocol::store_stats& stats) {
      auto running = stats.run_status_counts.find("running");
      uint64_t live = running == stats.run_status_counts.end() ? 0 : static_cast<uint64_t>(running->second);
      return json_response(200, protocol::metrics_json(stats, live, false));
    },
    stats_atom::value, true, scope);
}

// AS-55: the trace, else the run's snapshot, else 404.
void trace_page(const std::shared_ptr<context>& ctx, std::shared_ptr<http_exchange> ex, std::string run_id) {
  ctx->sys->spawn(
    [](caf::event_based_actor* self, std::shared_ptr<http_exchange> ex, store_actor store, std::string run_id) {
      self->request(store, ask_timeout, get_trace_atom::value, run_id)
        .then([=](std::string& trace) { ex->respond(json_response(200, "{\"trace\":" + trace + "}")); },
              [=](caf::error&) {
                self->request(store, ask_timeout, get_run_atom::value, run_id)
                  .then(
                    [=](run_record& r) {
                      ex->respond(json_response(200, "{\"trace\":" + protocol::run_snapshot_json(r) + "}"));
                    },
                    [=](caf::error& err) {
                      ex->respond(code_of(err) == errc::not_found ? agent_error(errc::not_found, "Trace not found")
                                                                  : error_response(err));
                    });
              });
    },
    std::move(ex), ctx->store, std::move(run_id));
}

bool valid_status(const std::string& s) {
  return s.empty() || s == "queued" || s == "running" || protocol::is_terminal(s);
}

} // namespace

void add_run_routes(router& routes, caf::actor_system& sys, run_registry_actor registry, store_actor store,
                    std::shared_ptr<node_metrics> metrics, const protocol::config& config, cluster_peers_actor peers) {
  auto ctx = std::make_shared<context>(
    context{&sys, std::move(registry), std::move(store), std::move(metrics), config, std::move(peers)});
  // An operator endpoint: the service token applies (AS-3), and the store must exist.
  auto guarded = [ctx](auto handler) {
    return [ctx, handler](http_request& req, std::shared_ptr<http_exchange> ex) {
      if (!operator_allowed(ctx->config, req))
        return ex->respond(unauthorized());
      if (!ctx->store)
        return ex->respond(agent_error(errc::unavailable, "Durable run store not available"));
      handler(req, std::move(ex));
    };
  };
  // A control endpoint (AS-84): the service token sees every tenant; a caller identified per
  // auth.mode sees its own tenant's records. The store must exist.
  auto scoped = [ctx](auto handler) {
    return [ctx, handler](http_request& req, std::shared_ptr<http_exchange> ex) {
      auto scope = control_scope(ctx->config, req);
      if (auto refused = std::get_if<http_response>(&scope))
        return ex->respond(std::move(*refused));
      if (!ctx->store)
        return ex->respond(agent_error(errc::unavailable, "Durable run store not available"));
      handler(req, std::move(ex), std::get<protocol::tenant_scope>(scope));
    };
  };
  using scope_ref = const protocol::tenant_scope&;
  // A caller endpoint (AS-1): admitted per auth.mode, not by the operator token alone.
  routes.add("POST", "/v1/runs", [ctx](http_request& req, std::shared_ptr<http_exchange> ex) {
    if (!ctx->store)
      return ex->respond(agent_error(errc::unavailable, "Durable run store not available"));
    admit_caller(*ctx->sys, ctx->store, ctx->config, req, protocol::request_kind::background_run, std::move(ex),
                 [ctx](run_spec spec, std::shared_ptr<http_exchange> ex) {
                   spec.run_kind = "background";
                   ask<run_record>(*ctx->sys, std::move(ex), ctx->registry, snapshot, submit_atom::value,
                                   std::move(spec));
                 });
  });
  routes.add("GET", "/v1/runs", scoped([ctx](http_request& req, auto ex, scope_ref scope) {
    auto limit = protocol::parse_list_limit(query_value(req, "limit"));
    if (auto err = std::get_if<protocol::request_error>(&limit))
      return ex->respond(agent_error(err->what));
    auto status = query_value(req, "status");
    if (!valid_status(status))
      return ex->respond(
        agent_error(errc::bad_request, "status must be one of queued, running, completed, failed, cancelled"));
    auto n = std::get<int64_t>(limit);
    ask<run_list>(
      *ctx->sys, std::move(ex), ctx->store,
      [n](run_list& l) { return json_response(200, protocol::runs_list_json(l.runs, l.total_count, n)); },
      list_runs_atom::value, status, n, scope);
  }));
  routes.add("GET", "/v1/runs/{run_id}", scoped([ctx](http_request& req, auto ex, scope_ref scope) {
    ask<run_record>(
      *ctx->sys, std::move(ex), ctx->store,
      [scope](run_record& r) {
        return scope.sees(r.tenant_key) ? snapshot(r) : agent_error(errc::not_found, "Run not found");
      },
      get_run_atom::value, req.params["run_id"]);
  }));
  routes.add("GET", "/v1/runs/{run_id}/events", scoped([ctx](http_request& req, auto ex, scope_ref scope) {
    events_page(ctx, req, std::move(ex), scope, false);
  }));
  routes.add("POST", "/v1/runs/{run_id}/cancel", scoped([ctx](http_request& req, auto ex, scope_ref scope) {
    auto run_id = req.params["run_id"];
    when_visible(ctx, std::move(ex), scope, run_id, "Run not found", [ctx, run_id](std::shared_ptr<http_exchange> ex) {
      ask<run_record>(*ctx->sys, std::move(ex), ctx->registry, snapshot, cancel_atom::value, run_id);
    });
  }));
  routes.add("GET", "/v1/runs/{run_id}/stream", scoped([ctx](http_request& req, auto ex, scope_ref scope) {
    auto cursor = stream_cursor(req);
    if (auto err = std::get_if<http_response>(&cursor))
      return ex->respond(std::move(*err));
    auto run_id = req.params["run_id"];
    when_visible(ctx, std::move(ex), scope, run_id, "Run not found",
                 [ctx, run_id, from = std::get<int64_t>(cursor)](std::shared_ptr<http_exchange> ex) {
                   spawn_run_stream(*ctx->sys, std::move(ex), ctx->registry, ctx->store, run_id, from,
                                    stream_tail(ctx->config), ctx->peers);
                 });
  }));
  routes.add("GET", "/v1/traces", scoped([ctx](http_request& req, auto ex, scope_ref scope) {
    auto limit = protocol::parse_list_limit(query_value(req, "limit"));
    if (auto err = std::get_if<protocol::request_error>(&limit))
      return ex->respond(agent_error(err->what));
    auto n = std::get<int64_t>(limit);
    ask<trace_list>(
      *ctx->sys, std::move(ex), ctx->store,
      [n](trace_list& l) { return json_response(200, protocol::traces_list_json(l.traces, l.total_count, n)); },
      list_traces_atom::value, query_value(req, "session_id"), n, scope);
  }));
  routes.add("GET", "/v1/traces/{run_id}", scoped([ctx](http_request& req, auto ex, scope_ref scope) {
    when_visible(ctx, std::move(ex), scope, req.params["run_id"], "Trace not found",
                 [ctx, run_id = req.params["run_id"]](auto ex) { trace_page(ctx, std::move(ex), run_id); });
  }));
  routes.add("GET", "/v1/metrics", scoped([ctx](http_request&, auto ex, scope_ref scope) {
    if (scope.tenant)
      return tenant_metrics(ctx, std::move(ex), scope);
    metrics_page(ctx, std::move(ex), true, [](const protocol::store_stats& stats, uint64_t live) {
      return json_response(200, protocol::metrics_json(stats, live, true));
    });
  }));
  routes.add("GET", "/metrics", guarded([ctx](http_request&, std::shared_ptr<http_exchange> ex) {
    // A scrape skips the counts that parse stored JSON or read every page: it runs on the store's thread.
    metrics_page(ctx, std::move(ex), false, [metrics = ctx->metrics](const protocol::store_stats& stats, uint64_t live) {
      http_response r;
      r.content_type = "text/plain; version=0.0.4";
      r.body = metrics->prometheus_text(stats, live);
      return r;
    });
  }));
  routes.add("GET", "/v1/traces/{run_id}/events", scoped([ctx](http_request& req, auto ex, scope_ref scope) {
    events_page(ctx, req, std::move(ex), scope, true);
  }));
}

} // namespace troupe::io
