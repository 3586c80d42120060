// Every SQL statement of the job store, in one place, written once in the SQL both engines read with
// SQLite's ?N parameters (PostgreSQL's connection reads them as $N); `postgres_spelling` at the end
// gives PostgreSQL's own where it differs, and the claims PostgreSQL makes in one statement. Each is
// a named array, so its address keys the connection's prepared statement. Included by the job store
// adapters only. Times are epoch seconds; lists of types and tenants are JSON arrays, so the SQL
// text stays fixed.
#pragma once

#include "io/statement_spelling.hpp"

namespace troupe::io::job_sql {

#define TROUPE_JOB_COLUMNS                                                                                      \
  "job_id, type, tenant_key, status, priority, payload, result, idempotency_key, attempts, max_attempts, "     \
  "timeout_seconds, run_after, created_at, updated_at, started_at, completed_at, cancelled_at, dead_at, "      \
  "worker_id, lease_epoch, lease_expires_at, last_error, errors, progress, on_complete, on_complete_run_id, " \
  "on_complete_error, lease_token, user_key"

inline constexpr char insert_job[] = R"sql(
  INSERT INTO jobs (job_id, type, tenant_key, user_key, status, priority, payload, idempotency_key, max_attempts,
                    timeout_seconds, run_after, ready_at, created_at, updated_at, on_complete)
  VALUES (?1, ?2, ?3, ?4, 'queued', ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?11, ?11, ?12)
  ON CONFLICT DO NOTHING)sql";

inline constexpr char job_by_key[] =
  "SELECT " TROUPE_JOB_COLUMNS " FROM jobs WHERE tenant_key = ?1 AND idempotency_key = ?2";
inline constexpr char get_job[] = "SELECT " TROUPE_JOB_COLUMNS " FROM jobs WHERE job_id = ?1";
// The job an operation changes, held until commit on PostgreSQL (SQLite has one writer).
inline constexpr char lock_job[] = "SELECT " TROUPE_JOB_COLUMNS " FROM jobs WHERE job_id = ?1";

// ---- Claims (CJ-18, CJ-19, CJ-32): SQLite's, in steps ----
// ?3 the types a claim takes (empty: any), ?4 the types it leaves (claimed apart, under their caps),
// ?5 the tenants it may serve (empty: any).
#define TROUPE_JOB_FILTERS                                                          \
  " AND (?3 = '[]' OR type IN (SELECT value FROM json_each(?3)))"                    \
  " AND type NOT IN (SELECT value FROM json_each(?4))"                               \
  " AND (?5 = '[]' OR tenant_key IN (SELECT value FROM json_each(?5)))"

// The first tenant after ?2 (from ?2 on when ?6 is 1) with a job ready at ?1.
inline constexpr char next_ready_tenant[] = "SELECT tenant_key FROM jobs INDEXED BY jobs_claim_order "
  "WHERE status = 'queued' AND (tenant_key > ?2 OR (?6 = 1 AND tenant_key = ?2)) AND ready_at <= ?1"
  TROUPE_JOB_FILTERS " ORDER BY tenant_key LIMIT 1";
// A tenant's ready jobs in claim order, at most ?6.
inline constexpr char tenant_ready_jobs[] = "SELECT job_id FROM jobs INDEXED BY jobs_claim_order "
  "WHERE status = 'queued' AND tenant_key = ?2 AND ready_at <= ?1" TROUPE_JOB_FILTERS
  " ORDER BY priority DESC, ready_at, rowid LIMIT ?6";
// jobs.fair_share "none": every tenant's ready jobs by priority alone (?2 unused).
inline constexpr char ready_jobs_by_priority[] = "SELECT job_id FROM jobs "
  "WHERE status = 'queued' AND ready_at <= ?1" TROUPE_JOB_FILTERS
  " ORDER BY priority DESC, ready_at, rowid LIMIT ?6";
inline constexpr char tenant_leased[] =
  "SELECT COUNT(*) FROM jobs WHERE status = 'leased' AND tenant_key = ?1 AND type = ?2";

// One job's lease (CJ-32): attempt+1, epoch+1, token `lt_<epoch>_<?3>`, and the lease ending at
// ?4 + ?5 but never past the attempt's deadline.
inline constexpr char lease_job[] = R"sql(
  UPDATE jobs SET status = 'leased', attempts = attempts + 1, lease_epoch = lease_epoch + 1, worker_id = ?2,
    lease_token = 'lt_' || (lease_epoch + 1) || '_' || ?3, started_at = ?4, attempt_deadline = ?4 + timeout_seconds,
    lease_seconds = ?5, lease_expires_at = ?4 + MIN(?5, timeout_seconds), updated_at = ?4
  WHERE job_id = ?1 AND status = 'queued')sql";

// ---- Settling a leased job ----

// CJ-34: the lease renewed from ?4 by ?2 seconds (0: the lease's own length), never past the attempt's
// deadline; ?3 the progress.
#define TROUPE_JOB_BEAT(least)                                                                              \
  "UPDATE jobs SET lease_seconds = CASE WHEN ?2 > 0 THEN ?2 ELSE lease_seconds END, "                      \
  "lease_expires_at = " least "(?4 + CASE WHEN ?2 > 0 THEN ?2 ELSE lease_seconds END, attempt_deadline), " \
  "progress = ?3, updated_at = ?4 WHERE job_id = ?1"
inline constexpr char beat_job[] = TROUPE_JOB_BEAT("MIN");

// CJ-35: the completions of ?1 (a JSON array of {id, token, result}, result as a string holding its
// JSON text) whose token still holds its job in the tenant ?3 (NULL: any), in one statement; the rest are
// read one by one to say why not.
inline constexpr char complete_jobs[] = R"sql(
  UPDATE jobs SET status = 'completed', result = x.x_result, completed_at = ?2, updated_at = ?2,
    lease_expires_at = NULL
  FROM (SELECT value ->> '$.id' AS x_id, value ->> '$.token' AS x_token, value ->> '$.result' AS x_result
        FROM json_each(?1)) AS x
  WHERE jobs.job_id = x.x_id AND jobs.status = 'leased' AND jobs.lease_token = x.x_token
    AND (CAST(?3 AS TEXT) IS NULL OR jobs.tenant_key = ?3)
  RETURNING )sql" TROUPE_JOB_COLUMNS;

inline constexpr char set_follow_up[] =
  "UPDATE jobs SET on_complete_run_id = ?2, on_complete_error = ?3 WHERE job_id = ?1";

// CJ-36, CJ-37: an attempt that ended without a result: queued again at ?3, or dead; ?8 bumps the epoch.
inline constexpr char fail_job[] = R"sql(
  UPDATE jobs SET status = ?2, ready_at = COALESCE(?3, ready_at), dead_at = ?4, last_error = ?5, errors = ?6,
    lease_expires_at = NULL, updated_at = ?7, lease_epoch = lease_epoch + ?8
  WHERE job_id = ?1)sql";

// CJ-39.
inline constexpr char cancel_job[] = R"sql(
  UPDATE jobs SET status = 'cancelled', cancelled_at = ?2, updated_at = ?2, lease_epoch = lease_epoch + 1,
    lease_expires_at = NULL
  WHERE job_id = ?1 AND status IN ('queued', 'leased'))sql";
inline constexpr char retry_job[] = R"sql(
  UPDATE jobs SET status = 'queued', attempts = 0, ready_at = ?2, updated_at = ?2, dead_at = NULL,
    cancelled_at = NULL, lease_expires_at = NULL, started_at = NULL, attempt_deadline = NULL
  WHERE job_id = ?1 AND status IN ('dead', 'cancelled'))sql";

// CJ-33: a lease its client never heard of, undone: the attempt uncounted, the token fenced.
inline constexpr char release_job[] = R"sql(
  UPDATE jobs SET status = 'queued', attempts = attempts - 1, lease_epoch = lease_epoch + 1, worker_id = '',
    lease_expires_at = NULL, started_at = NULL, attempt_deadline = NULL, updated_at = ?3
  WHERE job_id = ?1 AND lease_token = ?2 AND status = 'leased')sql";

// CJ-37: leases that ended, a bounded number per sweep.
inline constexpr char expired_leases[] = "SELECT job_id, attempt_deadline FROM jobs "
  "WHERE status = 'leased' AND lease_expires_at <= ?1 ORDER BY lease_expires_at LIMIT 500";

// ---- Reads (CJ-39) ----

#define TROUPE_JOB_LIST(cmp, order)                                                               \
  "SELECT " TROUPE_JOB_COLUMNS " FROM jobs WHERE (?1 = '' OR type = ?1) AND (?2 = '' OR status = ?2) " \
  "AND (?3 = '' OR worker_id = ?3) AND (CAST(?4 AS TEXT) IS NULL OR tenant_key = ?4) AND (?5 = '' OR job_id " cmp " ?5) " \
  "ORDER BY job_id " order " LIMIT ?6"
inline constexpr char list_newest[] = TROUPE_JOB_LIST("<", "DESC");
inline constexpr char list_oldest[] = TROUPE_JOB_LIST(">", "ASC");
#undef TROUPE_JOB_LIST

inline constexpr char count_jobs[] = R"sql(
  SELECT type, status, COUNT(*), MIN(CASE WHEN status = 'queued' AND ready_at <= ?1 THEN ready_at END)
  FROM jobs WHERE (CAST(?2 AS TEXT) IS NULL OR tenant_key = ?2) GROUP BY type, status ORDER BY type, status)sql";

// ---- PostgreSQL only: a claim in one statement ----
// claim_ready_runs' shape (io/run_store_statements.hpp) over jobs: ?1 now, ?2 how many, ?3 the
// worker, ?4 the lease's length, ?5 the tenant served last, ?6 the cap of ?11's type (0: none), ?7
// the types taken, ?8 the types left, ?9 the tenants, ?10 a JSON array of one random token part per
// job dealt. Under a cap a tenant is taken only with its advisory lock for the type (kind 2), and
// its leased jobs are counted once the lock is held (tenant_leased_jobs, migrations/postgres/0012).

#define TROUPE_PG_JOB_FILTERS                                                                          \
  " AND (CAST($7 AS text) = '[]' OR type IN (SELECT json_array_elements_text(CAST($7 AS json))))"        \
  " AND type NOT IN (SELECT json_array_elements_text(CAST($8 AS json)))"                                 \
  " AND (CAST($9 AS text) = '[]' OR tenant_key IN (SELECT json_array_elements_text(CAST($9 AS json))))"

// The jobs dealt, leased and answered in the order dealt.
// The token parts are read once into rows (a JSON lookup per job would re-read the whole list).
#define TROUPE_PG_LEASE_DEALT                                                                                        \
  " tokens AS ("                                                                                                    \
  "  SELECT part, ord - 1 AS slot FROM json_array_elements_text(CAST($10 AS json)) WITH ORDINALITY AS t(part, ord)),"\
  " started AS ("                                                                                                   \
  "  UPDATE jobs SET status = 'leased', attempts = attempts + 1, lease_epoch = jobs.lease_epoch + 1,"              \
  "    worker_id = $3, lease_token = 'lt_' || (jobs.lease_epoch + 1) || '_' || tokens.part," \
  "    started_at = $1, attempt_deadline = $1 + timeout_seconds, lease_seconds = $4,"                               \
  "    lease_expires_at = $1 + LEAST(CAST($4 AS double precision), timeout_seconds), updated_at = $1"              \
  "  FROM dealt JOIN tokens ON tokens.slot = dealt.slot WHERE jobs.job_id = dealt.job_id RETURNING jobs.*, dealt.slot)"\
  " SELECT " TROUPE_JOB_COLUMNS " FROM started ORDER BY slot"

inline constexpr char claim_ready_jobs[] =
  "WITH RECURSIVE turns(tenant_key, lap, turn) AS ("
  "  SELECT CAST($5 AS text), 0, 0"
  "  UNION ALL"
  "  SELECT step.tenant_key, step.lap, turns.turn + 1 FROM turns CROSS JOIN LATERAL ("
  "    (SELECT tenant_key, turns.lap AS lap FROM jobs"
  "     WHERE status = 'queued' AND tenant_key > turns.tenant_key AND ready_at <= $1" TROUPE_PG_JOB_FILTERS
  "     ORDER BY tenant_key LIMIT 1)"
  "    UNION ALL"
  "    (SELECT tenant_key, turns.lap + 1 FROM jobs"
  "     WHERE status = 'queued' AND ready_at <= $1" TROUPE_PG_JOB_FILTERS " ORDER BY tenant_key LIMIT 1)"
  "    LIMIT 1) step"
  "  WHERE step.lap = 0 OR (step.lap = 1 AND step.tenant_key <= $5)),"
  " locked AS ("
  "  SELECT tenant_key, turn FROM turns"
  "  WHERE CASE WHEN turn = 0 THEN false WHEN CAST($6 AS bigint) = 0 THEN true"
  "             ELSE pg_try_advisory_xact_lock(2, hashtext(tenant_key || '/' || CAST($11 AS text))) END),"
  " with_room AS ("
  "  SELECT tenant_key, turn, CASE WHEN CAST($6 AS bigint) = 0 THEN CAST($2 AS bigint)"
  "    ELSE CAST($6 AS bigint) - tenant_leased_jobs(tenant_key, CAST($11 AS text)) END AS room FROM locked),"
  " taken AS (SELECT tenant_key, turn, room FROM with_room WHERE room > 0 LIMIT $2),"
  " offered AS ("
  "  SELECT ready.job_id, taken.turn,"
  "    row_number() OVER (PARTITION BY taken.turn ORDER BY ready.priority DESC, ready.ready_at, ready.row_order) AS round"
  "  FROM taken CROSS JOIN LATERAL ("
  "    SELECT job_id, priority, ready_at, row_order FROM jobs"
  "    WHERE status = 'queued' AND tenant_key = taken.tenant_key AND ready_at <= $1" TROUPE_PG_JOB_FILTERS
  "    ORDER BY priority DESC, ready_at, row_order"
  "    LIMIT LEAST(taken.room, CAST($2 AS bigint) - (SELECT count(*) FROM taken) + 1)"
  "    FOR UPDATE SKIP LOCKED) ready),"
  " dealt AS ("
  "  SELECT job_id, row_number() OVER (ORDER BY round, turn) - 1 AS slot"
  "  FROM (SELECT job_id, round, turn FROM offered ORDER BY round, turn LIMIT $2) d),"
  TROUPE_PG_LEASE_DEALT;

// jobs.fair_share "none": the ready jobs by priority alone, locked, skipping those another claimer
// holds. ?5, ?6 and ?11 are unused.
inline constexpr char claim_by_priority[] =
  "WITH dealt AS ("
  "  SELECT job_id, row_number() OVER (ORDER BY priority DESC, ready_at, row_order) - 1 AS slot FROM ("
  "    SELECT job_id, priority, ready_at, row_order FROM jobs"
  "    WHERE status = 'queued' AND ready_at <= $1 AND CAST($5 AS text) = CAST($5 AS text)"
  "      AND CAST($6 AS bigint) = CAST($6 AS bigint) AND CAST($11 AS text) = CAST($11 AS text)" TROUPE_PG_JOB_FILTERS
  "    ORDER BY priority DESC, ready_at, row_order LIMIT $2 FOR UPDATE SKIP LOCKED) r),"
  TROUPE_PG_LEASE_DEALT;

#undef TROUPE_PG_JOB_FILTERS
#undef TROUPE_PG_LEASE_DEALT

// ---- PostgreSQL's own spelling ----
// Where SQLite's differs: a changed job is locked until commit, expired leases another sweep holds
// are skipped, and JSON lists are read with json_array_elements_text / json_to_recordset.

inline constexpr statement_spelling postgres_spelling[] = {
  {lock_job, "SELECT " TROUPE_JOB_COLUMNS " FROM jobs WHERE job_id = $1 FOR UPDATE"},
  {expired_leases, "SELECT job_id, attempt_deadline FROM jobs WHERE status = 'leased' AND lease_expires_at <= $1 "
                   "ORDER BY lease_expires_at LIMIT 500 FOR UPDATE SKIP LOCKED"},
  {complete_jobs,
   "UPDATE jobs SET status = 'completed', result = x.x_result, completed_at = $2, updated_at = $2, "
   "lease_expires_at = NULL "
   "FROM (SELECT id AS x_id, token AS x_token, result AS x_result "
   "      FROM json_to_recordset(CAST($1 AS json)) AS r(id text, token text, result text)) AS x "
   "WHERE jobs.job_id = x.x_id AND jobs.status = 'leased' AND jobs.lease_token = x.x_token "
   "AND (CAST($3 AS TEXT) IS NULL OR jobs.tenant_key = $3) "
   "RETURNING " TROUPE_JOB_COLUMNS},
  {beat_job, TROUPE_JOB_BEAT("LEAST")},
  {nullptr, nullptr},
};

#undef TROUPE_JOB_BEAT
#undef TROUPE_JOB_FILTERS
#undef TROUPE_JOB_COLUMNS

} // namespace troupe::io::job_sql
