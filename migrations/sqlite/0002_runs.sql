-- Durable runs (AS-49).
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
