// Every SQL statement of the run store, in one place. Each is written once in the SQL both engines
// read, with SQLite's ?N parameters (PostgreSQL's connection reads them as $N); where PostgreSQL needs
// its own spelling, `postgres_spelling` at the end gives it. Each is a named array, so its address
// keys the connection's prepared statement. Included by the run store adapters only.
#pragma once

#include "io/statement_spelling.hpp"

namespace troupe::io::store_sql {

#define TROUPE_RUN_COLUMNS                                                                                        \
  "run_id, run_kind, session_id, tenant_key, user_key, status, created_at, updated_at, started_at, completed_at, " \
  "cancelled_at, duration_ms, event_count, error, metadata, generation_options, attempts, max_attempts, "          \
  "lease_expires_at, retry_after, worker_id, last_error, lease_epoch, request, handoffs, priority, "              \
  "policy_snapshot_hash"
#define TROUPE_APPROVAL_COLUMNS                                                                                    \
  "request_id, run_id, session_id, tenant_key, user_key, task_id, tool_call_id, tool_name, tool_args, reason, "    \
  "decision_level, pattern_matched, policy_scope, policy_action, policy_matched, status, approved, "               \
  "timeout_seconds, created_at, expires_at, resolved_at, resolution_reason"

// ---- Sessions ----

inline constexpr char save_session[] = R"sql(
  INSERT INTO sessions (tenant_key, user_key, session_id, created_at, updated_at, run_count,
                        last_run_id, last_status, last_query, last_answer)
  VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, ?8, ?9)
  ON CONFLICT (tenant_key, user_key, session_id) DO UPDATE SET
    updated_at = excluded.updated_at, run_count = sessions.run_count + 1, last_run_id = excluded.last_run_id,
    last_status = excluded.last_status, last_query = excluded.last_query,
    last_answer = excluded.last_answer)sql";

inline constexpr char get_session[] = R"sql(
  SELECT created_at, updated_at, run_count, last_run_id, last_status, last_query, last_answer
  FROM sessions WHERE tenant_key = ?1 AND user_key = ?2 AND session_id = ?3)sql";

// ---- Runs: records, attempts and leases (columns as TROUPE_RUN_COLUMNS lists them) ----

inline constexpr char get_run[] = "SELECT " TROUPE_RUN_COLUMNS " FROM runs WHERE run_id = ?1";
// The same read by a write that goes on to change the run: PostgreSQL locks the row until commit.
inline constexpr char lock_run[] = "SELECT " TROUPE_RUN_COLUMNS " FROM runs WHERE run_id = ?1";

inline constexpr char insert_run[] = R"sql(
  INSERT INTO runs (run_id, run_kind, session_id, tenant_key, user_key, status, created_at, updated_at,
                    started_at, event_count, metadata, generation_options, attempts, max_attempts,
                    lease_expires_at, worker_id, lease_epoch, request, priority, policy_snapshot_hash)
  VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8, 0, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)
  ON CONFLICT (run_id) DO NOTHING)sql";

inline constexpr char start_attempt[] = R"sql(
  UPDATE runs SET status = 'running', attempts = attempts + 1, lease_epoch = lease_epoch + 1,
    worker_id = ?2, lease_expires_at = ?3, retry_after = '', error = '', completed_at = '',
    cancelled_at = '', duration_ms = NULL, updated_at = ?4, attempt_first_sequence = event_count,
    started_at = CASE WHEN started_at = '' THEN ?4 ELSE started_at END
  WHERE run_id = ?1)sql";

inline constexpr char next_ready[] =
  "SELECT MIN(retry_after) FROM runs WHERE status = 'queued' AND retry_after > ?1";

// ---- Claims: tenants take turns, and within a tenant priority goes first (CJ-18, CJ-19) ----

// When a queued run became ready: its retry time once a retry set one, else its creation. Spelled
// as runs_claim_order indexes it, so that both engines read the claim order off that index; and since
// a run is created before now, `TROUPE_READY_AT <= now` is just `retry_after <= now`.
#define TROUPE_READY_AT "(CASE WHEN retry_after = '' THEN created_at ELSE retry_after END)"

// SQLite's claim, in steps (a step costs no round trip there): the first tenant with a run ready at
// ?1, after ?2 or of all; a tenant's running background runs (cluster.tenant_max_running); a tenant's
// ready runs in claim order, at most ?3. INDEXED BY, because SQLite's planner would rather take
// `status = 'queued'` from runs_by_status_created and sort the whole queue by tenant.
inline constexpr char next_ready_tenant[] = "SELECT tenant_key FROM runs INDEXED BY runs_claim_order WHERE "
  "status = 'queued' AND tenant_key > ?2 AND " TROUPE_READY_AT " <= ?1 ORDER BY tenant_key LIMIT 1";
inline constexpr char first_ready_tenant[] = "SELECT tenant_key FROM runs INDEXED BY runs_claim_order WHERE "
  "status = 'queued' AND " TROUPE_READY_AT " <= ?1 ORDER BY tenant_key LIMIT 1";
inline constexpr char tenant_running[] =
  "SELECT COUNT(*) FROM runs WHERE status = 'running' AND run_kind <> 'chat' AND tenant_key = ?1";
inline constexpr char tenant_ready_runs[] = "SELECT run_id FROM runs INDEXED BY runs_claim_order WHERE "
  "status = 'queued' AND tenant_key = ?2 AND " TROUPE_READY_AT " <= ?1 "
  "ORDER BY priority DESC, " TROUPE_READY_AT ", rowid LIMIT ?3";

inline constexpr char renew_lease[] =
  "UPDATE runs SET lease_expires_at = ?3 WHERE run_id = ?1 AND lease_epoch = ?2 AND status = 'running'";

// With ?1 = '' every running run is taken.
inline constexpr char lapsed_runs[] =
  "SELECT run_id FROM runs WHERE status = 'running' AND (?1 = '' OR lease_expires_at < ?1)";

inline constexpr char finish_run[] = R"sql(
  UPDATE runs SET status = ?2, error = ?3, completed_at = ?4, cancelled_at = ?5, duration_ms = ?6,
    lease_expires_at = '', updated_at = ?4, lease_epoch = ?7
  WHERE run_id = ?1)sql";

// The background runs a worker holds (a draining node's, CJ-16), and the handoff each then counts:
// past ?2 (cluster.max_handoffs) a handback charges an attempt like any other end. Its chat runs were
// cancelled with their clients' streams.
inline constexpr char held_runs[] =
  "SELECT run_id FROM runs WHERE status = 'running' AND worker_id = ?1 AND run_kind <> 'chat'";
inline constexpr char count_handoff[] =
  "UPDATE runs SET handoffs = handoffs + 1 WHERE run_id = ?1 AND handoffs < ?2";
inline constexpr char requeue_run[] = R"sql(
  UPDATE runs SET status = 'queued', last_error = ?3, retry_after = ?4, lease_expires_at = '',
    lease_epoch = ?2, updated_at = ?5
  WHERE run_id = ?1)sql";

// Two statements rather than `?1 = '' OR status = ?1`, which would keep SQLite off the index.
inline constexpr char list_runs[] =
  "SELECT " TROUPE_RUN_COLUMNS " FROM runs ORDER BY created_at DESC, rowid DESC LIMIT ?1";
inline constexpr char list_runs_by_status[] =
  "SELECT " TROUPE_RUN_COLUMNS " FROM runs WHERE status = ?1 ORDER BY created_at DESC, rowid DESC LIMIT ?2";
inline constexpr char count_runs[] = "SELECT COUNT(*) FROM runs";
inline constexpr char count_runs_by_status[] = "SELECT COUNT(*) FROM runs WHERE status = ?1";
// The same for one tenant (AS-84), the tenant last: ?1 (status, limit) as above.
inline constexpr char tenant_runs[] =
  "SELECT " TROUPE_RUN_COLUMNS " FROM runs WHERE tenant_key = ?2 ORDER BY created_at DESC, rowid DESC LIMIT ?1";
inline constexpr char tenant_runs_by_status[] = "SELECT " TROUPE_RUN_COLUMNS
  " FROM runs WHERE status = ?1 AND tenant_key = ?3 ORDER BY created_at DESC, rowid DESC LIMIT ?2";
inline constexpr char count_tenant_runs[] = "SELECT COUNT(*) FROM runs WHERE tenant_key = ?1";
inline constexpr char count_tenant_runs_by_status[] =
  "SELECT COUNT(*) FROM runs WHERE status = ?1 AND tenant_key = ?2";

// ---- Run events ----

// The fence of an append (AS-82): only the holder's epoch, only the next sequence.
inline constexpr char count_appended_event[] = R"sql(
  UPDATE runs SET event_count = ?3 + 1, updated_at = ?4
  WHERE run_id = ?1 AND lease_epoch = ?2 AND status = 'running' AND event_count = ?3)sql";

// Where the running attempt's events begin, and the type of the log's last event (NULL when the log
// is empty): what an end from outside needs to know of the attempt it ends (AS-14).
inline constexpr char attempt_log[] = R"sql(
  SELECT runs.attempt_first_sequence, run_events.type FROM runs
  LEFT JOIN run_events ON run_events.run_id = runs.run_id AND run_events.sequence = runs.event_count - 1
  WHERE runs.run_id = ?1)sql";

inline constexpr char set_event_count[] = "UPDATE runs SET event_count = ?2 WHERE run_id = ?1";

inline constexpr char insert_event[] =
  "INSERT INTO run_events (run_id, sequence, type, payload) VALUES (?1, ?2, ?3, ?4)";

inline constexpr char events_after[] = R"sql(
  SELECT sequence, type, payload FROM run_events WHERE run_id = ?1 AND sequence > ?2
  ORDER BY sequence LIMIT ?3)sql";

// ---- Traces ----

inline constexpr char upsert_trace[] = R"sql(
  INSERT INTO traces (run_id, session_id, tenant_key, trace_type, status, completed_at, payload)
  VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
  ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, completed_at = excluded.completed_at,
    payload = excluded.payload)sql";

inline constexpr char list_traces[] = R"sql(
  SELECT payload FROM traces WHERE (?1 = '' OR session_id = ?1)
  ORDER BY completed_at DESC, rowid DESC LIMIT ?2)sql";
inline constexpr char count_traces[] = "SELECT COUNT(*) FROM traces WHERE (?1 = '' OR session_id = ?1)";
inline constexpr char tenant_traces[] = R"sql(
  SELECT payload FROM traces WHERE tenant_key = ?3 AND (?1 = '' OR session_id = ?1)
  ORDER BY completed_at DESC, rowid DESC LIMIT ?2)sql";
inline constexpr char count_tenant_traces[] =
  "SELECT COUNT(*) FROM traces WHERE tenant_key = ?2 AND (?1 = '' OR session_id = ?1)";
inline constexpr char get_trace[] = "SELECT payload FROM traces WHERE run_id = ?1";

// ---- Approvals (columns as TROUPE_APPROVAL_COLUMNS lists them) ----

inline constexpr char get_approval[] = "SELECT " TROUPE_APPROVAL_COLUMNS " FROM approvals WHERE request_id = ?1";

inline constexpr char save_approval[] =
  "INSERT INTO approvals (" TROUPE_APPROVAL_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
  "?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22) ON CONFLICT (request_id) DO UPDATE SET "
  "run_id = excluded.run_id, session_id = excluded.session_id, tenant_key = excluded.tenant_key, "
  "user_key = excluded.user_key, task_id = excluded.task_id, tool_call_id = excluded.tool_call_id, "
  "tool_name = excluded.tool_name, tool_args = excluded.tool_args, reason = excluded.reason, "
  "decision_level = excluded.decision_level, pattern_matched = excluded.pattern_matched, "
  "policy_scope = excluded.policy_scope, policy_action = excluded.policy_action, "
  "policy_matched = excluded.policy_matched, status = excluded.status, approved = excluded.approved, "
  "timeout_seconds = excluded.timeout_seconds, created_at = excluded.created_at, "
  "expires_at = excluded.expires_at, resolved_at = excluded.resolved_at, "
  "resolution_reason = excluded.resolution_reason";

// A resolution or expiry lands only on a pending approval, so that of concurrent resolutions on any
// nodes exactly one wins (CJ-26).
inline constexpr char settle_approval[] = R"sql(
  UPDATE approvals SET status = ?2, approved = ?3, resolved_at = ?4, resolution_reason = ?5
  WHERE request_id = ?1 AND status = 'pending')sql";

// A filtered list is these heads, then " WHERE 1 = 1" and one " AND <key> = ?n" per filter (keys
// from a fixed list), then the tail; it varies by filter, so it is prepared per call.
inline constexpr char approvals_page[] = "SELECT " TROUPE_APPROVAL_COLUMNS " FROM approvals";
inline constexpr char approvals_by_status[] = "SELECT status, COUNT(*) FROM approvals";
inline constexpr char approvals_by_status_tail[] = " GROUP BY status";
inline constexpr char approvals_by_action[] = "SELECT policy_action, COUNT(*) FROM approvals";
inline constexpr char approvals_by_action_tail[] = " AND policy_action != '' GROUP BY policy_action";
inline constexpr char approval_resolutions[] = "SELECT created_at, resolved_at FROM approvals";
inline constexpr char approval_resolutions_tail[] = " AND resolved_at != ''";

// ---- Rate limits and audit ----

inline constexpr char get_rate_window[] = "SELECT window_start, count FROM rate_limits WHERE user_key = ?1";
inline constexpr char put_rate_window[] = R"sql(
  INSERT INTO rate_limits (user_key, window_start, count) VALUES (?1, ?2, ?3)
  ON CONFLICT (user_key) DO UPDATE SET window_start = excluded.window_start, count = excluded.count)sql";

inline constexpr char insert_audit[] =
  "INSERT INTO audit (run_id, tenant_key, created_at, payload) VALUES (?1, ?2, ?3, ?4)";

// ---- Health and counts (AS-59) ----

inline constexpr char schema_version[] = "SELECT COALESCE(MAX(version), 0) FROM schema_migrations";

// PostgreSQL only (CJ-11): what waits for vacuum, and how old the oldest open transaction is.
inline constexpr char dead_tuples[] = "SELECT COALESCE(SUM(n_dead_tup), 0) FROM pg_stat_user_tables";
inline constexpr char oldest_transaction[] = R"sql(
  SELECT COALESCE(EXTRACT(EPOCH FROM now() - MIN(xact_start)), 0) FROM pg_stat_activity
  WHERE datname = current_database() AND xact_start IS NOT NULL)sql";

inline constexpr char run_status_counts[] = "SELECT status, COUNT(*) FROM runs GROUP BY status";
inline constexpr char ready_queued_count[] =
  "SELECT COUNT(*) FROM runs WHERE status = 'queued' AND retry_after <= ?1";
inline constexpr char delayed_queued_count[] =
  "SELECT COUNT(*) FROM runs WHERE status = 'queued' AND retry_after > ?1";
inline constexpr char stale_lease_count[] =
  "SELECT COUNT(*) FROM runs WHERE status = 'running' AND lease_expires_at < ?1";
inline constexpr char trace_status_counts[] = "SELECT status, COUNT(*) FROM traces GROUP BY status";
inline constexpr char audit_count[] = "SELECT COUNT(*) FROM audit";
inline constexpr char table_bytes[] = R"sql(
  SELECT m.tbl_name, SUM(d.pgsize) FROM dbstat d JOIN sqlite_master m ON d.name = m.name
  GROUP BY m.tbl_name)sql";

// The detailed counts, which read whole tables.
inline constexpr char avg_run_duration[] = "SELECT AVG(duration_ms) FROM runs WHERE duration_ms IS NOT NULL";
inline constexpr char event_counts[] = "SELECT COUNT(*), COALESCE(SUM(CASE WHEN type = 'error' THEN 1 ELSE 0 END), 0) FROM run_events";
inline constexpr char avg_tool_duration[] =
  "SELECT AVG(json_extract(payload, '$.duration_ms')) FROM run_events WHERE type = 'tool_result'";
inline constexpr char usage_totals[] = R"sql(
  SELECT COALESCE(SUM(json_extract(payload, '$.llm_usage_total.prompt_tokens')), 0),
         COALESCE(SUM(json_extract(payload, '$.llm_usage_total.completion_tokens')), 0),
         COALESCE(SUM(json_extract(payload, '$.llm_usage_total.total_tokens')), 0) FROM traces)sql";
inline constexpr char recent_errors[] = R"sql(
  SELECT payload FROM run_events WHERE type = 'error'
  ORDER BY json_extract(payload, '$.timestamp') DESC LIMIT 5)sql";
// The PSKA digest runs (AS-59, AS-70): the traces that carry a pska_digest_tool_budget object, their
// calls, and the latest five of them that went over their budget.
inline constexpr char pska_digest_totals[] = R"sql(
  SELECT COUNT(*),
         COALESCE(SUM(json_extract(payload, '$.pska_digest_tool_budget.write_call_count')), 0),
         COALESCE(SUM(json_extract(payload, '$.pska_digest_tool_budget.job_context_call_count')), 0),
         COALESCE(SUM(json_extract(payload, '$.pska_digest_tool_budget.tool_budget_exceeded')), 0)
  FROM traces WHERE json_type(payload, '$.pska_digest_tool_budget') = 'object')sql";
inline constexpr char recent_budget_exceeded[] = R"sql(
  SELECT run_id, session_id, completed_at, json_extract(payload, '$.pska_digest_tool_budget') FROM traces
  WHERE json_extract(payload, '$.pska_digest_tool_budget.tool_budget_exceeded') = 1
  ORDER BY completed_at DESC, rowid DESC LIMIT 5)sql";

// Each stored stream of AS-56: its table, its count and when it last grew. The events of every run
// live in run_events; AS-56 names two streams of them, `run_events` (background runs, the replay log
// of AS-51) and `events` (chat runs' events, AS-91), counted from each run's event_count, and when a
// run's last event was stored from its updated_at, which every append sets. `last` reads an iso
// text, or epoch seconds when `last_is_epoch`; nullptr: the stream is empty (runtime_spans: troupe
// records no spans).
struct stream_statements {
  const char* name;
  const char* table; // whose bytes it reports (shared tables are split by records)
  const char* count;
  const char* last;
  bool last_is_epoch = false;
};
inline constexpr stream_statements streams[] = {
  {"runs", "runs", "SELECT COUNT(*) FROM runs", "SELECT MAX(created_at) FROM runs"},
  {"run_events", "run_events", "SELECT COALESCE(SUM(event_count), 0) FROM runs WHERE run_kind <> 'chat'",
   "SELECT MAX(updated_at) FROM runs WHERE run_kind <> 'chat' AND event_count > 0"},
  {"events", "run_events", "SELECT COALESCE(SUM(event_count), 0) FROM runs WHERE run_kind = 'chat'",
   "SELECT MAX(updated_at) FROM runs WHERE run_kind = 'chat' AND event_count > 0"},
  {"traces", "traces", "SELECT COUNT(*) FROM traces", "SELECT MAX(completed_at) FROM traces"},
  {"sessions", "sessions", "SELECT COUNT(*) FROM sessions", "SELECT MAX(updated_at) FROM sessions"},
  {"approvals", "approvals", "SELECT COUNT(*) FROM approvals", "SELECT MAX(created_at) FROM approvals"},
  {"audit", "audit", "SELECT COUNT(*) FROM audit", "SELECT MAX(created_at) FROM audit"},
  {"runtime_spans", nullptr, nullptr, nullptr},
  {"rate_limits", "rate_limits", "SELECT COUNT(*) FROM rate_limits", "SELECT MAX(window_start) FROM rate_limits",
   true},
};

// ---- PostgreSQL only: one statement where SQLite takes several ----
// On a server each statement is a round trip, so the hot paths are single statements there (CJ-6).

// A claim in one statement: SQLite's steps above, as one round trip that locks what it takes (CJ-18,
// CJ-19). ?1 now, ?2 how many, ?3 the worker, ?4 the lease's end, ?5 the tenant the node served last,
// ?6 cluster.tenant_max_running (0: no cap).
// - turns: the tenants with a ready run in tenant_key order after ?5, wrapping once to end with ?5
//   itself; a loose index scan, one probe of runs_claim_order per tenant, walked only as far as needed.
// - locked, with_room: under a cap a tenant is taken only with its advisory lock (kind 1: agent runs),
//   tried, never waited for, so a tenant another claimer is serving is passed over; its running runs
//   are counted only once the lock is held, by a function that reads with a snapshot of its own
//   (migrations/postgres/0009), so two claimers never both fill the same room.
// - offered: each of the k tenants taken offers its ready runs in claim order, locked, skipping those
//   another claimer holds; no more than its room, nor than the ?2 - k + 1 it could be dealt.
// - dealt: every tenant's first run in turn, then every second, ... up to ?2: a tenant gets at most
//   ceil(?2 / k) unless another had fewer to offer. Answered in that order, so the last run's tenant
//   is the one served last.
inline constexpr char claim_ready_runs[] = R"sql(
  WITH RECURSIVE turns(tenant_key, lap, turn) AS (
    SELECT CAST(?5 AS text), 0, 0
    UNION ALL
    SELECT step.tenant_key, step.lap, turns.turn + 1 FROM turns CROSS JOIN LATERAL (
      (SELECT tenant_key, turns.lap AS lap FROM runs
       WHERE status = 'queued' AND tenant_key > turns.tenant_key AND )sql" TROUPE_READY_AT R"sql( <= ?1
       ORDER BY tenant_key LIMIT 1)
      UNION ALL
      (SELECT tenant_key, turns.lap + 1 FROM runs
       WHERE status = 'queued' AND )sql" TROUPE_READY_AT R"sql( <= ?1 ORDER BY tenant_key LIMIT 1)
      LIMIT 1) step
    WHERE step.lap = 0 OR (step.lap = 1 AND step.tenant_key <= ?5)),
  locked AS (
    SELECT tenant_key, turn FROM turns
    WHERE CASE WHEN turn = 0 THEN false WHEN CAST(?6 AS bigint) = 0 THEN true
               ELSE pg_try_advisory_xact_lock(1, hashtext(tenant_key)) END),
  with_room AS (
    SELECT tenant_key, turn, CASE WHEN CAST(?6 AS bigint) = 0 THEN CAST(?2 AS bigint)
                                  ELSE CAST(?6 AS bigint) - tenant_running_runs(tenant_key) END AS room
    FROM locked),
  taken AS (SELECT tenant_key, turn, room FROM with_room WHERE room > 0 LIMIT ?2),
  offered AS (
    SELECT ready.run_id, taken.turn,
      row_number() OVER (PARTITION BY taken.turn ORDER BY ready.priority DESC, ready.ready_at, ready.row_order) AS round
    FROM taken CROSS JOIN LATERAL (
      SELECT run_id, priority, )sql" TROUPE_READY_AT R"sql( AS ready_at, row_order FROM runs
      WHERE status = 'queued' AND tenant_key = taken.tenant_key AND )sql" TROUPE_READY_AT R"sql( <= ?1
      ORDER BY priority DESC, )sql" TROUPE_READY_AT R"sql(, row_order
      LIMIT LEAST(taken.room, CAST(?2 AS bigint) - (SELECT count(*) FROM taken) + 1)
      FOR UPDATE SKIP LOCKED) ready),
  dealt AS (SELECT run_id, turn, round FROM offered ORDER BY round, turn LIMIT ?2),
  started AS (
    UPDATE runs SET status = 'running', attempts = attempts + 1, lease_epoch = lease_epoch + 1,
      worker_id = ?3, lease_expires_at = ?4, retry_after = '', error = '', completed_at = '',
      cancelled_at = '', duration_ms = NULL, updated_at = ?1, attempt_first_sequence = event_count,
      started_at = CASE WHEN started_at = '' THEN ?1 ELSE started_at END
    FROM dealt WHERE runs.run_id = dealt.run_id
    RETURNING runs.*, dealt.round, dealt.turn)
  SELECT )sql" TROUPE_RUN_COLUMNS R"sql( FROM started ORDER BY round, turn)sql";

// An append: count_appended_event's fence, and the event inserted only when it passed.
inline constexpr char append_event[] = R"sql(
  WITH fence AS (
    UPDATE runs SET event_count = CAST(?3 AS BIGINT) + 1, updated_at = ?4
    WHERE run_id = ?1 AND lease_epoch = ?2 AND status = 'running' AND event_count = CAST(?3 AS BIGINT)
    RETURNING run_id)
  INSERT INTO run_events (run_id, sequence, type, payload) SELECT run_id, CAST(?3 AS BIGINT), ?5, ?6 FROM fence)sql";

// ---- PostgreSQL's own spelling ----
// Where SQLite's differs: rowid is row_order, recovery locks what it takes and skips what another
// transaction holds (CJ-6), a rate window is read under its row lock, JSON is read with ->>,
// and a table's bytes come from the catalog.

inline constexpr statement_spelling postgres_spelling[] = {
  {lock_run, "SELECT " TROUPE_RUN_COLUMNS " FROM runs WHERE run_id = $1 FOR UPDATE"},
  {lapsed_runs,
   "SELECT run_id FROM runs WHERE status = 'running' AND ($1 = '' OR lease_expires_at < $1) FOR UPDATE SKIP LOCKED"},
  {list_runs, "SELECT " TROUPE_RUN_COLUMNS " FROM runs ORDER BY created_at DESC, row_order DESC LIMIT $1"},
  {list_runs_by_status,
   "SELECT " TROUPE_RUN_COLUMNS " FROM runs WHERE status = $1 ORDER BY created_at DESC, row_order DESC LIMIT $2"},
  {list_traces, R"sql(
    SELECT payload FROM traces WHERE ($1 = '' OR session_id = $1)
    ORDER BY completed_at DESC, row_order DESC LIMIT $2)sql"},
  {tenant_runs,
   "SELECT " TROUPE_RUN_COLUMNS " FROM runs WHERE tenant_key = $2 ORDER BY created_at DESC, row_order DESC LIMIT $1"},
  {tenant_runs_by_status, "SELECT " TROUPE_RUN_COLUMNS
   " FROM runs WHERE status = $1 AND tenant_key = $3 ORDER BY created_at DESC, row_order DESC LIMIT $2"},
  {tenant_traces, R"sql(
    SELECT payload FROM traces WHERE tenant_key = $3 AND ($1 = '' OR session_id = $1)
    ORDER BY completed_at DESC, row_order DESC LIMIT $2)sql"},
  {get_rate_window, "SELECT window_start, count FROM rate_limits WHERE user_key = $1 FOR UPDATE"},
  {table_bytes, "SELECT relname, pg_total_relation_size(relid) FROM pg_stat_user_tables"},
  {avg_tool_duration,
   "SELECT AVG((payload::json ->> 'duration_ms')::float8) FROM run_events WHERE type = 'tool_result'"},
  {usage_totals, R"sql(
    SELECT COALESCE(SUM((payload::json -> 'llm_usage_total' ->> 'prompt_tokens')::bigint), 0),
           COALESCE(SUM((payload::json -> 'llm_usage_total' ->> 'completion_tokens')::bigint), 0),
           COALESCE(SUM((payload::json -> 'llm_usage_total' ->> 'total_tokens')::bigint), 0) FROM traces)sql"},
  {recent_errors, R"sql(
    SELECT payload FROM run_events WHERE type = 'error'
    ORDER BY payload::json ->> 'timestamp' DESC LIMIT 5)sql"},
  {pska_digest_totals, R"sql(
    SELECT COUNT(*),
           COALESCE(SUM((payload::json -> 'pska_digest_tool_budget' ->> 'write_call_count')::bigint), 0),
           COALESCE(SUM((payload::json -> 'pska_digest_tool_budget' ->> 'job_context_call_count')::bigint), 0),
           COUNT(*) FILTER (WHERE payload::json -> 'pska_digest_tool_budget' ->> 'tool_budget_exceeded' = 'true')
    FROM traces WHERE json_typeof(payload::json -> 'pska_digest_tool_budget') = 'object')sql"},
  {recent_budget_exceeded, R"sql(
    SELECT run_id, session_id, completed_at, (payload::json -> 'pska_digest_tool_budget')::text FROM traces
    WHERE payload::json -> 'pska_digest_tool_budget' ->> 'tool_budget_exceeded' = 'true'
    ORDER BY completed_at DESC, row_order DESC LIMIT 5)sql"},
  {nullptr, nullptr},
};

#undef TROUPE_RUN_COLUMNS
#undef TROUPE_APPROVAL_COLUMNS
#undef TROUPE_READY_AT

} // namespace troupe::io::store_sql
