-- The agent service's store: sessions, durable runs and their events, traces, approvals, audit and
-- rate-limit windows, with the columns of migrations/sqlite/0001..0006 (CJ-2). Documents are text,
-- never jsonb, so they come back byte for byte (CJ-3). row_order keeps insertion order where SQLite
-- orders by rowid.
CREATE TABLE sessions (
  tenant_key  text NOT NULL,
  user_key    text NOT NULL,
  session_id  text NOT NULL,
  created_at  text NOT NULL,
  updated_at  text NOT NULL,
  run_count   bigint NOT NULL DEFAULT 0,
  last_run_id text NOT NULL DEFAULT '',
  last_status text NOT NULL DEFAULT '',
  last_query  text NOT NULL DEFAULT '',
  last_answer text NOT NULL DEFAULT '',
  PRIMARY KEY (tenant_key, user_key, session_id)
);

CREATE TABLE runs (
  run_id             text PRIMARY KEY,
  row_order          bigint GENERATED ALWAYS AS IDENTITY,
  run_kind           text NOT NULL,
  session_id         text NOT NULL,
  tenant_key         text NOT NULL,
  user_key           text NOT NULL,
  status             text NOT NULL,
  attempts           bigint NOT NULL,
  event_count        bigint NOT NULL,
  created_at         text NOT NULL,
  updated_at         text NOT NULL,
  started_at         text NOT NULL DEFAULT '',
  completed_at       text NOT NULL DEFAULT '',
  cancelled_at       text NOT NULL DEFAULT '',
  duration_ms        double precision,
  error              text NOT NULL DEFAULT '',
  metadata           text NOT NULL DEFAULT '{}',
  generation_options text NOT NULL DEFAULT '{}',
  max_attempts       bigint NOT NULL DEFAULT 1,
  lease_expires_at   text NOT NULL DEFAULT '',
  retry_after        text NOT NULL DEFAULT '',
  worker_id          text NOT NULL DEFAULT '',
  last_error         text NOT NULL DEFAULT '',
  lease_epoch        bigint NOT NULL DEFAULT 0,
  request            text NOT NULL DEFAULT '{}'
) WITH (autovacuum_vacuum_scale_factor = 0.01);
-- A claim reads the ready runs in order; recovery reads the running ones by lease (CJ-3).
CREATE INDEX runs_ready ON runs (retry_after, created_at, row_order) WHERE status = 'queued';
CREATE INDEX runs_leased ON runs (lease_expires_at) WHERE status = 'running';
CREATE INDEX runs_by_status_created ON runs (status, created_at);
CREATE INDEX runs_by_created ON runs (created_at, row_order);

CREATE TABLE run_events (
  run_id   text NOT NULL,
  sequence bigint NOT NULL,
  type     text NOT NULL,
  payload  text NOT NULL,
  PRIMARY KEY (run_id, sequence)
);

CREATE TABLE traces (
  run_id       text PRIMARY KEY,
  row_order    bigint GENERATED ALWAYS AS IDENTITY,
  session_id   text NOT NULL,
  tenant_key   text NOT NULL,
  trace_type   text NOT NULL,
  status       text NOT NULL,
  completed_at text NOT NULL,
  payload      text NOT NULL
);
CREATE INDEX traces_by_completed ON traces (completed_at, row_order);

CREATE TABLE approvals (
  request_id        text PRIMARY KEY,
  run_id            text NOT NULL,
  session_id        text NOT NULL,
  tenant_key        text NOT NULL,
  user_key          text NOT NULL,
  task_id           text NOT NULL,
  tool_call_id      text NOT NULL,
  tool_name         text NOT NULL,
  tool_args         text NOT NULL,
  reason            text NOT NULL,
  decision_level    text NOT NULL,
  pattern_matched   text NOT NULL,
  policy_scope      text NOT NULL,
  policy_action     text NOT NULL,
  policy_matched    bigint NOT NULL,
  status            text NOT NULL,
  approved          bigint,
  timeout_seconds   double precision NOT NULL,
  created_at        text NOT NULL,
  expires_at        text NOT NULL,
  resolved_at       text NOT NULL,
  resolution_reason text NOT NULL
);
CREATE INDEX approvals_by_status ON approvals (status, created_at);
CREATE INDEX approvals_by_run ON approvals (run_id);

CREATE TABLE audit (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  run_id     text NOT NULL,
  tenant_key text NOT NULL,
  created_at text NOT NULL,
  payload    text NOT NULL
);

CREATE TABLE rate_limits (
  user_key     text PRIMARY KEY,
  window_start bigint NOT NULL,
  count        bigint NOT NULL
);
