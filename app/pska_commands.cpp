#include "pska_commands.hpp"

#include "actors/errors.hpp"
#include "io/web_client.hpp"
#include "protocol/json.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>

#include <unistd.h>

namespace troupe::app {

namespace pska = protocol::pska;
namespace json = protocol::json;

pska_worker_settings pska_worker_settings_of(const protocol::config& cfg, uint16_t listener_port) {
  auto& w = cfg.pska_worker;
  pska_worker_settings s;
  s.job.pska_url = w.pska_url;
  s.job.troupe_url = w.troupe_url.empty()
                       ? "http://" + cfg.service.host + ":" + std::to_string(listener_port ? listener_port : cfg.service.port)
                       : w.troupe_url;
  while (!s.job.pska_url.empty() && s.job.pska_url.back() == '/')
    s.job.pska_url.pop_back();
  while (!s.job.troupe_url.empty() && s.job.troupe_url.back() == '/')
    s.job.troupe_url.pop_back();
  s.job.pska_service_token = w.pska_service_token;
  s.job.troupe_service_token = !w.troupe_service_token.empty()     ? w.troupe_service_token
                               : cfg.service.service_tokens.empty() ? std::string()
                                                                    : cfg.service.service_tokens.front();
  if (w.worker_id.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    s.job.worker_id = std::string("troupe-") + host + "-" + std::to_string(getpid());
  } else {
    s.job.worker_id = w.worker_id;
  }
  s.job.lease_seconds = w.lease_seconds;
  s.job.batch_limit = w.batch_limit;
  s.job.run_timeout_seconds = w.run_timeout_seconds;
  s.job.run_poll_seconds = w.run_poll_seconds;
  s.job.request_timeout_seconds = w.pska_timeout_seconds;
  for (auto& t : w.tenants)
    s.tenants.push_back({t.tenant_id, t.represented_user_id});
  if (s.tenants.empty())
    s.tenants.push_back({w.tenant_id, w.represented_user_id});
  s.poll_seconds = w.poll_seconds;
  s.max_concurrent = w.max_concurrent;
  s.max_per_tenant = w.max_per_tenant;
  s.drain_grace_seconds = w.drain_grace_seconds;
  s.from_troupe = w.source == "troupe";
  s.breaker_failures = w.breaker_failures;
  return s;
}

pska_worker_actor start_pska_worker(caf::actor_system& sys, const protocol::config& cfg, uint16_t listener_port) {
  auto settings = pska_worker_settings_of(cfg, listener_port);
  spdlog::info("pska worker: {} polling {} for {} tenant(s), runs through {}", settings.job.worker_id,
               settings.job.pska_url, settings.tenants.size(), settings.job.troupe_url);
  return spawn_pska_worker(sys, std::move(settings), io::spawn_web_client(sys));
}

int run_pska_worker(const protocol::config& cfg) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  caf::actor_system_config caf_cfg;
  caf::actor_system sys{caf_cfg};
  auto worker = start_pska_worker(sys, cfg, 0);
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("pska worker: signal {} received; draining", sig);
  drain_pska_worker(sys, worker, cfg.pska_worker.drain_grace_seconds);
  return 0;
}

void drain_pska_worker(caf::actor_system& sys, const pska_worker_actor& worker, double grace_seconds) {
  if (!worker)
    return;
  caf::scoped_actor self{sys};
  // The grace, then the cancelled jobs' fail calls (each bounded by its request timeout).
  auto limit = std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(grace_seconds + 90));
  self->request(worker, limit, drain_atom::value)
    .receive(
      [](pska_worker_stats& s) {
        spdlog::info("pska worker: drained; {} completed, {} failed, {} leases lost", s.completed, s.failed,
                     s.lease_lost);
      },
      [](caf::error& err) { spdlog::error("pska worker: drain: {}", message_of(err)); });
  caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
}

int run_pska_digest_once(const protocol::config& cfg, const std::string& job_id) {
  caf::actor_system_config caf_cfg;
  caf::actor_system sys{caf_cfg};
  auto settings = pska_worker_settings_of(cfg, 0);
  auto web = io::spawn_web_client(sys);
  caf::scoped_actor self{sys};
  auto& who = settings.tenants.front();
  auto url = settings.job.pska_url + "/jobs";
  auto timeout = std::chrono::seconds(static_cast<int64_t>(settings.job.request_timeout_seconds) + 5);
  auto print = [](const std::string& text) {
    std::printf("%s\n", text.c_str());
    std::fflush(stdout);
  };
  int code = 1;
  std::optional<pska::job> chosen;
  self->request(web, timeout, web_atom::value,
                web_request{"GET", url, pska::pska_headers(who, settings.job.pska_service_token), "",
                            settings.job.request_timeout_seconds})
    .receive(
      [&](web_response& r) {
        if (!pska::succeeded(r.status))
          return print(pska::fail_body(pska::step_failure("GET", url, r.status, r.body)));
        auto ready = pska::ready_jobs(r.body, std::chrono::duration<double>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count());
        if (!ready)
          return print(pska::fail_body("BadAnswer: GET " + url + " answered no job list"));
        if (!job_id.empty())
          chosen = pska::named_job(r.body, job_id);
        else if (!ready->empty())
          chosen = ready->front();
        if (!chosen) {
          code = 0;
          print(R"({"ok":true,"processed":0,"reason":"no_ready_digest_job"})");
        }
      },
      [&](caf::error& err) { print(pska::fail_body("TransportError: GET " + url + " failed: " + message_of(err))); });
  if (!chosen) {
    self->send_exit(web, caf::exit_reason::user_shutdown);
    return code;
  }
  auto job = spawn_digest_job(sys, settings.job, who, *chosen, web);
  self->request(job, caf::infinite, start_atom::value)
    .receive(
      [&](digest_job_outcome& o) {
        if (o.what == digest_job_outcome::kind::completed) {
          code = 0;
          print(json::object([&](json::writer& w) {
            w.Key("ok");
            w.Bool(true);
            w.Key("processed");
            w.Int(1);
            w.Key("job_id");
            w.String(o.job_id.c_str());
            w.Key("complete");
            json::write_raw(w, o.message);
          }));
        } else {
          print(json::object([&](json::writer& w) {
            w.Key("ok");
            w.Bool(false);
            w.Key("job_id");
            w.String(o.job_id.c_str());
            w.Key("error");
            w.String(o.message.c_str());
          }));
        }
      },
      [&](caf::error& err) { print(pska::fail_body(message_of(err))); });
  self->send_exit(web, caf::exit_reason::user_shutdown);
  return code;
}

} // namespace troupe::app
