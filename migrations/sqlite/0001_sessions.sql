-- The sessions the agent service keeps per (tenant, user, session id).
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
