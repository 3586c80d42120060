#include "actors/pska_digest_job.hpp"

#include "actors/errors.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <memory>
#include <optional>

namespace troupe {

namespace {

namespace pska = protocol::pska;
namespace json = protocol::json;
using steady = std::chrono::steady_clock;
using outcome_kind = digest_job_outcome::kind;

constexpr int max_runs_per_batch = 8; // CJ-45's n: a batch that failed this often fails its job

caf::timespan seconds(double s) {
  return std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(s));
}

double since(steady::time_point t) {
  return std::chrono::duration<double>(steady::now() - t).count();
}

bool is_terminal(const std::string& status) {
  return status == "completed" || status == "failed" || status == "cancelled";
}

struct job_state {
  static inline const char* name = "pska_digest_job";
  digest_job_settings settings;
  pska::tenant who;
  pska::job job;
  web_port_actor web;
  std::optional<caf::typed_response_promise<digest_job_outcome>> reply;
  bool ended = false;
  bool settling = false; // complete or fail is on its way: a shutdown leaves it be
  std::string leased_job = "null";
  steady::time_point last_beat;
  // The batch in hand and the runs that passed.
  std::string cursor = "0";
  std::optional<pska::batch_page> page;
  std::vector<pska::run_report> reports;
  // The batch's run: its id, the try it is (CJ-45), whether it is an earlier worker's being reused.
  std::string run_id;
  int tries = 0;
  bool reusing = false;
  steady::time_point run_started;
  std::unique_ptr<pska::batch_judge> judge;
  std::string run_status;
};

using pointer = digest_job_actor::stateful_pointer<job_state>;

std::string pska_url(pointer self, const std::string& path) {
  return self->state.settings.pska_url + path;
}

std::string troupe_url(pointer self, const std::string& path) {
  return self->state.settings.troupe_url + path;
}

void end(pointer self, outcome_kind what, std::string message) {
  auto& st = self->state;
  if (st.ended)
    return;
  st.ended = true;
  if (st.reply)
    st.reply->deliver(digest_job_outcome{what, st.job.id, std::move(message), static_cast<int64_t>(st.reports.size())});
  self->quit();
}

// A request to PSKA (`to_pska`) or to troupe; `then` gets every answer, `failed` a transport error.
template <class Then, class Failed>
void call(pointer self, bool to_pska, std::string method, std::string url, std::string body, Then then,
          Failed failed) {
  auto& st = self->state;
  web_request req{std::move(method), std::move(url),
                  to_pska ? pska::pska_headers(st.who, st.settings.pska_service_token)
                          : pska::troupe_headers(st.who, st.settings.troupe_service_token),
                  std::move(body), st.settings.request_timeout_seconds};
  auto timeout = seconds(st.settings.request_timeout_seconds + 5);
  self->request(st.web, timeout, web_atom::value, std::move(req))
    .then([=](web_response& r) mutable { then(r); }, [=](caf::error& err) mutable { failed(err); });
}

// The body of a lease and of a heartbeat (AS-67.2, AS-86).
std::string lease_body(const digest_job_settings& s) {
  return json::object([&](json::writer& w) {
    w.Key("worker_id");
    w.String(s.worker_id.c_str(), static_cast<rapidjson::SizeType>(s.worker_id.size()));
    w.Key("lease_seconds");
    w.Int64(s.lease_seconds);
  });
}

bool ok(const web_response& r) {
  return pska::succeeded(r.status);
}

std::string http_failure(const char* method, const std::string& url, const web_response& r) {
  return "HttpError: " + pska::step_failure(method, url, r.status, r.body);
}

std::string transport_failure(const char* method, const std::string& url, const caf::error& err) {
  return "TransportError: " + std::string(method) + " " + url + " failed: " + message_of(err);
}

// AS-72: the job fails at PSKA, retryably; the worker is done with it.
void fail_job(pointer self, std::string error) {
  self->state.settling = true;
  auto url = pska_url(self, "/jobs/" + pska::url_component(self->state.job.id) + "/fail");
  call(
    self, true, "POST", url, pska::fail_body(error),
    [=](web_response&) { end(self, outcome_kind::failed, error); },
    [=](caf::error&) { end(self, outcome_kind::failed, error); });
}

// AS-86: the lease went elsewhere; the batch's run is cancelled and PSKA is told nothing.
void lease_lost(pointer self, const std::string& why) {
  auto& st = self->state;
  if (!st.run_id.empty() && !st.reusing)
    call(
      self, false, "POST", troupe_url(self, "/v1/runs/" + st.run_id + "/cancel"), "{}", [](web_response&) {},
      [](caf::error&) {});
  end(self, outcome_kind::lease_lost, "PSKA lease lost: " + why);
}

void complete_job(pointer self) {
  auto& st = self->state;
  st.settling = true;
  auto url = pska_url(self, "/jobs/" + pska::url_component(st.job.id) + "/complete");
  auto body = pska::complete_body(st.settings.worker_id, st.leased_job, st.reports);
  call(
    self, true, "POST", url, body,
    [=](web_response& r) {
      auto meaning = pska::settle_reply(r.status);
      if (meaning == pska::reply::ok)
        return end(self, outcome_kind::completed, body);
      if (meaning == pska::reply::lease_lost)
        return lease_lost(self, "complete answered " + std::to_string(r.status));
      end(self, outcome_kind::failed, http_failure("POST", url, r));
    },
    [=](caf::error& err) { end(self, outcome_kind::failed, transport_failure("POST", url, err)); });
}

void next_page(pointer self);
void start_run(pointer self);

// The batch's run passed or failed AS-72.
void conclude(pointer self, std::optional<std::string> broken) {
  auto& st = self->state;
  if (broken) {
    if (st.reusing) { // an earlier worker's run that failed: this batch gets a run of its own
      ++st.tries;
      return start_run(self);
    }
    return fail_job(self, *broken);
  }
  pska::run_report base;
  base.run_id = st.run_id;
  base.batch_cursor = st.cursor;
  base.next_cursor = st.page->next_cursor;
  base.status = st.run_status;
  st.reports.push_back(st.judge->report(std::move(base)));
  st.run_id.clear();
  if (st.page->has_more && st.page->next_cursor) {
    st.cursor = *st.page->next_cursor;
    return next_page(self);
  }
  complete_job(self);
}

// AS-87: every event of the ended run, a page at a time, into the judge.
void read_events(pointer self, int64_t after) {
  auto& st = self->state;
  auto url = troupe_url(self, "/v1/runs/" + st.run_id + "/events?limit=1000&after_sequence=" + std::to_string(after));
  call(
    self, false, "GET", url, "",
    [=](web_response& r) {
      if (!ok(r))
        return fail_job(self, http_failure("GET", url, r));
      auto page = json::parse(r.body);
      auto events = page && page->IsObject() ? json::member(*page, "events") : nullptr;
      if (!events || !events->IsArray())
        return fail_job(self, "BadAnswer: GET " + url + " answered no events page");
      for (auto& e : events->GetArray())
        self->state.judge->add_event(e);
      auto next = json::get_int(*page, "next_after_sequence");
      if (json::get_bool(*page, "has_more").value_or(false) && next && *next > after)
        return read_events(self, *next);
      conclude(self, self->state.judge->verdict(self->state.run_status));
    },
    [=](caf::error& err) { fail_job(self, transport_failure("GET", url, err)); });
}

// A run snapshot that ended: its judge, then its events.
void judge_run(pointer self, const json::value& snapshot) {
  auto& st = self->state;
  st.run_status = json::get_string(snapshot, "status");
  auto meta = json::member(snapshot, "metadata");
  json::document empty(rapidjson::kObjectType);
  st.judge = std::make_unique<pska::batch_judge>(meta ? *meta : empty);
  read_events(self, -1);
}

// AS-69: the run is polled until it ended; past run_timeout_seconds it is cancelled and the batch fails.
void poll_run(pointer self) {
  auto& st = self->state;
  auto url = troupe_url(self, "/v1/runs/" + st.run_id);
  call(
    self, false, "GET", url, "",
    [=](web_response& r) {
      auto& st = self->state;
      if (!ok(r))
        return fail_job(self, http_failure("GET", url, r));
      auto snapshot = json::parse(r.body);
      if (!snapshot || !snapshot->IsObject())
        return fail_job(self, "BadAnswer: GET " + url + " answered no run");
      if (is_terminal(json::get_string(*snapshot, "status")))
        return judge_run(self, *snapshot);
      if (since(st.run_started) > st.settings.run_timeout_seconds) {
        call(self, false, "POST", url + "/cancel", "{}", [](web_response&) {}, [](caf::error&) {});
        return fail_job(self, "RunTimeout: the batch run " + st.run_id + " did not end within " +
                                std::to_string(static_cast<int64_t>(st.settings.run_timeout_seconds)) + " s");
      }
      self->delayed_send(self, seconds(st.settings.run_poll_seconds), timeout_atom::value);
    },
    [=](caf::error& err) { fail_job(self, transport_failure("GET", url, err)); });
}

// CJ-45: the batch's n-th run. Its id is taken: running, it is followed; ended, it is judged and
// reused when it passes, else the next n is tried.
void start_run(pointer self) {
  auto& st = self->state;
  if (st.tries >= max_runs_per_batch)
    return fail_job(self, "BatchFailed: " + std::to_string(max_runs_per_batch) + " runs of the batch at cursor " +
                            st.cursor + " failed");
  st.run_id = pska::batch_run_id(st.who.tenant_id, st.job.id, st.cursor, st.tries);
  st.reusing = false;
  st.run_started = steady::now();
  pska::run_settings rs{st.who, st.job.id, st.run_id, st.cursor};
  auto url = troupe_url(self, "/v1/runs");
  call(
    self, false, "POST", url, pska::batch_run_body(rs, st.leased_job, *st.page),
    [=](web_response& r) {
      auto meaning = pska::run_start_reply(r.status);
      if (meaning == pska::reply::ok)
        return poll_run(self);
      if (meaning != pska::reply::exists)
        return fail_job(self, http_failure("POST", url, r));
      self->state.reusing = true; // an earlier worker's run of this batch
      poll_run(self);
    },
    [=](caf::error& err) { fail_job(self, transport_failure("POST", url, err)); });
}

// AS-67.3: the page at the cursor; an empty one, or the last, ends the job.
void next_page(pointer self) {
  auto& st = self->state;
  auto url = pska_url(self, "/digest/batches/" + pska::url_component(st.job.id) + "?cursor=" +
                              pska::url_component(st.cursor) +
                              "&limit=" + std::to_string(st.settings.batch_limit));
  call(
    self, true, "GET", url, "",
    [=](web_response& r) {
      if (!ok(r))
        return fail_job(self, http_failure("GET", url, r));
      auto page = pska::parse_batch_page(r.body);
      if (!page)
        return fail_job(self, "BadAnswer: GET " + url + " answered no batch page");
      if (page->source_items == 0)
        return complete_job(self);
      self->state.page = std::move(page);
      self->state.tries = 0;
      start_run(self);
    },
    [=](caf::error& err) { fail_job(self, transport_failure("GET", url, err)); });
}

// AS-86, CJ-44: a heartbeat every lease_seconds/3; 404 or 405 renews by leasing again; another 4xx
// means the lease is lost, and so does no success for lease_seconds − min(lease_seconds/10, 30).
void heartbeat(pointer self) {
  auto& st = self->state;
  auto lease = static_cast<double>(st.settings.lease_seconds);
  auto body = lease_body(st.settings);
  auto beat = [=](const char* path) {
    return pska_url(self, "/jobs/" + pska::url_component(self->state.job.id) + path);
  };
  auto retry_or_lose = [=](const std::string& why) {
    if (since(self->state.last_beat) > lease - std::min(lease / 10, 30.0))
      return lease_lost(self, why);
    self->delayed_send(self, std::chrono::seconds(1), tick_atom::value);
  };
  auto answered = [=](web_response& r) {
    auto meaning = pska::heartbeat_reply(r.status);
    if (meaning == pska::reply::ok) {
      self->state.last_beat = steady::now();
      return self->delayed_send(self, seconds(lease / 3), tick_atom::value);
    }
    if (meaning == pska::reply::lease_lost)
      return lease_lost(self, "heartbeat answered " + std::to_string(r.status));
    retry_or_lose("heartbeat answered " + std::to_string(r.status));
  };
  call(
    self, true, "POST", beat("/heartbeat"), body,
    [=](web_response& r) {
      if (pska::heartbeat_reply(r.status) != pska::reply::renew_by_lease)
        return answered(r);
      call(self, true, "POST", beat("/lease"), body, answered,
           [=](caf::error& err) { retry_or_lose(message_of(err)); });
    },
    [=](caf::error& err) { retry_or_lose(message_of(err)); });
}

// AS-67.2: the lease; a 409 means another worker won the job.
void lease_job(pointer self) {
  auto& st = self->state;
  auto url = pska_url(self, "/jobs/" + pska::url_component(st.job.id) + "/lease");
  auto body = lease_body(st.settings);
  call(
    self, true, "POST", url, body,
    [=](web_response& r) {
      if (!ok(r))
        return end(self, outcome_kind::not_leased, pska::step_failure("POST", url, r.status, r.body));
      auto leased = json::parse(r.body);
      auto job = leased && leased->IsObject() ? json::member(*leased, "job") : nullptr;
      self->state.leased_job = job ? json::serialize(*job) : self->state.job.json;
      self->state.last_beat = steady::now();
      self->delayed_send(self, seconds(static_cast<double>(self->state.settings.lease_seconds) / 3), tick_atom::value);
      next_page(self);
    },
    [=](caf::error& err) { end(self, outcome_kind::not_leased, transport_failure("POST", url, err)); });
}

digest_job_actor::behavior_type digest_job(pointer self, digest_job_settings settings, pska::tenant who,
                                           pska::job job, web_port_actor web) {
  auto& st = self->state;
  st.settings = std::move(settings);
  st.who = std::move(who);
  st.job = std::move(job);
  st.web = std::move(web);
  return {
    [=](start_atom) -> caf::result<digest_job_outcome> {
      auto& st = self->state;
      if (st.reply)
        return make_error(errc::conflict, "the job is already being carried out");
      st.reply = self->make_response_promise<digest_job_outcome>();
      lease_job(self);
      return *st.reply;
    },
    [=](cancel_atom, std::string& why) {
      auto& st = self->state;
      if (st.ended || st.settling || !st.reply)
        return;
      if (!st.run_id.empty() && !st.reusing)
        call(
          self, false, "POST", troupe_url(self, "/v1/runs/" + st.run_id + "/cancel"), "{}", [](web_response&) {},
          [](caf::error&) {});
      fail_job(self, std::move(why));
    },
    [=](tick_atom) {
      if (!self->state.ended)
        heartbeat(self);
    },
    [=](timeout_atom) {
      if (!self->state.ended && !self->state.run_id.empty())
        poll_run(self);
    },
  };
}

} // namespace

digest_job_actor spawn_digest_job(caf::actor_system& sys, digest_job_settings settings, protocol::pska::tenant who,
                                  protocol::pska::job job, web_port_actor web) {
  return sys.spawn(digest_job, std::move(settings), std::move(who), std::move(job), std::move(web));
}

} // namespace troupe
