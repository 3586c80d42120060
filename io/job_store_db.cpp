// The job store's operations (io/job_store_db.hpp), once for both engines.
#include "io/job_store_db.hpp"

#include "actors/errors.hpp"
#include "io/job_store_statements.hpp"
#include "io/pg_connection.hpp"
#include "io/run_store_db.hpp"
#include "io/sqlite_support.hpp"
#include "protocol/ids.hpp"
#include "protocol/json.hpp"
#include "protocol/timestamp.hpp"
#include "protocol/utf8.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>

namespace troupe::io::job_store {

namespace jobs = protocol::jobs;
namespace json = protocol::json;

namespace {

using clock = std::chrono::system_clock;

double seconds_of(clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

std::string time_text(double seconds) {
  return protocol::iso_timestamp(clock::time_point(
    std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds))));
}

std::optional<std::string> time_text(const std::optional<double>& seconds) {
  if (!seconds)
    return std::nullopt;
  return time_text(*seconds);
}

std::optional<std::string> unless_empty(std::string text) {
  if (text.empty())
    return std::nullopt;
  return text;
}

template <class Query>
job_record read_job(const Query& q) {
  job_record j;
  j.id = q.text(0);
  j.type = q.text(1);
  j.tenant_key = q.text(2);
  j.status = q.text(3);
  j.priority = q.integer(4);
  j.payload = q.text(5);
  j.result = unless_empty(q.text(6));
  j.idempotency_key = unless_empty(q.text(7));
  j.attempt = q.integer(8);
  j.max_attempts = q.integer(9);
  j.timeout_seconds = q.integer(10);
  j.run_after = time_text(q.real(11).value_or(0));
  j.created_at = time_text(q.real(12).value_or(0));
  j.updated_at = time_text(q.real(13).value_or(0));
  j.started_at = time_text(q.real(14));
  j.completed_at = time_text(q.real(15));
  j.cancelled_at = time_text(q.real(16));
  j.dead_at = time_text(q.real(17));
  j.worker_id = unless_empty(q.text(18));
  j.lease_epoch = q.integer(19);
  j.lease_expires_at = time_text(q.real(20));
  j.last_error = unless_empty(q.text(21));
  j.errors = q.text(22);
  j.progress = unless_empty(q.text(23));
  j.on_complete = unless_empty(q.text(24));
  j.on_complete_run_id = unless_empty(q.text(25));
  j.on_complete_error = unless_empty(q.text(26));
  j.lease_token = q.text(27);
  j.user_key = q.text(28);
  return j;
}

// A JSON array of strings, as the statements take lists.
std::string json_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (auto& item : items)
    out += (out.size() > 1 ? "," : "") + json::quote(item);
  return out + "]";
}

// CJ-31: the same document, whatever its spacing and member order.
bool same_json(const std::string& a, const std::string& b) {
  auto x = json::parse(a);
  auto y = json::parse(b);
  return x && y && json::canonical(*x) == json::canonical(*y);
}

// u uniform in [0, 0.1] for the backoff's jitter (CJ-36), from the system's random source.
double jitter() {
  auto hex = protocol::random_hex(8);
  return static_cast<double>(std::stoul(hex, nullptr, 16)) / 4294967295.0 * 0.1;
}

// Why a token cannot act on `job` (CJ-38).
job_fence refusal(const job_record& job, const std::string& token) {
  if (job.status == "cancelled")
    return job_fence::cancelled;
  if (job.status == "leased")
    return job_fence::stale_lease;
  auto epoch = jobs::token_epoch(token);
  if (epoch && *epoch < job.lease_epoch)
    return job_fence::stale_lease;
  return job_fence::not_leased;
}

} // namespace

template <class Conn>
double job_db<Conn>::now_seconds() const {
  return seconds_of(this->now());
}

template <class Conn>
caf::error job_db<Conn>::failed(const char* what) const {
  return make_error(errc::unavailable, std::string("job store: ") + what + ": " + error());
}

template <class Conn>
std::optional<job_record> job_db<Conn>::read(const char* statement, const std::string& id) {
  auto q = sql(statement);
  q.bind(1, id);
  if (!q.row())
    return std::nullopt;
  return read_job(q);
}

template <class Conn>
outcome<job_enqueued> job_db<Conn>::enqueue(const job_enqueue& e) {
  job_enqueued out;
  auto now = now_seconds();
  for (auto& job : e.jobs) {
    auto tenant = job.tenant_key.value_or("");
    std::optional<double> run_after = now;
    if (!job.run_after.empty())
      if (auto t = protocol::parse_iso_timestamp(job.run_after))
        run_after = seconds_of(*t);
    auto id = protocol::uuid7_id("job_");
    auto q = sql(job_sql::insert_job);
    q.bind(1, id).bind(2, job.type).bind(3, tenant).bind(4, e.user_key).bind(5, job.priority).bind(6, job.payload);
    q.bind(7, job.idempotency_key).bind(8, job.max_attempts).bind(9, job.timeout_seconds).bind(10, run_after);
    q.bind(11, std::optional<double>(now)).bind(12, job.on_complete);
    if (!q.done())
      return failed("enqueueing a job");
    bool created = changes() == 1;
    std::optional<job_record> stored;
    if (created) {
      stored = read(job_sql::get_job, id);
    } else {
      auto k = sql(job_sql::job_by_key);
      k.bind(1, tenant).bind(2, job.idempotency_key);
      if (k.row())
        stored = read_job(k);
    }
    if (!stored)
      return failed("reading an enqueued job");
    // CJ-31: a key names one job; the same type and canonically equal payload is that job again.
    if (!created && (stored->type != job.type || !same_json(stored->payload, job.payload)))
      return make_error(errc::conflict, "Idempotency key already used by a different job");
    out.jobs.push_back(std::move(*stored));
    out.created.push_back(created);
  }
  return out;
}

template <class Conn>
std::vector<std::string> job_db<Conn>::dealt_jobs(const job_claim_request& want, int64_t n, const std::string& types,
                                                  const std::string& left, const std::string& cap_type,
                                                  int64_t cap) {
  std::optional<double> now = now_seconds();
  auto tenants = json_list(want.tenants);
  auto ready = [&](const char* statement, const std::string& tenant, int64_t limit) {
    std::vector<std::string> ids;
    auto q = sql(statement);
    q.bind(1, now).bind(2, tenant).bind(3, types).bind(4, left).bind(5, tenants).bind(6, limit);
    while (q.row())
      ids.push_back(q.text(0));
    return ids;
  };
  if (!want.fair_share && cap_type.empty())
    return ready(job_sql::ready_jobs_by_priority, "", n);
  // Tenants take turns from the one after `after_tenant`, wrapping once (CJ-19); each offers its ready
  // jobs up to its room under the cap, and the jobs are dealt one per tenant per round.
  // No tenant served yet: one lap from the first tenant ("" is a tenant too).
  std::vector<std::vector<std::string>> offers;
  std::string after = want.after_tenant;
  bool wrapped = after.empty();
  int64_t from_after = wrapped ? 1 : 0;
  while (static_cast<int64_t>(offers.size()) < n) {
    auto q = sql(job_sql::next_ready_tenant);
    q.bind(1, now).bind(2, after).bind(3, types).bind(4, left).bind(5, tenants).bind(6, from_after);
    std::optional<std::string> tenant;
    if (q.row())
      tenant = q.text(0);
    from_after = 0;
    if (!tenant || (wrapped && !want.after_tenant.empty() && *tenant > want.after_tenant)) {
      if (wrapped)
        break;
      wrapped = true;
      after.clear();
      from_after = 1;
      continue;
    }
    after = *tenant;
    int64_t room = n;
    if (!cap_type.empty()) {
      auto c = sql(job_sql::tenant_leased);
      c.bind(1, *tenant).bind(2, cap_type);
      room = cap - (c.row() ? c.integer(0) : 0);
    }
    if (room > 0)
      offers.push_back(ready(job_sql::tenant_ready_jobs, *tenant, std::min(room, n)));
  }
  std::vector<std::string> dealt;
  for (std::size_t round = 0; static_cast<int64_t>(dealt.size()) < n; ++round) {
    bool any = false;
    for (auto& offer : offers)
      if (round < offer.size() && static_cast<int64_t>(dealt.size()) < n) {
        dealt.push_back(offer[round]);
        any = true;
      }
    if (!any)
      break;
  }
  return dealt;
}

template <class Conn>
std::vector<job_record> job_db<Conn>::claim_group(const job_claim_request& want, int64_t n,
                                                  const std::vector<std::string>& types,
                                                  const std::vector<std::string>& left, const std::string& cap_type,
                                                  int64_t cap) {
  std::vector<job_record> leased;
  std::optional<double> now = now_seconds();
  std::optional<double> lease_seconds = static_cast<double>(want.lease_seconds);
  if constexpr (on_server) {
    std::vector<std::string> parts;
    for (int64_t i = 0; i < n; ++i)
      parts.push_back(protocol::random_hex(32));
    auto q = sql(want.fair_share || !cap_type.empty() ? job_sql::claim_ready_jobs : job_sql::claim_by_priority);
    q.bind(1, now).bind(2, n).bind(3, want.worker_id).bind(4, lease_seconds).bind(5, want.after_tenant);
    q.bind(6, cap).bind(7, json_list(types)).bind(8, json_list(left)).bind(9, json_list(want.tenants));
    q.bind(10, json_list(parts)).bind(11, cap_type);
    while (q.row())
      leased.push_back(read_job(q));
  } else {
    for (auto& id : dealt_jobs(want, n, json_list(types), json_list(left), cap_type, cap)) {
      auto q = sql(job_sql::lease_job);
      q.bind(1, id).bind(2, want.worker_id).bind(3, protocol::random_hex(32)).bind(4, now).bind(5, lease_seconds);
      if (q.done() && changes() == 1)
        if (auto job = read(job_sql::get_job, id))
          leased.push_back(std::move(*job));
    }
  }
  return leased;
}

template <class Conn>
outcome<job_claim> job_db<Conn>::claim(const job_claim_request& want) {
  // Capped types are claimed apart, each under its cap; the rest together.
  std::vector<std::pair<std::string, int64_t>> capped;
  std::vector<std::string> capped_names;
  for (auto& [type, cap] : want.caps) {
    bool wanted = want.types.empty() || std::find(want.types.begin(), want.types.end(), type) != want.types.end();
    if (cap > 0 && wanted) {
      capped.emplace_back(type, cap);
      capped_names.push_back(type);
    }
  }
  job_claim out;
  auto take = [&](std::vector<job_record> jobs) {
    for (auto& job : jobs)
      out.jobs.push_back(std::move(job));
  };
  bool all_capped = !want.types.empty() && capped.size() == want.types.size();
  if (!all_capped)
    take(claim_group(want, want.max_jobs, want.types, capped_names, "", 0));
  for (auto& [type, cap] : capped) {
    auto room = want.max_jobs - static_cast<int64_t>(out.jobs.size());
    if (room <= 0)
      break;
    take(claim_group(want, room, {type}, {}, type, cap));
  }
  return out;
}

template <class Conn>
std::variant<job_record, job_answer> job_db<Conn>::fenced(const std::string& id, const std::string& token,
                                                          const job_scope& scope) {
  auto job = read(job_sql::lock_job, id);
  if (!job || !scope.sees(job->tenant_key))
    return job_answer{job_fence::not_found, {}};
  if (job->status == "leased" && job->lease_token == token)
    return std::move(*job);
  auto fence = refusal(*job, token);
  return job_answer{fence, std::move(*job)};
}

template <class Conn>
outcome<job_answer> job_db<Conn>::heartbeat(const job_heartbeat& h) {
  auto held = fenced(h.id, h.token, h.scope);
  if (auto refused = std::get_if<job_answer>(&held))
    return std::move(*refused);
  auto& job = std::get<job_record>(held);
  auto progress = h.progress ? *h.progress : job.progress.value_or("");
  auto q = sql(job_sql::beat_job);
  q.bind(1, h.id).bind(2, h.lease_seconds).bind(3, progress).bind(4, std::optional<double>(now_seconds()));
  if (!q.done())
    return failed("renewing a lease");
  return job_answer{job_fence::done, read(job_sql::get_job, h.id).value_or(job)};
}

template <class Conn>
void job_db<Conn>::start_follow_up(job_record& job, const follow_up_settings& settings) {
  if (!job.on_complete)
    return;
  std::string run_id, problem;
  auto run = jobs::follow_up_run(job, static_cast<int>(settings.run_max_attempts));
  if (auto bad = std::get_if<std::string>(&run)) {
    problem = std::move(*bad);
  } else {
    auto& r = std::get<run_record>(run);
    run_id = r.run_id;
    if (!run_store::insert_new_run<Conn>(*this, std::move(r), protocol::iso_timestamp(this->now()))) {
      // A job retried after it completed once has had its run (CJ-40: one per job).
      problem = "A follow-up run with the id " + run_id + " already exists";
      run_id.clear();
    }
  }
  auto q = sql(job_sql::set_follow_up);
  q.bind(1, job.id).bind(2, run_id).bind(3, problem);
  q.done();
  job.on_complete_run_id = unless_empty(run_id);
  job.on_complete_error = unless_empty(problem);
}

template <class Conn>
outcome<std::vector<job_answer>> job_db<Conn>::complete(const job_completions& c) {
  // A job named twice with one token is completed by its first item: the statement sees it once.
  std::set<std::pair<std::string, std::string>> named;
  std::string items = "[";
  for (auto& item : c.items)
    if (named.emplace(item.id, item.token).second)
      items += (items.size() > 1 ? "," : "") + std::string("{\"id\":") + json::quote(item.id) +
               ",\"token\":" + json::quote(item.token) + ",\"result\":" + json::quote(item.result) + "}";
  items += "]";
  std::map<std::string, job_record> completed;
  {
    auto q = sql(job_sql::complete_jobs);
    q.bind(1, items).bind(2, std::optional<double>(now_seconds())).bind(3, c.scope.tenant);
    while (q.row()) {
      auto job = read_job(q);
      completed.emplace(job.id, std::move(job));
    }
  }
  std::vector<job_answer> answers;
  for (auto& item : c.items) {
    if (auto done = completed.find(item.id); done != completed.end() && done->second.lease_token == item.token) {
      start_follow_up(done->second, c.follow_up);
      answers.push_back({job_fence::done, done->second});
      completed.erase(done); // a repeated item finds it completed: unchanged
      continue;
    }
    auto job = read(job_sql::get_job, item.id);
    if (!job || !c.scope.sees(job->tenant_key))
      answers.push_back({job_fence::not_found, {}});
    else if (job->status == "completed" && job->lease_token == item.token)
      answers.push_back({job_fence::unchanged, std::move(*job)});
    else
      answers.push_back({refusal(*job, item.token), std::move(*job)});
  }
  return answers;
}

template <class Conn>
job_record job_db<Conn>::end_attempt(job_record job, const std::string& error, bool retryable, double delay,
                                     bool fence) {
  auto now = now_seconds();
  bool again = retryable && job.attempt < job.max_attempts;
  auto errors = jobs::append_error(job.errors, job.attempt, time_text(now), error);
  auto q = sql(job_sql::fail_job);
  q.bind(1, job.id).bind(2, std::string(again ? "queued" : "dead"));
  q.bind(3, again ? std::optional<double>(now + delay) : std::nullopt);
  q.bind(4, again ? std::nullopt : std::optional<double>(now));
  q.bind(5, std::string(protocol::utf8_prefix(error, jobs::max_error_bytes))).bind(6, errors);
  q.bind(7, std::optional<double>(now)).bind(8, int64_t{fence ? 1 : 0});
  q.done();
  return read(job_sql::get_job, job.id).value_or(std::move(job));
}

template <class Conn>
outcome<job_answer> job_db<Conn>::fail(const job_failure& f, const job_backoff& backoff) {
  auto held = fenced(f.id, f.token, f.scope);
  if (auto refused = std::get_if<job_answer>(&held))
    return std::move(*refused);
  auto& job = std::get<job_record>(held);
  double delay = f.retry_after_seconds >= 0
                   ? f.retry_after_seconds
                   : jobs::retry_delay_seconds(job.attempt, backoff.base_seconds, backoff.max_seconds, jitter());
  return job_answer{job_fence::done, end_attempt(std::move(job), f.error, f.retryable, delay, false)};
}

template <class Conn>
outcome<job_answer> job_db<Conn>::change_status(const std::string& id, const job_scope& scope,
                                                std::vector<std::string> from, const char* statement,
                                                job_fence otherwise) {
  auto job = read(job_sql::lock_job, id);
  if (!job || !scope.sees(job->tenant_key))
    return job_answer{job_fence::not_found, {}};
  if (std::find(from.begin(), from.end(), job->status) == from.end())
    return job_answer{otherwise, std::move(*job)};
  auto q = sql(statement);
  q.bind(1, id).bind(2, std::optional<double>(now_seconds()));
  if (!q.done())
    return failed("changing a job's status");
  return job_answer{job_fence::done, read(job_sql::get_job, id).value_or(std::move(*job))};
}

template <class Conn>
outcome<job_answer> job_db<Conn>::cancel(const std::string& id, const job_scope& scope) {
  return change_status(id, scope, {"queued", "leased"}, job_sql::cancel_job, job_fence::unchanged);
}

template <class Conn>
outcome<job_answer> job_db<Conn>::retry(const std::string& id, const job_scope& scope) {
  return change_status(id, scope, {"dead", "cancelled"}, job_sql::retry_job, job_fence::not_retryable);
}

template <class Conn>
job_answer job_db<Conn>::get(const std::string& id, const job_scope& scope) {
  auto job = read(job_sql::get_job, id);
  if (!job || !scope.sees(job->tenant_key))
    return {job_fence::not_found, {}};
  return {job_fence::done, std::move(*job)};
}

template <class Conn>
job_page job_db<Conn>::list(const job_query& q) {
  auto& want = q.want;
  auto tenant = q.scope.tenant;
  if (!tenant && !want.tenant_key.empty())
    tenant = want.tenant_key; // the service token's choice of tenant

  auto rows = sql(want.ascending ? job_sql::list_oldest : job_sql::list_newest);
  rows.bind(1, want.type).bind(2, want.status).bind(3, want.worker_id).bind(4, tenant).bind(5, want.after);
  rows.bind(6, want.limit + 1);
  job_page page;
  while (rows.row())
    page.jobs.push_back(read_job(rows));
  if (static_cast<int64_t>(page.jobs.size()) > want.limit) {
    page.jobs.pop_back();
    page.has_more = true;
  }
  return page;
}

template <class Conn>
job_counts job_db<Conn>::counts(const job_scope& scope) {
  auto now = now_seconds();
  auto q = sql(job_sql::count_jobs);
  q.bind(1, std::optional<double>(now)).bind(2, scope.tenant);
  job_counts out;
  while (q.row()) {
    jobs::status_count c{q.text(0), q.text(1), q.integer(2), std::nullopt};
    if (auto oldest = q.real(3))
      c.oldest_ready_age_ms = std::max(0.0, std::round((now - *oldest) * 100000.0) / 100.0);
    out.push_back(std::move(c));
  }
  return out;
}

template <class Conn>
outcome<int64_t> job_db<Conn>::sweep(const job_backoff& backoff) {
  auto now = now_seconds();
  std::vector<std::pair<std::string, std::optional<double>>> expired;
  {
    auto q = sql(job_sql::expired_leases);
    q.bind(1, std::optional<double>(now));
    while (q.row())
      expired.emplace_back(q.text(0), q.real(1));
  }
  int64_t swept = 0;
  for (auto& [id, deadline] : expired) {
    auto job = read(job_sql::lock_job, id);
    if (!job || job->status != "leased")
      continue;
    // CJ-37: past the attempt's deadline the attempt timed out; before it, the worker went quiet.
    auto error = deadline && *deadline <= now
                   ? "Job attempt timed out after " + std::to_string(job->timeout_seconds) + " s"
                   : std::string("Job lease expired");
    auto delay = jobs::retry_delay_seconds(job->attempt, backoff.base_seconds, backoff.max_seconds, jitter());
    end_attempt(std::move(*job), error, true, delay, true);
    ++swept;
  }
  return swept;
}

template <class Conn>
outcome<int64_t> job_db<Conn>::release(const job_release& r) {
  int64_t released = 0;
  for (auto& [id, token] : r.leases) {
    auto q = sql(job_sql::release_job);
    q.bind(1, id).bind(2, token).bind(3, std::optional<double>(now_seconds()));
    if (q.done())
      released += changes();
  }
  return released;
}

template class job_db<sqlite::connection>;
template class job_db<pg::connection>;

} // namespace troupe::io::job_store
