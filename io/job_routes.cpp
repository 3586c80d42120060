#include "io/job_routes.hpp"

#include "actors/errors.hpp"
#include "io/agent_http.hpp"
#include "io/route_ask.hpp"
#include "protocol/jobs.hpp"
#include "protocol/json.hpp"
#include "protocol/tenant_scope.hpp"

#include <caf/all.hpp>

#include <atomic>
#include <mutex>
#include <set>

namespace troupe::io {

namespace {

namespace jobs = protocol::jobs;
namespace json = protocol::json;

struct context {
  caf::actor_system* sys;
  job_routes_context ports;
  protocol::config config;
  std::atomic<uint64_t> next_waiter{1};
};

// Who calls, and whose jobs it may see (AS-84).
struct caller {
  protocol::identity id;
  job_scope scope;
};

using job_handler = std::function<void(http_request&, std::shared_ptr<http_exchange>, const caller&)>;

// Every jobs route: the caller is identified by the request's head before the body is read (AS-2).
http_handler with_caller(const std::shared_ptr<context>& ctx, job_handler handler) {
  return [ctx, handler = std::move(handler)](http_request& req, std::shared_ptr<http_exchange> ex) {
    auto who = identify_caller(ctx->config, req);
    if (auto refused = std::get_if<http_response>(&who))
      return ex->respond(std::move(*refused));
    auto& id = std::get<protocol::identity>(who);
    caller c{id, protocol::scope_of(id)};
    handler(req, std::move(ex), c);
  };
}

const char* reason_of(job_fence fence) {
  switch (fence) {
    case job_fence::stale_lease: return "stale_lease";
    case job_fence::cancelled: return "cancelled";
    case job_fence::not_leased: return "not_leased";
    default: return "not_found";
  }
}

// CJ-38: a fenced operation's refusal; nullopt when it took effect (or had before).
std::optional<http_response> refusal(const job_answer& a) {
  switch (a.fence) {
    case job_fence::done:
    case job_fence::unchanged: return std::nullopt;
    case job_fence::not_found: return agent_error(errc::not_found, "Job not found");
    case job_fence::not_retryable:
      return agent_error(errc::conflict, "Only a dead or cancelled job can be retried; this job is " + a.job.status);
    default:
      return json_response(409, std::string(R"({"detail":"Job lease is no longer held","reason":")") +
                                  reason_of(a.fence) + "\"}");
  }
}

template <class Render>
auto answered(Render render) {
  return [render](job_answer& a) {
    if (auto refused = refusal(a))
      return std::move(*refused);
    return render(a.job);
  };
}

http_response job_response(const job_record& j) {
  return json_response(200, jobs::job_json(j));
}

jobs::enqueue_limits limits_of(const protocol::config& config) {
  return {config.jobs.max_payload_bytes};
}

// New jobs of these types may be ready: this node's waiters claim again, and the others hear of it
// (CJ-10, CJ-33).
void announce_jobs(const context& ctx, const std::set<std::string>& types) {
  for (auto& type : types) {
    caf::anon_send(ctx.ports.waiters, wake_atom::value, type);
    if (ctx.ports.notifier)
      caf::anon_send(ctx.ports.notifier, notify_atom::value, std::string(jobs_channel), type, type);
  }
}

// Completions that created follow-up runs start them here and on the other nodes (CJ-40).
void start_follow_ups(const context& ctx, const std::vector<job_answer>& answers) {
  for (auto& a : answers)
    if (a.fence == job_fence::done && a.job.on_complete_run_id) {
      caf::anon_send(ctx.ports.registry, schedule_atom::value);
      announce_runs(ctx.ports.notifier);
      return;
    }
}

void enqueue(const std::shared_ptr<context>& ctx, http_request& req, std::shared_ptr<http_exchange> ex,
             const caller& who) {
  auto parsed = jobs::parse_enqueue(req.body, limits_of(ctx->config));
  if (auto err = std::get_if<protocol::request_error>(&parsed))
    return ex->respond(agent_error(err->what));
  auto& request = std::get<jobs::enqueue_request>(parsed);
  for (auto& job : request.jobs) {
    if (job.tenant_key && !who.scope.sees(*job.tenant_key))
      return ex->respond(agent_error(errc::forbidden, "Job tenant must be the caller's tenant"));
    if (!job.tenant_key)
      job.tenant_key = who.id.tenant_key;
  }
  bool batch = request.batch;
  auto on_enqueued = [ctx, batch](job_enqueued& done) {
    std::set<std::string> types;
    int64_t created = 0;
    for (std::size_t i = 0; i < done.jobs.size(); ++i)
      if (done.created[i]) {
        types.insert(done.jobs[i].type);
        ++created;
      }
    announce_jobs(*ctx, types);
    if (!batch) {
      auto r = json_response(created ? 201 : 200, jobs::job_json(done.jobs.front()));
      if (!created)
        r.headers.emplace_back("Idempotent-Replayed", "true");
      return r;
    }
    std::string body = "{\"jobs\":[";
    for (std::size_t i = 0; i < done.jobs.size(); ++i)
      body += (i ? "," : "") + jobs::job_json(done.jobs[i]);
    body += "],\"created\":" + std::to_string(created) +
            ",\"duplicates\":" + std::to_string(static_cast<int64_t>(done.jobs.size()) - created) + "}";
    return json_response(200, std::move(body));
  };
  ask<job_enqueued>(*ctx->sys, std::move(ex), ctx->ports.store, on_enqueued, job_enqueue_atom::value,
                    job_enqueue{std::move(request.jobs), who.id.user_key});
}

// CJ-33: a lease's answer reaches a client that is still there, or its jobs go back uncharged.
struct lease_call {
  std::mutex mutex;
  bool gone = false;
  job_release handed; // the jobs answered, while the answer may still be unwritten
};

void release(const context& ctx, job_release r) {
  if (!r.leases.empty())
    caf::anon_send(ctx.ports.store, job_release_atom::value, std::move(r));
}

void lease(const std::shared_ptr<context>& ctx, http_request& req, std::shared_ptr<http_exchange> ex,
           const caller& who) {
  auto parsed = jobs::parse_lease(req.body);
  if (auto err = std::get_if<protocol::request_error>(&parsed))
    return ex->respond(agent_error(err->what));
  auto& want = std::get<jobs::lease_request>(parsed);
  job_wait wait;
  for (auto& tenant : want.tenant_keys)
    if (!who.scope.sees(tenant))
      return ex->respond(agent_error(errc::forbidden, "Job tenant must be the caller's tenant"));
  wait.claim.tenants = who.scope.tenant ? std::vector<std::string>{*who.scope.tenant} : want.tenant_keys;
  wait.claim.worker_id = want.worker_id;
  wait.claim.types = want.types;
  wait.claim.max_jobs = want.max_jobs;
  wait.claim.lease_seconds = want.lease_seconds;
  wait.wait_seconds = static_cast<double>(want.wait_seconds);
  wait.waiter = ctx->next_waiter++;
  auto call = std::make_shared<lease_call>();
  ex->on_disconnect([ctx, call, waiter = wait.waiter] {
    std::lock_guard<std::mutex> hold(call->mutex);
    call->gone = true;
    caf::anon_send(ctx->ports.waiters, leave_atom::value, waiter);
    release(*ctx, std::move(call->handed));
  });
  auto timeout = std::chrono::seconds(want.wait_seconds + 60);
  spawn_task(*ctx->sys, [ctx, ex, call, wait = std::move(wait), timeout](caf::event_based_actor* self) {
    self->request(ctx->ports.waiters, timeout, job_lease_atom::value, wait)
      .then(
        [ctx, ex, call](job_claim& got) {
          std::string body = "{\"jobs\":[";
          job_release handed;
          for (std::size_t i = 0; i < got.jobs.size(); ++i) {
            body += (i ? "," : "") + jobs::leased_job_json(got.jobs[i]);
            handed.leases.emplace_back(got.jobs[i].id, got.jobs[i].lease_token);
          }
          body += "]}";
          {
            std::lock_guard<std::mutex> hold(call->mutex);
            if (call->gone)
              return release(*ctx, std::move(handed));
            call->handed = std::move(handed);
          }
          ex->respond(json_response(200, std::move(body)));
        },
        [ex](caf::error& err) {
          auto r = error_response(err);
          if (code_of(err) == errc::rate_limited)
            r.headers.emplace_back("Retry-After", "1");
          ex->respond(std::move(r));
        });
  });
}

void complete_batch(const std::shared_ptr<context>& ctx, http_request& req, std::shared_ptr<http_exchange> ex,
                    const caller& who) {
  auto parsed = jobs::parse_completions(req.body, limits_of(ctx->config));
  if (auto err = std::get_if<protocol::request_error>(&parsed))
    return ex->respond(agent_error(err->what));
  job_completions c;
  for (auto& item : std::get<std::vector<jobs::completion_request>>(parsed))
    c.items.push_back({item.id, item.lease_token, item.result});
  c.scope = who.scope;
  c.follow_up.run_max_attempts = ctx->config.service.run_max_attempts;
  auto ids = std::make_shared<std::vector<std::string>>();
  for (auto& item : c.items)
    ids->push_back(item.id);
  auto on_done = [ctx, ids](std::vector<job_answer>& answers) {
    start_follow_ups(*ctx, answers);
    std::string body = "{\"results\":[";
    for (std::size_t i = 0; i < answers.size(); ++i) {
      auto& a = answers[i];
      body += (i ? ",{\"id\":" : "{\"id\":") + json::quote((*ids)[i]);
      if (a.fence == job_fence::done || a.fence == job_fence::unchanged)
        body += ",\"status\":200,\"job\":" + jobs::job_json(a.job) + "}";
      else
        body += std::string(",\"status\":") + (a.fence == job_fence::not_found ? "404" : "409") +
                ",\"reason\":\"" + reason_of(a.fence) + "\"}";
    }
    return json_response(200, body + "]}");
  };
  ask<std::vector<job_answer>>(*ctx->sys, std::move(ex), ctx->ports.store, on_done, job_complete_atom::value,
                               std::move(c));
}

void complete_one(const std::shared_ptr<context>& ctx, http_request& req, std::shared_ptr<http_exchange> ex,
                  const caller& who) {
  auto parsed = jobs::parse_completion(req.body, limits_of(ctx->config));
  if (auto err = std::get_if<protocol::request_error>(&parsed))
    return ex->respond(agent_error(err->what));
  auto& item = std::get<jobs::completion_request>(parsed);
  job_completions c;
  c.items.push_back({req.params["id"], item.lease_token, item.result});
  c.scope = who.scope;
  c.follow_up.run_max_attempts = ctx->config.service.run_max_attempts;
  auto on_done = [ctx](std::vector<job_answer>& answers) {
    start_follow_ups(*ctx, answers);
    return answered(job_response)(answers.front());
  };
  ask<std::vector<job_answer>>(*ctx->sys, std::move(ex), ctx->ports.store, on_done, job_complete_atom::value,
                               std::move(c));
}

void heartbeat(const std::shared_ptr<context>& ctx, http_request& req, std::shared_ptr<http_exchange> ex,
               const caller& who) {
  auto parsed = jobs::parse_heartbeat(req.body);
  if (auto err = std::get_if<protocol::request_error>(&parsed))
    return ex->respond(agent_error(err->what));
  auto& beat = std::get<jobs::heartbeat_request>(parsed);
  job_heartbeat h{req.params["id"], beat.lease_token, beat.lease_seconds, beat.progress, who.scope};
  ask<job_answer>(*ctx->sys, std::move(ex), ctx->ports.store,
                  answered([](const job_record& j) { return json_response(200, jobs::heartbeat_json(j)); }),
                  job_beat_atom::value, std::move(h));
}

void fail(const std::shared_ptr<context>& ctx, http_request& req, std::shared_ptr<http_exchange> ex,
          const caller& who) {
  auto parsed = jobs::parse_failure(req.body);
  if (auto err = std::get_if<protocol::request_error>(&parsed))
    return ex->respond(agent_error(err->what));
  auto& f = std::get<jobs::failure_request>(parsed);
  job_failure failure{req.params["id"], f.lease_token, f.error, f.retryable, f.retry_after_seconds, who.scope};
  auto& j = ctx->config.jobs;
  ask<job_answer>(*ctx->sys, std::move(ex), ctx->ports.store, answered(job_response), job_fail_atom::value,
                  std::move(failure), job_backoff{j.retry_base_seconds, j.retry_max_seconds});
}

void list(const std::shared_ptr<context>& ctx, http_request& req, std::shared_ptr<http_exchange> ex,
          const caller& who) {
  auto parsed = jobs::parse_list(req.query);
  if (auto err = std::get_if<protocol::request_error>(&parsed))
    return ex->respond(agent_error(err->what));
  job_query q{std::get<jobs::list_request>(parsed), who.scope};
  if (!q.want.tenant_key.empty() && !who.scope.sees(q.want.tenant_key))
    return ex->respond(agent_error(errc::forbidden, "Job tenant must be the caller's tenant"));
  auto limit = q.want.limit;
  ask<job_page>(
    *ctx->sys, std::move(ex), ctx->ports.store,
    [limit](job_page& page) { return json_response(200, jobs::jobs_page_json(page.jobs, limit, page.has_more)); },
    job_list_atom::value, std::move(q));
}

} // namespace

void add_job_routes(router& routes, caf::actor_system& sys, job_routes_context ports, const protocol::config& config) {
  auto ctx = std::make_shared<context>();
  ctx->sys = &sys;
  ctx->ports = std::move(ports);
  ctx->config = config;
  auto route = [&](const char* method, const char* path,
                   void (*fn)(const std::shared_ptr<context>&, http_request&, std::shared_ptr<http_exchange>,
                              const caller&)) {
    routes.add(method, path, with_caller(ctx, [ctx, fn](http_request& req, std::shared_ptr<http_exchange> ex,
                                                        const caller& who) { fn(ctx, req, std::move(ex), who); }));
  };
  // Paths with a fixed last segment come before /v1/jobs/{id}: the first match wins.
  route("POST", "/v1/jobs", enqueue);
  route("POST", "/v1/jobs/lease", lease);
  route("POST", "/v1/jobs/complete", complete_batch);
  route("GET", "/v1/jobs", list);
  route("GET", "/v1/jobs/stats", [](const std::shared_ptr<context>& ctx, http_request&,
                                    std::shared_ptr<http_exchange> ex, const caller& who) {
    ask<job_counts>(
      *ctx->sys, std::move(ex), ctx->ports.store,
      [](job_counts& counts) { return json_response(200, jobs::job_stats_json(counts)); }, job_stats_atom::value,
      who.scope);
  });
  route("GET", "/v1/jobs/{id}", [](const std::shared_ptr<context>& ctx, http_request& req,
                                   std::shared_ptr<http_exchange> ex, const caller& who) {
    ask<job_answer>(*ctx->sys, std::move(ex), ctx->ports.store, answered(job_response), job_get_atom::value,
                    req.params["id"], who.scope);
  });
  route("POST", "/v1/jobs/{id}/heartbeat", heartbeat);
  route("POST", "/v1/jobs/{id}/complete", complete_one);
  route("POST", "/v1/jobs/{id}/fail", fail);
  route("POST", "/v1/jobs/{id}/cancel", [](const std::shared_ptr<context>& ctx, http_request& req,
                                           std::shared_ptr<http_exchange> ex, const caller& who) {
    ask<job_answer>(*ctx->sys, std::move(ex), ctx->ports.store, answered(job_response), job_cancel_atom::value,
                    req.params["id"], who.scope);
  });
  route("POST", "/v1/jobs/{id}/retry", [](const std::shared_ptr<context>& ctx, http_request& req,
                                          std::shared_ptr<http_exchange> ex, const caller& who) {
    auto on_retried = [ctx](job_answer& a) {
      if (a.fence == job_fence::done)
        announce_jobs(*ctx, {a.job.type});
      return answered(job_response)(a);
    };
    ask<job_answer>(*ctx->sys, std::move(ex), ctx->ports.store, on_retried, job_retry_atom::value, req.params["id"],
                    who.scope);
  });
}

} // namespace troupe::io
