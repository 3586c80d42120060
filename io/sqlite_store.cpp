#include "io/sqlite_store.hpp"

#include "actors/errors.hpp"
#include "io/sqlite_support.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include "protocol/approvals.hpp"
#include "protocol/timestamp.hpp"

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

namespace troupe::io {

namespace {

// Versioned migrations, applied in order at start; a version is never edited once released.
constexpr const char* migrations[] = {
  R"sql(
    CREATE TABLE sessions (
      tenant_key  TEXT NOT NULL,
      user_key    TEXT NOT NULL,
      session_id  TEXT NOT NULL,
      created_at  TEXT NOT NULL,
      updated_at  TEXT NOT NULL,
      run_count   INTEGER NOT NULL DEFAULT 0,
      last_run_id TEXT NOT NULL DEFAULT '',
      last_status TEXT NOT NULL DEFAULT '',
      last_query  TEXT NOT NULL DEFAULT '',
      last_answer TEXT NOT NULL DEFAULT '',
      PRIMARY KEY (tenant_key, user_key, session_id)
    );
  )sql",
  R"sql(
    CREATE TABLE runs (
      run_id      TEXT PRIMARY KEY,
      run_kind    TEXT NOT NULL,
      session_id  TEXT NOT NULL,
      tenant_key  TEXT NOT NULL,
      user_key    TEXT NOT NULL,
      status      TEXT NOT NULL,
      attempts    INTEGER NOT NULL,
      event_count INTEGER NOT NULL,
      created_at  TEXT NOT NULL,
      updated_at  TEXT NOT NULL
    );
  )sql",
  R"sql(
    ALTER TABLE runs ADD COLUMN started_at TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN completed_at TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN cancelled_at TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN duration_ms REAL;
    ALTER TABLE runs ADD COLUMN error TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE runs ADD COLUMN generation_options TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE runs ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE runs ADD COLUMN lease_expires_at TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN retry_after TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN worker_id TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN last_error TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN request TEXT NOT NULL DEFAULT '{}';
    CREATE INDEX runs_by_status ON runs (status, retry_after, created_at);
    CREATE INDEX runs_by_created ON runs (created_at);
    CREATE TABLE run_events (
      run_id     TEXT NOT NULL,
      sequence   INTEGER NOT NULL,
      type       TEXT NOT NULL,
      payload    TEXT NOT NULL,
      PRIMARY KEY (run_id, sequence)
    ) WITHOUT ROWID;
    CREATE TABLE traces (
      run_id       TEXT PRIMARY KEY,
      session_id   TEXT NOT NULL,
      tenant_key   TEXT NOT NULL,
      trace_type   TEXT NOT NULL,
      status       TEXT NOT NULL,
      completed_at TEXT NOT NULL,
      payload      TEXT NOT NULL
    );
    CREATE INDEX traces_by_completed ON traces (completed_at);
  )sql",
  R"sql(
    CREATE TABLE approvals (
      request_id        TEXT PRIMARY KEY,
      run_id            TEXT NOT NULL,
      session_id        TEXT NOT NULL,
      tenant_key        TEXT NOT NULL,
      user_key          TEXT NOT NULL,
      task_id           TEXT NOT NULL,
      tool_call_id      TEXT NOT NULL,
      tool_name         TEXT NOT NULL,
      tool_args         TEXT NOT NULL,
      reason            TEXT NOT NULL,
      decision_level    TEXT NOT NULL,
      pattern_matched   TEXT NOT NULL,
      policy_scope      TEXT NOT NULL,
      policy_action     TEXT NOT NULL,
      policy_matched    INTEGER NOT NULL,
      status            TEXT NOT NULL,
      approved          INTEGER,
      timeout_seconds   REAL NOT NULL,
      created_at        TEXT NOT NULL,
      expires_at        TEXT NOT NULL,
      resolved_at       TEXT NOT NULL,
      resolution_reason TEXT NOT NULL
    );
    CREATE INDEX approvals_by_status ON approvals (status, created_at);
    CREATE INDEX approvals_by_run ON approvals (run_id);
    CREATE TABLE audit (
      id         INTEGER PRIMARY KEY,
      run_id     TEXT NOT NULL,
      tenant_key TEXT NOT NULL,
      created_at TEXT NOT NULL,
      payload    TEXT NOT NULL
    );
  )sql",
  R"sql(
    CREATE INDEX runs_by_status_created ON runs (status, created_at);
  )sql",
  R"sql(
    CREATE TABLE rate_limits (
      user_key     TEXT PRIMARY KEY,
      window_start INTEGER NOT NULL,
      count        INTEGER NOT NULL
    );
  )sql",
  // The Responses gateway (responses.md RS-53); written through io/sqlite_response_store.cpp.
  R"sql(
    CREATE TABLE responses (
      id                   TEXT PRIMARY KEY,
      created_at           INTEGER NOT NULL,
      status               TEXT NOT NULL,
      background           INTEGER NOT NULL,
      model                TEXT NOT NULL,
      snapshot             TEXT NOT NULL,
      request              TEXT NOT NULL,
      input_count          INTEGER NOT NULL,
      previous_response_id TEXT NOT NULL,
      conversation_id      TEXT NOT NULL
    );
    CREATE INDEX responses_by_status ON responses (status);
    CREATE TABLE response_history (
      response_id TEXT NOT NULL,
      position    INTEGER NOT NULL,
      item_id     TEXT NOT NULL,
      PRIMARY KEY (response_id, position)
    );
    CREATE INDEX response_history_by_item ON response_history (item_id);
    CREATE TABLE items (
      id         TEXT PRIMARY KEY,
      json       TEXT NOT NULL,
      created_at INTEGER NOT NULL
    );
    CREATE TABLE conversations (
      id         TEXT PRIMARY KEY,
      created_at INTEGER NOT NULL,
      metadata   TEXT NOT NULL,
      revision   INTEGER NOT NULL
    );
    CREATE TABLE conversation_items (
      conversation_id TEXT NOT NULL,
      position        INTEGER NOT NULL,
      item_id         TEXT NOT NULL,
      PRIMARY KEY (conversation_id, position)
    );
    CREATE UNIQUE INDEX conversation_items_by_member ON conversation_items (conversation_id, item_id);
    CREATE INDEX conversation_items_by_item ON conversation_items (item_id);
    CREATE TABLE response_events (
      response_id TEXT NOT NULL,
      sequence    INTEGER NOT NULL,
      json        TEXT NOT NULL,
      PRIMARY KEY (response_id, sequence)
    );
  )sql",
  // Workspace logs (workspace-stream.md WS-15, WS-40); written through io/sqlite_workspace_store.cpp.
  R"sql(
    CREATE TABLE workspace_events (
      tenant         TEXT NOT NULL,
      workspace      TEXT NOT NULL,
      seq            INTEGER NOT NULL,
      id             TEXT NOT NULL,
      type           TEXT NOT NULL,
      ts             TEXT NOT NULL,
      correlation_id TEXT NOT NULL,
      envelope       TEXT NOT NULL,
      PRIMARY KEY (tenant, workspace, seq)
    ) WITHOUT ROWID;
    CREATE UNIQUE INDEX workspace_events_by_id ON workspace_events (tenant, workspace, id);
    CREATE TABLE workspace_command_results (
      tenant      TEXT NOT NULL,
      workspace   TEXT NOT NULL,
      participant TEXT NOT NULL,
      command_id  TEXT NOT NULL,
      status      INTEGER NOT NULL,
      ok          INTEGER NOT NULL,
      max_seq     INTEGER NOT NULL,
      result      TEXT NOT NULL,
      created_at  REAL NOT NULL,
      PRIMARY KEY (tenant, workspace, participant, command_id)
    ) WITHOUT ROWID;
    CREATE INDEX workspace_command_results_by_age ON workspace_command_results (created_at);
  )sql",
  // Responses, conversations and items belong to the caller that created them (issue 15 finding 9);
  // rows from before belong to the open service's owner "".
  R"sql(
    ALTER TABLE responses ADD COLUMN owner TEXT NOT NULL DEFAULT '';
    ALTER TABLE conversations ADD COLUMN owner TEXT NOT NULL DEFAULT '';
    ALTER TABLE items ADD COLUMN owner TEXT NOT NULL DEFAULT '';
  )sql",
};

using sqlite::db_ptr;
using sqlite::exec;
using sqlite::prepare;
using sqlite::query;

constexpr const char* run_columns =
  "run_id, run_kind, session_id, tenant_key, user_key, status, created_at, updated_at, started_at, completed_at, "
  "cancelled_at, duration_ms, event_count, error, metadata, generation_options, attempts, max_attempts, "
  "lease_expires_at, retry_after, worker_id, last_error, lease_epoch, request";

run_record read_run(const query& q) {
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
  return r;
}

std::string seconds_from_now(double seconds) {
  auto d = std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(seconds));
  return protocol::iso_timestamp(std::chrono::system_clock::now() + d);
}

// Milliseconds from an iso timestamp until now (null when the text is not one).
std::optional<double> ms_since(const std::string& iso) {
  auto t = protocol::parse_iso_timestamp(iso);
  if (!t)
    return std::nullopt;
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now() - *t).count();
  return static_cast<double>(us / 10) / 100.0;
}

// The database, its cached statements, and the SQL of every operation. Each method runs on the
// store actor's thread; the write methods run inside the group's transaction.
class database : public sqlite::connection {
public:
  using connection::connection;

  void save_session(const session_record& r) {
    auto q = sql(R"sql(
      INSERT INTO sessions (tenant_key, user_key, session_id, created_at, updated_at, run_count,
                            last_run_id, last_status, last_query, last_answer)
      VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, ?8, ?9)
      ON CONFLICT (tenant_key, user_key, session_id) DO UPDATE SET
        updated_at = excluded.updated_at, run_count = run_count + 1, last_run_id = excluded.last_run_id,
        last_status = excluded.last_status, last_query = excluded.last_query,
        last_answer = excluded.last_answer)sql");
    q.bind(1, r.tenant_key).bind(2, r.user_key).bind(3, r.session_id).bind(4, r.created_at).bind(5, r.updated_at);
    q.bind(6, r.last_run_id).bind(7, r.last_status).bind(8, r.last_query).bind(9, r.last_answer);
    if (!q.done())
      spdlog::error("store: saving session {} failed: {}", r.session_id, error());
  }

  std::optional<session_record> get_session(const std::string& tenant, const std::string& user,
                                            const std::string& session) {
    auto q = sql(R"sql(
      SELECT created_at, updated_at, run_count, last_run_id, last_status, last_query, last_answer
      FROM sessions WHERE tenant_key = ?1 AND user_key = ?2 AND session_id = ?3)sql");
    q.bind(1, tenant).bind(2, user).bind(3, session);
    if (!q.row())
      return std::nullopt;
    return session_record{tenant,     user,         session,   q.text(0), q.text(1), q.integer(2),
                          q.text(3),  q.text(4),    q.text(5), q.text(6)};
  }

  std::optional<run_record> get_run(const std::string& run_id) {
    static const std::string text = std::string("SELECT ") + run_columns + " FROM runs WHERE run_id = ?1";
    auto q = sql(text.c_str());
    q.bind(1, run_id);
    if (!q.row())
      return std::nullopt;
    return read_run(q);
  }

  bool insert_run(const run_record& r) {
    auto q = sql(R"sql(
      INSERT INTO runs (run_id, run_kind, session_id, tenant_key, user_key, status, created_at, updated_at,
                        started_at, event_count, metadata, generation_options, attempts, max_attempts,
                        lease_expires_at, worker_id, lease_epoch, request)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8, 0, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
      ON CONFLICT (run_id) DO NOTHING)sql");
    q.bind(1, r.run_id).bind(2, r.run_kind).bind(3, r.session_id).bind(4, r.tenant_key).bind(5, r.user_key);
    q.bind(6, r.status).bind(7, r.created_at).bind(8, r.started_at).bind(9, r.metadata);
    q.bind(10, r.generation_options).bind(11, int64_t{r.attempts}).bind(12, int64_t{r.max_attempts});
    q.bind(13, r.lease_expires_at).bind(14, r.worker_id).bind(15, r.lease_epoch).bind(16, r.request);
    return q.done() && sqlite3_changes(raw()) == 1;
  }

  // Starts an attempt of `run_id`: attempts+1, a new epoch, the lease (AS-54).
  void start_attempt(const std::string& run_id, const std::string& worker_id, double lease_seconds) {
    auto now = protocol::iso_now();
    auto q = sql(R"sql(
      UPDATE runs SET status = 'running', attempts = attempts + 1, lease_epoch = lease_epoch + 1,
        worker_id = ?2, lease_expires_at = ?3, retry_after = '', error = '', completed_at = '',
        cancelled_at = '', duration_ms = NULL, updated_at = ?4,
        started_at = CASE WHEN started_at = '' THEN ?4 ELSE started_at END
      WHERE run_id = ?1)sql");
    q.bind(1, run_id).bind(2, worker_id).bind(3, seconds_from_now(lease_seconds)).bind(4, now);
    q.done();
  }

  // The run's record when `lease_epoch` still holds it, else nullopt (AS-82).
  std::optional<run_record> held(const std::string& run_id, int64_t lease_epoch) {
    auto r = get_run(run_id);
    if (!r || r->status != "running" || r->lease_epoch != lease_epoch)
      return std::nullopt;
    return r;
  }

  bool append(const std::string& run_id, int64_t lease_epoch, const stored_event& e) {
    auto update = sql(R"sql(
      UPDATE runs SET event_count = ?3 + 1, updated_at = ?4
      WHERE run_id = ?1 AND lease_epoch = ?2 AND status = 'running' AND event_count = ?3)sql");
    update.bind(1, run_id).bind(2, lease_epoch).bind(3, e.sequence).bind(4, protocol::iso_now());
    if (!update.done() || sqlite3_changes(raw()) != 1)
      return false;
    return insert_event(run_id, e);
  }

  // Ends the attempt the store ends on its caller's word (cancel, recovery) with the caller's `error`
  // event at the run's next sequence, so a stream of the run replays a terminal event (AS-14, AS-90).
  void append_closing(run_record& r, const protocol::attempt_end& end) {
    insert_event(r.run_id, protocol::closing_event(r, end));
    r.event_count += 1;
    auto q = sql("UPDATE runs SET event_count = ?2 WHERE run_id = ?1");
    q.bind(1, r.run_id).bind(2, r.event_count);
    q.done();
  }

  bool insert_event(const std::string& run_id, const stored_event& e) {
    auto q = sql("INSERT INTO run_events (run_id, sequence, type, payload) VALUES (?1, ?2, ?3, ?4)");
    q.bind(1, run_id).bind(2, e.sequence).bind(3, e.type).bind(4, e.json);
    return q.done();
  }

  // Sets a run terminal (completed | failed | cancelled) and writes its trace (AS-55).
  run_record finish(run_record r, const std::string& status, const std::string& error,
                    const protocol::trace_facts& facts) {
    auto now = protocol::iso_now();
    r.status = status;
    r.error = error;
    r.completed_at = now;
    r.cancelled_at = status == "cancelled" ? now : "";
    r.duration_ms = ms_since(r.started_at.empty() ? r.created_at : r.started_at);
    r.lease_expires_at.clear();
    r.updated_at = now;
    auto q = sql(R"sql(
      UPDATE runs SET status = ?2, error = ?3, completed_at = ?4, cancelled_at = ?5, duration_ms = ?6,
        lease_expires_at = '', updated_at = ?4, lease_epoch = ?7
      WHERE run_id = ?1)sql");
    q.bind(1, r.run_id).bind(2, status).bind(3, error).bind(4, now).bind(5, r.cancelled_at).bind(6, r.duration_ms);
    q.bind(7, r.lease_epoch);
    q.done();
    auto t = sql(R"sql(
      INSERT INTO traces (run_id, session_id, tenant_key, trace_type, status, completed_at, payload)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
      ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, completed_at = excluded.completed_at,
        payload = excluded.payload)sql");
    t.bind(1, r.run_id).bind(2, r.session_id).bind(3, r.tenant_key).bind(4, facts.trace_type).bind(5, status);
    t.bind(6, now).bind(7, protocol::trace_json(r, facts));
    t.done();
    return r;
  }

  void requeue(const std::string& run_id, int64_t lease_epoch, const std::string& last_error, double retry_seconds) {
    auto q = sql(R"sql(
      UPDATE runs SET status = 'queued', last_error = ?3, retry_after = ?4, lease_expires_at = '',
        lease_epoch = ?2, updated_at = ?5
      WHERE run_id = ?1)sql");
    q.bind(1, run_id).bind(2, lease_epoch).bind(3, last_error);
    q.bind(4, retry_seconds > 0 ? seconds_from_now(retry_seconds) : std::string());
    q.bind(5, protocol::iso_now());
    q.done();
  }
};

// The durable counts of GET /v1/metrics; bytes are the pages each table and its indexes use.
approval_list list_approvals(database& db, const protocol::approval_query& filter);

// The parts of the counts that read whole tables.
void add_details(database& db, protocol::store_stats& s) {
  {
    auto q = db.sql("SELECT AVG(duration_ms) FROM runs WHERE duration_ms IS NOT NULL");
    if (q.row())
      s.avg_duration_ms = q.real(0);
  }
  {
    auto q = db.sql("SELECT COUNT(*), COALESCE(SUM(type = 'error'), 0) FROM run_events");
    if (q.row()) {
      s.event_count = q.integer(0);
      s.error_event_count = q.integer(1);
    }
  }
  {
    auto q = db.sql("SELECT AVG(json_extract(payload, '$.duration_ms')) FROM run_events WHERE type = 'tool_result'");
    if (q.row())
      s.avg_tool_duration_ms = q.real(0);
  }
  {
    auto q = db.sql(R"sql(
      SELECT COALESCE(SUM(json_extract(payload, '$.llm_usage_total.prompt_tokens')), 0),
             COALESCE(SUM(json_extract(payload, '$.llm_usage_total.completion_tokens')), 0),
             COALESCE(SUM(json_extract(payload, '$.llm_usage_total.total_tokens')), 0) FROM traces)sql");
    if (q.row())
      s.usage_total = {q.integer(0), q.integer(1), q.integer(2)};
  }
  {
    auto q = db.sql(R"sql(
      SELECT payload FROM run_events WHERE type = 'error'
      ORDER BY json_extract(payload, '$.timestamp') DESC LIMIT 5)sql");
    while (q.row())
      s.recent_errors.push_back(q.text(0));
  }
}

// The durable counts; `detailed` adds what reads every event, trace and page (averages, token totals,
// recent errors, bytes per stream), which only GET /v1/metrics shows.
protocol::store_stats stats_of(database& db, bool detailed) {
  protocol::store_stats s;
  auto now = protocol::iso_now();
  auto scalar = [&](const char* text, const std::string& arg = {}) {
    auto q = db.sql(text);
    if (!arg.empty())
      q.bind(1, arg);
    return q.row() ? q.integer(0) : 0;
  };
  auto grouped = [&](const char* text, std::map<std::string, int64_t>& into) {
    auto q = db.sql(text);
    while (q.row())
      into[q.text(0)] = q.integer(1);
  };
  grouped("SELECT status, COUNT(*) FROM runs GROUP BY status", s.run_status_counts);
  for (auto& [status, n] : s.run_status_counts)
    s.run_count += n;
  s.ready_queued_count = scalar("SELECT COUNT(*) FROM runs WHERE status = 'queued' AND retry_after <= ?1", now);
  s.delayed_queued_count = scalar("SELECT COUNT(*) FROM runs WHERE status = 'queued' AND retry_after > ?1", now);
  s.stale_lease_count = scalar("SELECT COUNT(*) FROM runs WHERE status = 'running' AND lease_expires_at < ?1", now);
  grouped("SELECT status, COUNT(*) FROM traces GROUP BY status", s.trace_status_counts);
  for (auto& [status, n] : s.trace_status_counts)
    s.trace_count += n;
  s.audit_count = scalar("SELECT COUNT(*) FROM audit");
  protocol::approval_query every;
  every.limit = 1; // only the summary is wanted
  s.approvals = list_approvals(db, every).summary;
  std::map<std::string, int64_t> bytes;
  if (detailed) {
    add_details(db, s);
    grouped(R"sql(
      SELECT m.tbl_name, SUM(d.pgsize) FROM dbstat d JOIN sqlite_master m ON d.name = m.name
      GROUP BY m.tbl_name)sql",
            bytes);
  }
  struct stream_query {
    const char* name;
    const char* count;
    const char* last;
  };
  for (auto [name, count, last] :
       {stream_query{"runs", "SELECT COUNT(*) FROM runs", "SELECT MAX(created_at) FROM runs"},
        stream_query{"run_events", "SELECT COUNT(*) FROM run_events", nullptr},
        stream_query{"traces", "SELECT COUNT(*) FROM traces", "SELECT MAX(completed_at) FROM traces"},
        stream_query{"sessions", "SELECT COUNT(*) FROM sessions", "SELECT MAX(updated_at) FROM sessions"},
        stream_query{"approvals", "SELECT COUNT(*) FROM approvals", "SELECT MAX(created_at) FROM approvals"},
        stream_query{"audit", "SELECT COUNT(*) FROM audit", "SELECT MAX(created_at) FROM audit"},
        stream_query{"rate_limits", "SELECT COUNT(*) FROM rate_limits", nullptr}}) {
    protocol::stream_stats st{name, scalar(count), bytes[name], {}};
    if (last) {
      auto q = db.sql(last);
      if (q.row())
        st.last_created_at = q.text(0);
    }
    s.streams.push_back(std::move(st));
  }
  return s;
}

// A new run as the store accepts it: what the caller said about it, and nothing of its state, which
// only the store's own transitions set.
run_record accepted(run_record r) {
  run_record fresh;
  for (auto field : {&run_record::run_id, &run_record::run_kind, &run_record::session_id, &run_record::tenant_key,
                     &run_record::user_key, &run_record::metadata, &run_record::generation_options,
                     &run_record::request})
    fresh.*field = std::move(r.*field);
  fresh.max_attempts = r.max_attempts;
  fresh.status = "queued";
  fresh.created_at = fresh.updated_at = protocol::iso_now();
  return fresh;
}

constexpr const char* approval_columns =
  "request_id, run_id, session_id, tenant_key, user_key, task_id, tool_call_id, tool_name, tool_args, reason, "
  "decision_level, pattern_matched, policy_scope, policy_action, policy_matched, status, approved, timeout_seconds, "
  "created_at, expires_at, resolved_at, resolution_reason";

protocol::approval_record read_approval(const query& q) {
  protocol::approval_record r;
  int i = 0;
  for (auto field : {&r.request_id, &r.run_id, &r.session_id, &r.tenant_key, &r.user_key, &r.task_id, &r.tool_call_id,
                     &r.tool_name, &r.tool_args, &r.reason, &r.decision_level, &r.pattern_matched, &r.policy_scope,
                     &r.policy_action})
    *field = q.text(i++);
  r.policy_matched = q.integer(i++) != 0;
  r.status = q.text(i++);
  if (auto approved = q.real(i++))
    r.approved = *approved != 0;
  r.timeout_seconds = q.real(i++).value_or(0);
  for (auto field : {&r.created_at, &r.expires_at, &r.resolved_at, &r.resolution_reason})
    *field = q.text(i++);
  return r;
}

void save_approval(database& db, const protocol::approval_record& r) {
  static const std::string text = std::string("INSERT OR REPLACE INTO approvals (") + approval_columns
                                  + ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, "
                                    "?16, ?17, ?18, ?19, ?20, ?21, ?22)";
  auto q = db.sql(text.c_str());
  int i = 1;
  for (auto field : {&r.request_id, &r.run_id, &r.session_id, &r.tenant_key, &r.user_key, &r.task_id, &r.tool_call_id,
                     &r.tool_name, &r.tool_args, &r.reason, &r.decision_level, &r.pattern_matched, &r.policy_scope,
                     &r.policy_action})
    q.bind(i++, *field);
  q.bind(i++, int64_t{r.policy_matched});
  q.bind(i++, r.status);
  q.bind(i++, r.approved ? std::optional<double>(*r.approved ? 1 : 0) : std::nullopt);
  q.bind(i++, std::optional<double>(r.timeout_seconds));
  for (auto field : {&r.created_at, &r.expires_at, &r.resolved_at, &r.resolution_reason})
    q.bind(i++, *field);
  if (!q.done())
    spdlog::error("store: saving approval {} failed: {}", r.request_id, db.error());
}

// The approvals matching the query's filters: one page in its order, and the summary of all of them.
approval_list list_approvals(database& db, const protocol::approval_query& filter) {
  std::string where = " WHERE 1 = 1";
  std::vector<std::string> args;
  for (auto& [key, value] : filter.filters) {
    args.push_back(value);
    where += " AND " + key + " = ?" + std::to_string(args.size()); // keys come from a fixed list
  }
  auto bind_all = [&](query& q) {
    for (std::size_t i = 0; i < args.size(); ++i)
      q.bind(static_cast<int>(i + 1), args[i]);
  };
  approval_list out;
  // Filtered queries vary by which filters are set: prepared per call rather than cached.
  auto run = [&](const std::string& text, auto on_row) {
    auto s = prepare(db.raw(), text.c_str());
    query q(s.get());
    bind_all(q);
    while (q.row())
      on_row(q);
  };
  auto limit = filter.limit == 0 ? std::string("-1") : std::to_string(filter.limit);
  run(std::string("SELECT ") + approval_columns + " FROM approvals" + where + " ORDER BY created_at "
        + (filter.ascending ? "ASC" : "DESC") + ", request_id LIMIT " + limit + " OFFSET "
        + std::to_string(filter.offset),
      [&](const auto& q) { out.page.push_back(read_approval(q)); });
  auto& s = out.summary;
  run("SELECT status, COUNT(*) FROM approvals" + where + " GROUP BY status", [&](const auto& q) {
    s.status_counts[q.text(0)] = q.integer(1);
    s.count += q.integer(1);
  });
  s.pending_count = s.status_counts.count("pending") ? s.status_counts["pending"] : 0;
  s.expired_count = s.status_counts.count("expired") ? s.status_counts["expired"] : 0;
  run("SELECT policy_action, COUNT(*) FROM approvals" + where + " AND policy_action != '' GROUP BY policy_action",
      [&](const auto& q) { s.policy_action_counts[q.text(0)] = q.integer(1); });
  double total_ms = 0;
  int64_t resolved = 0;
  run("SELECT created_at, resolved_at FROM approvals" + where + " AND resolved_at != ''", [&](const auto& q) {
    auto from = protocol::parse_iso_timestamp(q.text(0));
    auto to = protocol::parse_iso_timestamp(q.text(1));
    if (!from || !to)
      return;
    total_ms += std::chrono::duration<double, std::milli>(*to - *from).count();
    ++resolved;
  });
  if (resolved > 0)
    s.avg_resolution_ms = total_ms / static_cast<double>(resolved);
  return out;
}

struct store_state {
  static inline const char* name = "sqlite_store";
  std::unique_ptr<database> db;
  std::string path;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> audit_file{nullptr, &std::fclose}; // JSONL copy of `audit`
  sqlite::write_batch<database> batch;

  void flush() { batch.flush(*db, "store"); }
};

using store_pointer = store_actor::stateful_pointer<store_state>;
using sqlite::enqueue;
using sqlite::write;

caf::error run_not_found() {
  return make_error(errc::not_found, "Run not found");
}

caf::error fenced() {
  return make_error(errc::conflict, "Run lease lost: the run is held at a newer lease epoch");
}

store_actor::behavior_type sqlite_store_behavior(store_pointer self, db_ptr raw, std::string path,
                                                 std::string audit_path) {
  self->state.db = std::make_unique<database>(std::move(raw));
  self->state.path = std::move(path);
  if (!audit_path.empty()) {
    self->state.audit_file.reset(std::fopen(audit_path.c_str(), "a"));
    if (!self->state.audit_file)
      spdlog::error("store: cannot append to {}; audit records are kept in the store only", audit_path);
  }
  sqlite::flush_on_exit(self);
  using result_t = std::variant<run_record, caf::error>;
  return {
    [=](save_session_atom, session_record& r) {
      enqueue(self, [r = std::move(r)](database& db) { db.save_session(r); });
    },
    [=](flush_atom) { self->state.flush(); },
    [=](get_session_atom, const std::string& tenant, const std::string& user,
        const std::string& session) -> caf::result<session_record> {
      self->state.flush();
      if (auto r = self->state.db->get_session(tenant, user, session))
        return std::move(*r);
      return make_error(errc::not_found, "Session not found");
    },
    [=](create_run_atom, run_record& r) {
      return write<run_record>(self, [r = std::move(r)](database& db) mutable -> result_t {
        r = accepted(std::move(r));
        if (!db.insert_run(r))
          return make_error(errc::conflict, "Run already exists");
        return r;
      });
    },
    [=](begin_chat_atom, run_record& r, std::string& worker_id, double lease_seconds) {
      return write<run_record>(self, [=, r = std::move(r)](database& db) mutable -> result_t {
        if (auto stored = db.get_run(r.run_id)) {
          // AS-10: only the caller's own terminal chat run reopens; another caller's run is never touched.
          if (stored->run_kind != "chat" || !protocol::is_terminal(stored->status)
              || stored->tenant_key != r.tenant_key || stored->user_key != r.user_key)
            return make_error(errc::conflict, "Run already exists");
        } else {
          r = accepted(std::move(r));
          if (!db.insert_run(r))
            return make_error(errc::conflict, "Run already exists");
        }
        db.start_attempt(r.run_id, worker_id, lease_seconds);
        return *db.get_run(r.run_id);
      });
    },
    [=](claim_atom, std::string& worker_id, double lease_seconds, uint32_t n) {
      return write<run_claim>(self, [=](database& db) -> std::variant<run_claim, caf::error> {
        auto now = protocol::iso_now();
        run_claim claim;
        std::vector<std::string> ready;
        {
          auto q = db.sql(R"sql(
            SELECT run_id FROM runs WHERE status = 'queued' AND retry_after <= ?1
            ORDER BY created_at, rowid LIMIT ?2)sql");
          q.bind(1, now).bind(2, static_cast<int64_t>(n));
          while (q.row())
            ready.push_back(q.text(0));
        }
        for (auto& id : ready) {
          db.start_attempt(id, worker_id, lease_seconds);
          claim.runs.push_back(*db.get_run(id));
        }
        auto q = db.sql("SELECT MIN(retry_after) FROM runs WHERE status = 'queued' AND retry_after > ?1");
        q.bind(1, now);
        if (q.row())
          if (auto next = protocol::parse_iso_timestamp(q.text(0)))
            claim.next_ready_seconds = std::max(
              0.0, std::chrono::duration<double>(*next - std::chrono::system_clock::now()).count());
        return claim;
      });
    },
    [=](append_atom, std::string& run_id, int64_t epoch, stored_event& e) {
      return write<bool>(self, [=, e = std::move(e)](database& db) -> std::variant<bool, caf::error> {
        if (!db.append(run_id, epoch, e))
          return fenced();
        return true;
      });
    },
    [=](transition_atom, run_transition& t) {
      return write<run_record>(self, [t = std::move(t)](database& db) -> result_t {
        auto held = db.held(t.run_id, t.lease_epoch);
        if (!held)
          return fenced();
        if (t.status == "queued") {
          db.requeue(t.run_id, t.lease_epoch, t.last_error, t.retry_seconds);
          return *db.get_run(t.run_id);
        }
        return db.finish(std::move(*held), t.status, t.error, t.trace);
      });
    },
    [=](renew_atom, std::string& run_id, int64_t epoch, double lease_seconds) {
      return write<bool>(self, [=](database& db) -> std::variant<bool, caf::error> {
        auto q = db.sql(R"sql(
          UPDATE runs SET lease_expires_at = ?3 WHERE run_id = ?1 AND lease_epoch = ?2 AND status = 'running')sql");
        q.bind(1, run_id).bind(2, epoch).bind(3, seconds_from_now(lease_seconds));
        if (!q.done() || sqlite3_changes(db.raw()) != 1)
          return fenced();
        return true;
      });
    },
    [=](recover_atom, bool all_running, protocol::lapse_ends& ends) {
      return write<recovery_report>(self, [=, ends = std::move(ends)](database& db) -> std::variant<recovery_report, caf::error> {
        // With `all_running` the cutoff is "" and every running run is taken.
        auto expired = db.ids("SELECT run_id FROM runs WHERE status = 'running' AND (?1 = '' OR lease_expires_at < ?1)",
                              all_running ? std::string() : protocol::iso_now());
        recovery_report report;
        for (auto& id : expired) {
          auto r = *db.get_run(id);
          r.lease_epoch += 1;
          if (r.attempts < r.max_attempts) {
            db.append_closing(r, ends.requeued);
            db.requeue(id, r.lease_epoch, ends.requeued.message, 0);
            ++report.requeued;
          } else {
            db.append_closing(r, ends.failed);
            db.finish(r, "failed", ends.failed.message, protocol::unfinished_trace_facts(r));
            report.failed_run_ids.push_back(id);
            ++report.failed;
          }
        }
        return report;
      });
    },
    [=](cancel_atom, std::string& run_id, protocol::attempt_end& end) {
      return write<run_record>(self, [run_id, end = std::move(end)](database& db) -> result_t {
        auto r = db.get_run(run_id);
        if (!r)
          return run_not_found();
        if (protocol::is_terminal(r->status))
          return std::move(*r);
        r->lease_epoch += 1;
        if (r->status == "running")
          db.append_closing(*r, end);
        auto facts = protocol::unfinished_trace_facts(*r);
        return db.finish(std::move(*r), "cancelled", end.message, facts);
      });
    },
    [=](get_run_atom, const std::string& run_id) -> caf::result<run_record> {
      self->state.flush();
      if (auto r = self->state.db->get_run(run_id))
        return std::move(*r);
      return run_not_found();
    },
    [=](list_runs_atom, const std::string& status, int64_t limit) -> caf::result<run_list> {
      self->state.flush();
      auto& db = *self->state.db;
      // Two statements rather than `?1 = '' OR status = ?1`, which would keep SQLite off the index.
      static const std::string all = std::string("SELECT ") + run_columns
                                     + " FROM runs ORDER BY created_at DESC, rowid DESC LIMIT ?2";
      static const std::string by_status = std::string("SELECT ") + run_columns
                                           + " FROM runs WHERE status = ?1 ORDER BY created_at DESC, rowid DESC LIMIT ?2";
      run_list out;
      {
        auto q = db.sql(status.empty() ? all.c_str() : by_status.c_str());
        if (!status.empty())
          q.bind(1, status);
        q.bind(2, limit);
        while (q.row())
          out.runs.push_back(read_run(q));
      }
      auto q = db.sql(status.empty() ? "SELECT COUNT(*) FROM runs" : "SELECT COUNT(*) FROM runs WHERE status = ?1");
      if (!status.empty())
        q.bind(1, status);
      if (q.row())
        out.total_count = q.integer(0);
      return out;
    },
    [=](events_atom, const std::string& run_id, int64_t after, int64_t limit) -> caf::result<run_events_page> {
      self->state.flush();
      auto& db = *self->state.db;
      auto r = db.get_run(run_id);
      if (!r)
        return run_not_found();
      run_events_page page{std::move(*r), {}};
      auto q = db.sql(R"sql(
        SELECT sequence, type, payload FROM run_events WHERE run_id = ?1 AND sequence > ?2
        ORDER BY sequence LIMIT ?3)sql");
      q.bind(1, run_id).bind(2, after).bind(3, limit == 0 ? int64_t{-1} : limit);
      while (q.row())
        page.events.push_back({q.integer(0), q.text(1), q.text(2)});
      return page;
    },
    [=](list_traces_atom, const std::string& session_id, int64_t limit) -> caf::result<trace_list> {
      self->state.flush();
      auto& db = *self->state.db;
      trace_list out;
      {
        auto q = db.sql(R"sql(
          SELECT payload FROM traces WHERE (?1 = '' OR session_id = ?1)
          ORDER BY completed_at DESC, rowid DESC LIMIT ?2)sql");
        q.bind(1, session_id).bind(2, limit);
        while (q.row())
          out.traces.push_back(q.text(0));
      }
      auto q = db.sql("SELECT COUNT(*) FROM traces WHERE (?1 = '' OR session_id = ?1)");
      q.bind(1, session_id);
      if (q.row())
        out.total_count = q.integer(0);
      return out;
    },
    [=](save_approval_atom, protocol::approval_record& r) {
      return write<protocol::approval_record>(
        self, [r = std::move(r)](database& db) -> std::variant<protocol::approval_record, caf::error> {
          save_approval(db, r);
          return r;
        });
    },
    [=](get_approval_atom, const std::string& id) -> caf::result<protocol::approval_record> {
      self->state.flush();
      static const std::string text = std::string("SELECT ") + approval_columns + " FROM approvals WHERE request_id = ?1";
      auto q = self->state.db->sql(text.c_str());
      q.bind(1, id);
      if (!q.row())
        return make_error(errc::not_found, "Approval request not found");
      return read_approval(q);
    },
    [=](list_approvals_atom, const protocol::approval_query& filter) -> caf::result<approval_list> {
      self->state.flush();
      return list_approvals(*self->state.db, filter);
    },
    [=](rate_atom, std::string& user_key, int64_t limit, int64_t now) {
      using decision = protocol::rate_limit_decision;
      return write<decision>(self, [=](database& db) -> std::variant<decision, caf::error> {
        std::optional<int64_t> start;
        int64_t count = 0;
        {
          auto q = db.sql("SELECT window_start, count FROM rate_limits WHERE user_key = ?1");
          q.bind(1, user_key);
          if (q.row()) {
            start = q.integer(0);
            count = q.integer(1);
          }
        }
        auto d = protocol::decide_rate_limit(limit, start, count, now);
        if (d.counted) {
          auto q = db.sql("INSERT OR REPLACE INTO rate_limits (user_key, window_start, count) VALUES (?1, ?2, ?3)");
          q.bind(1, user_key).bind(2, d.window_start).bind(3, d.count);
          q.done();
        }
        return d;
      });
    },
    [=](audit_atom, protocol::audit_record& r) {
      auto line = protocol::audit_json(r);
      enqueue(
        self,
        [r, line](database& db) {
          auto q = db.sql("INSERT INTO audit (run_id, tenant_key, created_at, payload) VALUES (?1, ?2, ?3, ?4)");
          q.bind(1, r.run_id).bind(2, r.tenant_key).bind(3, r.created_at).bind(4, line);
          q.done();
        },
        [self, line](bool committed) {
          auto f = self->state.audit_file.get();
          if (!committed || !f)
            return;
          std::fputs(line.c_str(), f);
          std::fputc('\n', f);
          std::fflush(f);
        });
    },
    [=](stats_atom, bool detailed) -> caf::result<protocol::store_stats> {
      self->state.flush();
      auto s = stats_of(*self->state.db, detailed);
      s.root = self->state.path;
      return s;
    },
    [=](get_trace_atom, const std::string& run_id) -> caf::result<std::string> {
      self->state.flush();
      auto q = self->state.db->sql("SELECT payload FROM traces WHERE run_id = ?1");
      q.bind(1, run_id);
      if (!q.row())
        return make_error(errc::not_found, "Trace not found");
      return q.text(0);
    },
  };
}

} // namespace

std::string sqlite::migrate(sqlite3* db) {
  if (auto err = exec(db, "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)"); !err.empty())
    return err;
  auto q = prepare(db, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
  if (!q || sqlite3_step(q.get()) != SQLITE_ROW)
    return sqlite3_errmsg(db);
  auto current = sqlite3_column_int(q.get(), 0);
  int version = 0;
  for (auto sql : migrations) {
    ++version;
    if (version <= current)
      continue;
    std::string tx = std::string("BEGIN;") + sql + "INSERT INTO schema_migrations(version) VALUES ("
                     + std::to_string(version) + ");COMMIT;";
    if (auto err = exec(db, tx.c_str()); !err.empty()) {
      exec(db, "ROLLBACK");
      return "migration " + std::to_string(version) + ": " + err;
    }
  }
  return {};
}

std::variant<store_actor, std::string> spawn_sqlite_store(caf::actor_system& sys, const std::string& path,
                                                         const std::string& audit_path) {
  auto db = sqlite::open(path);
  if (auto err = std::get_if<std::string>(&db))
    return std::move(*err);
  return sys.spawn<caf::detached>(sqlite_store_behavior, std::get<db_ptr>(std::move(db)), path, audit_path);
}

} // namespace troupe::io
