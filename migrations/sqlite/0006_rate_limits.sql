-- Per-user request windows that survive a restart (AS-8, AS-92).
CREATE TABLE rate_limits (
  user_key     TEXT PRIMARY KEY,
  window_start INTEGER NOT NULL,
  count        INTEGER NOT NULL
);
