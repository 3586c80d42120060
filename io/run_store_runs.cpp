// The run store's runs: records, attempts under leases, their fenced events, their ends (AS-49..AS-55,
// AS-82, AS-83).
#include "actors/errors.hpp"
#include "io/pg_connection.hpp"
#include "io/run_store_db.hpp"
#include "io/run_store_statements.hpp"
#include "io/sqlite_support.hpp"
#include "protocol/timestamp.hpp"

#include <algorithm>
#include <chrono>

namespace troupe::io::run_store {

namespace {

template <class Query>
run_record read_run(const Query& q) {
  run_record r;
  int i = 0;
  for (auto field : {&r.run_id, &r.run_kind, &r.session_id, &r.tenant_key, &r.user_key, &r.status, &r.created_at,
                     &r.updated_at, &r.started_at, &r.completed_at, &r.cancelled_at})
    *field = q.text(i++);
  r.duration_ms = q.real(i++);
  r.event_count = q.integer(i++);
  r.error = q.text(i++);
  r.metadata = q.text(i++);
  r.generation_options = q.text(i++);
  r.attempts = static_cast<int>(q.integer(i++));
  r.max_attempts = static_cast<int>(q.integer(i++));
  for (auto field : {&r.lease_expires_at, &r.retry_after, &r.worker_id, &r.last_error})
    *field = q.text(i++);
  r.lease_epoch = q.integer(i++);
  r.request = q.text(i++);
  r.handoffs = static_cast<int>(q.integer(i++));
  r.priority = static_cast<int>(q.integer(i++));
  r.policy_snapshot_hash = q.text(i++);
  return r;
}

// Milliseconds from an iso timestamp until `now` (null when the text is not one).
std::optional<double> ms_since(const std::string& iso, std::chrono::system_clock::time_point now) {
  auto t = protocol::parse_iso_timestamp(iso);
  if (!t)
    return std::nullopt;
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(now - *t).count();
  return static_cast<double>(us / 10) / 100.0;
}

// A new run as the store accepts it: what the caller said about it, and nothing of its state, which
// only the store's own transitions set.
run_record accepted(run_record r, const std::string& now) {
  run_record fresh;
  for (auto field : {&run_record::run_id, &run_record::run_kind, &run_record::session_id, &run_record::tenant_key,
                     &run_record::user_key, &run_record::metadata, &run_record::generation_options,
                     &run_record::request, &run_record::policy_snapshot_hash})
    fresh.*field = std::move(r.*field);
  fresh.max_attempts = r.max_attempts;
  fresh.priority = r.priority;
  fresh.status = "queued";
  fresh.created_at = fresh.updated_at = now;
  return fresh;
}

caf::error fenced() {
  return make_error(errc::conflict, "Run lease lost: the run is held at a newer lease epoch");
}

caf::error run_exists() {
  return make_error(errc::conflict, "Run already exists");
}

} // namespace

caf::error run_not_found() {
  return make_error(errc::not_found, "Run not found");
}

template <class Conn>
std::optional<run_record> store_db<Conn>::get_run(const std::string& run_id) {
  return read_one(store_sql::get_run, run_id);
}

// The run a write is about to change, locked until its transaction ends where the engine locks rows.
template <class Conn>
std::optional<run_record> store_db<Conn>::lock(const std::string& run_id) {
  return read_one(store_sql::lock_run, run_id);
}

template <class Conn>
std::optional<run_record> store_db<Conn>::read_one(const char* statement, const std::string& run_id) {
  auto q = sql(statement);
  q.bind(1, run_id);
  if (!q.row())
    return std::nullopt;
  return read_run(q);
}

template <class Conn>
std::optional<run_record> insert_new_run(Conn& db, run_record r, const std::string& now) {
  r = accepted(std::move(r), now);
  auto q = db.sql(store_sql::insert_run);
  q.bind(1, r.run_id).bind(2, r.run_kind).bind(3, r.session_id).bind(4, r.tenant_key).bind(5, r.user_key);
  q.bind(6, r.status).bind(7, r.created_at).bind(8, r.started_at).bind(9, r.metadata);
  q.bind(10, r.generation_options).bind(11, int64_t{r.attempts}).bind(12, int64_t{r.max_attempts});
  q.bind(13, r.lease_expires_at).bind(14, r.worker_id).bind(15, r.lease_epoch).bind(16, r.request);
  q.bind(17, int64_t{r.priority}).bind(18, r.policy_snapshot_hash);
  if (!q.done() || db.changes() != 1)
    return std::nullopt;
  return r;
}

template std::optional<run_record> insert_new_run(sqlite::connection&, run_record, const std::string&);
template std::optional<run_record> insert_new_run(pg::connection&, run_record, const std::string&);

template <class Conn>
outcome<run_record> store_db<Conn>::create(run_record r) {
  if (auto created = insert_new_run<Conn>(*this, std::move(r), now_text()))
    return std::move(*created);
  return run_exists();
}

template <class Conn>
outcome<run_record> store_db<Conn>::begin_chat(run_record r, const std::string& worker_id, double lease_seconds) {
  if (auto stored = lock(r.run_id)) {
    // AS-10: only the caller's own terminal chat run reopens; another caller's run is never touched.
    if (stored->run_kind != "chat" || !protocol::is_terminal(stored->status) || stored->tenant_key != r.tenant_key
        || stored->user_key != r.user_key)
      return run_exists();
  } else if (auto created = create(std::move(r)); std::holds_alternative<caf::error>(created)) {
    return created;
  } else {
    r = std::get<run_record>(std::move(created));
  }
  start_attempt(r.run_id, worker_id, lease_seconds);
  return *get_run(r.run_id);
}

// Starts an attempt of `run_id`: attempts+1, a new epoch, the lease (AS-54).
template <class Conn>
void store_db<Conn>::start_attempt(const std::string& run_id, const std::string& worker_id, double lease_seconds) {
  auto q = sql(store_sql::start_attempt);
  q.bind(1, run_id).bind(2, worker_id).bind(3, seconds_from_now(lease_seconds)).bind(4, now_text());
  q.done();
}

template <class Conn>
outcome<run_claim> store_db<Conn>::claim(const claim_request& want) {
  auto now = now_text();
  run_claim claim;
  if constexpr (on_server) {
    auto q = sql(store_sql::claim_ready_runs);
    q.bind(1, now).bind(2, int64_t{want.n}).bind(3, want.worker_id).bind(4, seconds_from_now(want.lease_seconds));
    q.bind(5, want.after_tenant).bind(6, want.tenant_max_running);
    while (q.row())
      claim.runs.push_back(read_run(q));
  } else {
    for (auto& id : dealt_runs(want, now)) {
      start_attempt(id, want.worker_id, want.lease_seconds);
      claim.runs.push_back(*get_run(id));
    }
  }
  // A full claim is followed by another (run_registry), which says when the next delayed run is due.
  if (claim.runs.size() == want.n)
    return claim;
  auto q = sql(store_sql::next_ready);
  q.bind(1, now);
  if (q.row())
    if (auto next = protocol::parse_iso_timestamp(q.text(0)))
      claim.next_ready_seconds =
        std::max(0.0, std::chrono::duration<double>(*next - this->now()).count());
  return claim;
}

// The runs a claim takes, in the order they are dealt: claim_ready_runs (io/run_store_statements.hpp)
// in steps, each an indexed lookup. The store's one connection is the only writer, so nothing else
// claims meanwhile and the count under a cap is exact without a lock.
template <class Conn>
std::vector<std::string> store_db<Conn>::dealt_runs(const claim_request& want, const std::string& now) {
  auto next_tenant = [&](const std::string* after) -> std::optional<std::string> {
    auto q = sql(after ? store_sql::next_ready_tenant : store_sql::first_ready_tenant);
    q.bind(1, now);
    if (after)
      q.bind(2, *after);
    if (!q.row())
      return std::nullopt;
    return q.text(0);
  };
  auto room_of = [&](const std::string& tenant) {
    if (want.tenant_max_running == 0)
      return int64_t{want.n};
    auto q = sql(store_sql::tenant_running);
    q.bind(1, tenant);
    return want.tenant_max_running - (q.row() ? q.integer(0) : 0);
  };
  // The tenants with ready runs, in turn after the one served last, wrapping once to end with it.
  std::vector<std::pair<std::string, int64_t>> taken; // each with its room
  bool wrapped = false;
  for (auto tenant = next_tenant(&want.after_tenant); taken.size() < want.n; tenant = next_tenant(&*tenant)) {
    if (!tenant && !wrapped) {
      wrapped = true;
      tenant = next_tenant(nullptr);
    }
    if (!tenant || (wrapped && *tenant > want.after_tenant))
      break;
    if (auto room = room_of(*tenant); room > 0)
      taken.emplace_back(*tenant, room);
  }
  // Each offers its ready runs in claim order, no more than it could be dealt; then a run each in turn.
  auto most = static_cast<int64_t>(want.n) - static_cast<int64_t>(taken.size()) + 1;
  std::vector<std::vector<std::string>> offered;
  for (auto& [tenant, room] : taken) {
    auto q = sql(store_sql::tenant_ready_runs);
    q.bind(1, now).bind(2, tenant).bind(3, std::min(room, most));
    auto& runs = offered.emplace_back();
    while (q.row())
      runs.push_back(q.text(0));
  }
  std::vector<std::string> dealt;
  for (std::size_t round = 0; dealt.size() < want.n; ++round) {
    auto before = dealt.size();
    for (auto& runs : offered)
      if (round < runs.size() && dealt.size() < want.n)
        dealt.push_back(runs[round]);
    if (dealt.size() == before)
      break; // every offer is dealt
  }
  return dealt;
}

// The run's record when `lease_epoch` still holds it, else nullopt (AS-82).
template <class Conn>
std::optional<run_record> store_db<Conn>::held(const std::string& run_id, int64_t lease_epoch) {
  auto r = lock(run_id);
  if (!r || r->status != "running" || r->lease_epoch != lease_epoch)
    return std::nullopt;
  return r;
}

template <class Conn>
outcome<bool> store_db<Conn>::append(const std::string& run_id, int64_t lease_epoch, const stored_event& e) {
  if constexpr (on_server) {
    auto q = sql(store_sql::append_event);
    q.bind(1, run_id).bind(2, lease_epoch).bind(3, e.sequence).bind(4, now_text());
    q.bind(5, e.type).bind(6, e.json);
    if (!q.done() || changes() != 1)
      return fenced();
    return true;
  }
  auto update = sql(store_sql::count_appended_event);
  update.bind(1, run_id).bind(2, lease_epoch).bind(3, e.sequence).bind(4, now_text());
  if (!update.done() || changes() != 1 || !insert_event(run_id, e))
    return fenced();
  return true;
}

template <class Conn>
bool store_db<Conn>::insert_event(const std::string& run_id, const stored_event& e) {
  auto q = sql(store_sql::insert_event);
  q.bind(1, run_id).bind(2, e.sequence).bind(3, e.type).bind(4, e.json);
  return q.done();
}

// Ends the attempt the store ends on its caller's word (cancel, recovery, handback). An open attempt
// gets the caller's `error` event at the run's next sequence, and so does one that wrote nothing when
// the run ends with it, so a stream of the run replays a terminal event (AS-14, AS-90); an attempt
// that wrote its own error, or nothing while the run goes on, gets nothing more. Answers true when the
// attempt had stored its session_end: the run is complete, and the caller completes it.
template <class Conn>
bool store_db<Conn>::close_interrupted(run_record& r, const protocol::attempt_end& end, bool run_ends) {
  auto q = sql(store_sql::attempt_log);
  q.bind(1, r.run_id);
  auto log = q.row() ? protocol::interrupted_attempt(q.integer(0), r.event_count, q.text(1))
                     : protocol::attempt_log::unwritten;
  if (log == protocol::attempt_log::finished)
    return true;
  if (log == protocol::attempt_log::ended || (log == protocol::attempt_log::unwritten && !run_ends))
    return false;
  insert_event(r.run_id, protocol::closing_event(r, end));
  r.event_count += 1;
  auto count = sql(store_sql::set_event_count);
  count.bind(1, r.run_id).bind(2, r.event_count);
  count.done();
  return false;
}

template <class Conn>
outcome<run_record> store_db<Conn>::transition(const run_transition& t) {
  auto r = held(t.run_id, t.lease_epoch);
  if (!r)
    return fenced();
  if (t.status == "queued") {
    requeue(t.run_id, t.lease_epoch, t.last_error, t.retry_seconds);
    return *get_run(t.run_id);
  }
  return finish(std::move(*r), t.status, t.error, t.trace);
}

// Sets a run terminal (completed | failed | cancelled) and writes its trace (AS-55).
template <class Conn>
run_record store_db<Conn>::finish(run_record r, const std::string& status, const std::string& error,
                            const protocol::trace_facts& facts) {
  auto now = now_text();
  r.status = status;
  r.error = error;
  r.completed_at = now;
  r.cancelled_at = status == "cancelled" ? now : "";
  r.duration_ms = ms_since(r.started_at.empty() ? r.created_at : r.started_at, this->now());
  r.lease_expires_at.clear();
  r.updated_at = now;
  auto q = sql(store_sql::finish_run);
  q.bind(1, r.run_id).bind(2, status).bind(3, error).bind(4, now).bind(5, r.cancelled_at).bind(6, r.duration_ms);
  q.bind(7, r.lease_epoch);
  q.done();
  auto t = sql(store_sql::upsert_trace);
  t.bind(1, r.run_id).bind(2, r.session_id).bind(3, r.tenant_key).bind(4, facts.trace_type).bind(5, status);
  t.bind(6, now).bind(7, protocol::trace_json(r, facts));
  t.done();
  return r;
}

template <class Conn>
void store_db<Conn>::requeue(const std::string& run_id, int64_t lease_epoch, const std::string& last_error,
                       double retry_seconds) {
  auto q = sql(store_sql::requeue_run);
  q.bind(1, run_id).bind(2, lease_epoch).bind(3, last_error);
  q.bind(4, retry_seconds > 0 ? seconds_from_now(retry_seconds) : std::string());
  q.bind(5, now_text());
  q.done();
}

template <class Conn>
outcome<bool> store_db<Conn>::renew(const std::string& run_id, int64_t lease_epoch, double lease_seconds) {
  auto q = sql(store_sql::renew_lease);
  q.bind(1, run_id).bind(2, lease_epoch).bind(3, seconds_from_now(lease_seconds));
  if (!q.done() || changes() != 1)
    return fenced();
  return true;
}

template <class Conn>
outcome<recovery_report> store_db<Conn>::recover(bool all_running, const protocol::lapse_ends& ends) {
  // With `all_running` the cutoff is "" and every running run is taken.
  auto lapsed = ids(store_sql::lapsed_runs, all_running ? std::string() : now_text());
  recovery_report report;
  for (auto& id : lapsed) {
    auto r = *lock(id);
    r.lease_epoch += 1;
    bool attempts_left = r.attempts - r.handoffs < r.max_attempts;
    if (close_interrupted(r, attempts_left ? ends.requeued : ends.failed, !attempts_left)) {
      finish(r, "completed", "", protocol::unfinished_trace_facts(r));
      report.ended_run_ids.push_back(id);
      ++report.completed;
    } else if (attempts_left) {
      requeue(id, r.lease_epoch, ends.requeued.message, 0);
      ++report.requeued;
    } else {
      finish(r, "failed", ends.failed.message, protocol::unfinished_trace_facts(r));
      report.ended_run_ids.push_back(id);
      ++report.failed;
    }
  }
  return report;
}

template <class Conn>
outcome<int64_t> store_db<Conn>::hand_back(const std::string& worker_id, const protocol::attempt_end& end,
                                           int64_t max_handoffs) {
  auto held = ids(store_sql::held_runs, worker_id);
  for (auto& id : held)
    hand_back_locked(*lock(id), end, max_handoffs);
  return static_cast<int64_t>(held.size());
}

template <class Conn>
outcome<bool> store_db<Conn>::hand_back_run(const std::string& run_id, int64_t lease_epoch,
                                            const protocol::attempt_end& end, int64_t max_handoffs) {
  auto r = lock(run_id);
  if (!r || r->status != "running" || r->lease_epoch != lease_epoch)
    return false;
  hand_back_locked(std::move(*r), end, max_handoffs);
  return true;
}

// A locked running run goes back to the queue, its attempt closed by `end` and counted as a handoff;
// one whose attempt had stored its session_end completes instead.
template <class Conn>
void store_db<Conn>::hand_back_locked(run_record r, const protocol::attempt_end& end, int64_t max_handoffs) {
  r.lease_epoch += 1;
  if (close_interrupted(r, end, false)) {
    finish(r, "completed", "", protocol::unfinished_trace_facts(r));
    return;
  }
  requeue(r.run_id, r.lease_epoch, end.message, 0);
  sql(store_sql::count_handoff).bind(1, r.run_id).bind(2, max_handoffs).done();
}

template <class Conn>
outcome<run_record> store_db<Conn>::cancel(const std::string& run_id, const protocol::attempt_end& end) {
  auto r = lock(run_id);
  if (!r)
    return run_not_found();
  if (protocol::is_terminal(r->status))
    return std::move(*r);
  r->lease_epoch += 1;
  auto facts = protocol::unfinished_trace_facts(*r);
  // An attempt that already stored its session_end finished the run: the cancel came too late.
  if (r->status == "running" && close_interrupted(*r, end, true))
    return finish(std::move(*r), "completed", "", facts);
  return finish(std::move(*r), "cancelled", end.message, facts);
}

template <class Conn>
run_list store_db<Conn>::list_runs(const std::string& status, int64_t limit, const protocol::tenant_scope& scope) {
  // A statement per case rather than `?n = '' OR ...`, which would keep SQLite off the indexes. The
  // tenant is bound after the others.
  const auto& tenant = scope.tenant;
  run_list out;
  {
    auto q = sql(status.empty() ? (tenant ? store_sql::tenant_runs : store_sql::list_runs)
                                : (tenant ? store_sql::tenant_runs_by_status : store_sql::list_runs_by_status));
    int i = 1;
    if (!status.empty())
      q.bind(i++, status);
    q.bind(i++, limit == 0 ? no_limit : limit);
    if (tenant)
      q.bind(i, *tenant);
    while (q.row())
      out.runs.push_back(read_run(q));
  }
  auto q = sql(status.empty() ? (tenant ? store_sql::count_tenant_runs : store_sql::count_runs)
                              : (tenant ? store_sql::count_tenant_runs_by_status : store_sql::count_runs_by_status));
  int i = 1;
  if (!status.empty())
    q.bind(i++, status);
  if (tenant)
    q.bind(i, *tenant);
  if (q.row())
    out.total_count = q.integer(0);
  return out;
}

template <class Conn>
outcome<run_events_page> store_db<Conn>::events(const std::string& run_id, int64_t after, int64_t limit) {
  auto r = get_run(run_id);
  if (!r)
    return run_not_found();
  run_events_page page{std::move(*r), {}};
  auto q = sql(store_sql::events_after);
  q.bind(1, run_id).bind(2, after).bind(3, limit == 0 ? no_limit : limit);
  while (q.row())
    page.events.push_back({q.integer(0), q.text(1), q.text(2)});
  return page;
}

template class store_db<sqlite::connection>;
template class store_db<pg::connection>;

} // namespace troupe::io::run_store
