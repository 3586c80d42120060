-- Run attempts, leases, retries and their end (AS-51..AS-55, AS-82).
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
