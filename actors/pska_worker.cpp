#include "actors/pska_worker.hpp"

#include "actors/errors.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace troupe {

namespace {

namespace pska = protocol::pska;

struct worker_state {
  static inline const char* name = "pska_worker";
  pska_worker_settings settings;
  web_port_actor web;
  std::set<std::string> in_hand;           // tenant + job id of the jobs this worker carries
  std::map<std::size_t, int64_t> per_tenant; // running jobs per tenant index
  std::size_t next_tenant = 0;               // whose turn it is to fill a slot
  pska_worker_stats stats;
  bool polling = false;
  std::map<std::string, digest_job_actor> jobs; // by key_of
  // Source "troupe": the troupe job each PSKA job in hand came from, by PSKA job id.
  struct troupe_lease {
    std::string id;
    std::string token;
    pska::tenant who;
  };
  std::map<std::string, troupe_lease> troupe_leases;
  pska::breaker pska_breaker;
  pska::breaker troupe_breaker;
  std::optional<caf::typed_response_promise<pska_worker_stats>> drained; // set: draining
};

using pointer = pska_worker_actor::stateful_pointer<worker_state>;

std::string key_of(std::size_t tenant, const std::string& job_id) {
  return std::to_string(tenant) + '\0' + job_id;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// `tenant`: the index of the tenant in settings.tenants, or no_tenant for a troupe job's, `who`.
constexpr std::size_t no_tenant = static_cast<std::size_t>(-1);

// CJ-46: a job starts only while neither side's breaker holds it back.
bool admitting(pointer self) {
  auto now = now_seconds();
  auto& st = self->state;
  bool pska_ok = st.pska_breaker.admits(now);
  return st.troupe_breaker.admits(now) && pska_ok;
}

void start_job(pointer self, std::size_t tenant, pska::job job, const pska::tenant& who) {
  auto& st = self->state;
  st.in_hand.insert(key_of(tenant, job.id));
  ++st.per_tenant[tenant];
  ++st.stats.running;
  auto key = key_of(tenant, job.id);
  auto actor = spawn_digest_job(self->system(), st.settings.job, who, std::move(job),
                                caf::actor_cast<web_port_actor>(self));
  st.jobs.emplace(key, actor);
  self->request(actor, caf::infinite, start_atom::value)
    .then([=](digest_job_outcome& o) { self->send(self, run_end_atom::value, std::move(o), int64_t(tenant)); },
          [=](caf::error& err) {
            self->send(self, run_end_atom::value,
                       digest_job_outcome{digest_job_outcome::kind::failed, "", message_of(err), 0}, int64_t(tenant));
          });
}

// CJ-43: the tenants' ready jobs, asked one tenant after the other (through the breakers, as every
// request of the worker goes); free slots go round-robin.
void poll(pointer self, std::size_t tenant, std::map<std::size_t, std::vector<pska::job>> ready) {
  auto& st = self->state;
  if (tenant == st.settings.tenants.size()) {
    // Deal: each tenant in turn offers its next job until the slots are full or no one has one.
    bool dealt = true;
    while (dealt && st.stats.running < st.settings.max_concurrent) {
      dealt = false;
      for (std::size_t i = 0; i < st.settings.tenants.size() && st.stats.running < st.settings.max_concurrent; ++i) {
        auto t = (st.next_tenant + i) % st.settings.tenants.size();
        auto& jobs = ready[t];
        while (!jobs.empty() && st.in_hand.count(key_of(t, jobs.front().id)))
          jobs.erase(jobs.begin());
        if (jobs.empty() || st.per_tenant[t] >= st.settings.max_per_tenant)
          continue;
        start_job(self, t, std::move(jobs.front()), st.settings.tenants[t]);
        jobs.erase(jobs.begin());
        dealt = true;
      }
      st.next_tenant = (st.next_tenant + 1) % st.settings.tenants.size();
    }
    st.polling = false;
    return;
  }
  auto& who = st.settings.tenants[tenant];
  auto url = st.settings.job.pska_url + "/jobs";
  web_request req{"GET", url, pska::pska_headers(who, st.settings.job.pska_service_token), "",
                  st.settings.job.request_timeout_seconds};
  self->request(caf::actor_cast<web_port_actor>(self),
                std::chrono::seconds(static_cast<int64_t>(st.settings.job.request_timeout_seconds) + 5),
                web_atom::value, std::move(req))
    .then(
      [=](web_response& r) mutable {
        if (!pska::succeeded(r.status))
          spdlog::warn("pska worker: {}", pska::step_failure("GET", url, r.status, r.body));
        else if (auto jobs = pska::ready_jobs(r.body, now_seconds()))
          ready[tenant] = std::move(*jobs);
        poll(self, tenant + 1, std::move(ready));
      },
      [=](caf::error& err) mutable {
        spdlog::warn("pska worker: GET {} failed: {}", url, message_of(err));
        poll(self, tenant + 1, std::move(ready));
      });
}

// A request to troupe's jobs API as the worker's service-token caller; `then` gets every answer.
template <class Then, class Failed = void (*)()>
void call_troupe(pointer self, const std::string& path, std::string body, Then then, double timeout_seconds,
                 Failed failed = [] {}) {
  auto& job = self->state.settings.job;
  web_request req{"POST", job.troupe_url + path, pska::troupe_headers(self->state.settings.tenants.front(),
                                                                      job.troupe_service_token),
                  std::move(body), timeout_seconds};
  self->request(caf::actor_cast<web_port_actor>(self), std::chrono::seconds(static_cast<int64_t>(timeout_seconds) + 5),
                web_atom::value,
                std::move(req))
    .then([=](web_response& r) mutable { then(r); },
          [=](caf::error& err) mutable {
            spdlog::warn("pska worker: POST {} failed: {}", path, message_of(err));
            failed();
          });
}

// CJ-43: free slots leased from troupe's pska.digest jobs by long poll.
void lease_from_troupe(pointer self) {
  auto& st = self->state;
  auto free = st.settings.max_concurrent - st.stats.running;
  auto body = pska::troupe_lease_body(st.settings.job.worker_id, free, st.settings.job.lease_seconds);
  // After a failed lease the next one waits poll_seconds.
  auto later = [=] {
    self->state.polling = false;
    self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(
                               std::chrono::duration<double>(self->state.settings.poll_seconds)),
                       tick_atom::value);
  };
  call_troupe(
    self, "/v1/jobs/lease", std::move(body),
    [=](web_response& r) {
      auto& st = self->state;
      if (!pska::succeeded(r.status)) {
        spdlog::warn("pska worker: {}", pska::step_failure("POST", "/v1/jobs/lease", r.status, r.body));
        return later();
      }
      st.polling = false;
      for (auto& t : pska::troupe_jobs(r.body, st.settings.tenants.front())) {
        if (st.troupe_leases.count(t.pska_job_id)) { // another troupe job for the PSKA job in hand
          call_troupe(self, "/v1/jobs/" + pska::url_component(t.id) + "/fail",
                      pska::troupe_fail_body(t.lease_token, "Busy: PSKA job " + t.pska_job_id + " is being digested"),
                      [](web_response&) {}, st.settings.job.request_timeout_seconds);
          continue;
        }
        st.troupe_leases[t.pska_job_id] = {t.id, t.lease_token, t.who};
        pska::job job;
        job.id = t.pska_job_id;
        job.json = "null";
        start_job(self, no_tenant, std::move(job), t.who);
      }
      if (!st.drained && st.stats.running < st.settings.max_concurrent)
        self->send(self, tick_atom::value);
    },
    st.settings.job.request_timeout_seconds + 25, later);
}

// The troupe job settled as its PSKA job was (CJ-43).
void settle_troupe_job(pointer self, const digest_job_outcome& o) {
  auto& st = self->state;
  auto lease = st.troupe_leases.find(o.job_id);
  if (lease == st.troupe_leases.end())
    return;
  auto path = "/v1/jobs/" + pska::url_component(lease->second.id);
  bool done = o.what == digest_job_outcome::kind::completed;
  call_troupe(self, path + (done ? "/complete" : "/fail"),
              done ? pska::troupe_complete_body(lease->second.token, o.message)
                   : pska::troupe_fail_body(lease->second.token, o.message),
              [](web_response&) {}, st.settings.job.request_timeout_seconds);
  st.troupe_leases.erase(lease);
}

// The troupe jobs' leases, every lease_seconds/3; a refused renewal (cancelled, lost) stops the job.
void renew_troupe_leases(pointer self) {
  auto& st = self->state;
  for (auto& [pska_id, lease] : st.troupe_leases) {
    auto job = st.jobs.find(key_of(no_tenant, pska_id));
    auto actor = job == st.jobs.end() ? digest_job_actor{} : job->second;
    call_troupe(
      self, "/v1/jobs/" + pska::url_component(lease.id) + "/heartbeat", pska::troupe_beat_body(lease.token),
      [=](web_response& r) {
        if (!pska::succeeded(r.status) && actor)
          self->send(actor, cancel_atom::value,
                     "TroupeJobLost: " + pska::step_failure("POST", "/v1/jobs/…/heartbeat", r.status, r.body));
      },
      st.settings.job.request_timeout_seconds);
  }
  self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(
                             static_cast<double>(st.settings.job.lease_seconds) / 3)),
                     renew_atom::value);
}

// A job ended: its slot is free, its troupe job settled, the drain told.
void job_ended(pointer self, const digest_job_outcome& o, int64_t tenant) {
  auto& st = self->state;
  auto t = static_cast<std::size_t>(tenant);
  settle_troupe_job(self, o);
  st.in_hand.erase(key_of(t, o.job_id));
  st.jobs.erase(key_of(t, o.job_id));
  --st.per_tenant[t];
  --st.stats.running;
  using kind = digest_job_outcome::kind;
  switch (o.what) {
    case kind::completed:
      ++st.stats.completed;
      spdlog::info("pska worker: job {} completed, {} batches", o.job_id, o.batch_count);
      break;
    case kind::failed:
      ++st.stats.failed;
      spdlog::warn("pska worker: job {} failed: {}", o.job_id, o.message);
      break;
    case kind::lease_lost:
      ++st.stats.lease_lost;
      spdlog::warn("pska worker: job {}: {}", o.job_id, o.message);
      break;
    case kind::not_leased:
      spdlog::info("pska worker: job {} not leased: {}", o.job_id, o.message);
      break;
  }
  if (st.drained) {
    if (st.stats.running == 0)
      st.drained->deliver(st.stats);
    return;
  }
  // A freed slot is filled at once, not at the next tick.
  if (!st.polling)
    self->send(self, tick_atom::value);
}

pska_worker_actor::behavior_type pska_worker(pointer self, pska_worker_settings settings, web_port_actor web) {
  self->state.settings = std::move(settings);
  self->state.web = std::move(web);
  self->state.pska_breaker = pska::breaker(self->state.settings.breaker_failures);
  self->state.troupe_breaker = pska::breaker(self->state.settings.breaker_failures);
  if (self->state.settings.tenants.empty())
    self->state.settings.tenants.push_back({});
  self->send(self, tick_atom::value);
  if (self->state.settings.from_troupe)
    self->send(self, renew_atom::value);
  return {
    [=](status_atom) { return self->state.stats; },
    [=](web_atom, web_request& req) -> caf::result<web_response> {
      auto& st = self->state;
      auto* side = req.url.rfind(st.settings.job.pska_url, 0) == 0 ? &st.pska_breaker : &st.troupe_breaker;
      auto rp = self->make_response_promise<web_response>();
      auto limit = std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(req.timeout_seconds + 5));
      self->request(st.web, limit, web_atom::value, std::move(req))
        .then(
          [=](web_response& r) mutable {
            side->record(now_seconds(), r.status, r.retry_after_seconds);
            rp.deliver(std::move(r));
          },
          [=](caf::error& err) mutable {
            side->record(now_seconds(), 0, 0);
            rp.deliver(std::move(err));
          });
      return rp;
    },
    [=](drain_atom) -> caf::result<pska_worker_stats> {
      auto& st = self->state;
      if (!st.drained) {
        st.drained = self->make_response_promise<pska_worker_stats>();
        spdlog::info("pska worker: draining {} job(s) for up to {} s", st.stats.running, st.settings.drain_grace_seconds);
        self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(
                                   std::chrono::duration<double>(st.settings.drain_grace_seconds)),
                           timeout_atom::value);
      }
      auto answer = *st.drained;
      if (st.stats.running == 0)
        answer.deliver(st.stats);
      return answer;
    },
    [=](timeout_atom) {
      // The grace is over: what is still running is cancelled, each job failing retryably.
      for (auto& [key, job] : self->state.jobs)
        self->send(job, cancel_atom::value, std::string("WorkerShutdown: draining"));
    },
    [=](tick_atom) {
      auto& st = self->state;
      if (st.drained)
        return;
      if (!st.polling && st.stats.running < st.settings.max_concurrent && admitting(self)) {
        st.polling = true;
        if (st.settings.from_troupe)
          lease_from_troupe(self);
        else
          poll(self, 0, {});
      }
      if (st.settings.from_troupe && st.polling) // a long poll: the next lease follows its answer
        return;
      self->delayed_send(self, std::chrono::duration_cast<caf::timespan>(
                                 std::chrono::duration<double>(st.settings.poll_seconds)),
                         tick_atom::value);
    },
    [=](renew_atom) { renew_troupe_leases(self); },
    [=](run_end_atom, digest_job_outcome& o, int64_t tenant) { job_ended(self, o, tenant); },
  };
}

} // namespace

pska_worker_actor spawn_pska_worker(caf::actor_system& sys, pska_worker_settings settings, web_port_actor web) {
  return sys.spawn(pska_worker, std::move(settings), std::move(web));
}

} // namespace troupe
