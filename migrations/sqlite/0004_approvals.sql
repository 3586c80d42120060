-- Approvals (AS-42, AS-43, AS-47), kept across restarts (AS-81).
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
