-- Workspace logs (WS-15, WS-40); written through io/sqlite_workspace_store.cpp.
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
