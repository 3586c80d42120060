-- Workspace logs (WS-15, WS-40) with the columns of migrations/sqlite/0008 and 0011 (CJ-2), and each
-- log's head row (CJ-9): a command locks it FOR UPDATE, appends from head_seq + 1 and advances it in
-- the same transaction, so seqs stay gap-free and unique under concurrent writers. Envelopes are
-- text, never jsonb, so they come back byte for byte (CJ-3).
CREATE TABLE workspaces (
  tenant    text NOT NULL,
  workspace text NOT NULL,
  head_seq  bigint NOT NULL DEFAULT 0,
  head_ts   text NOT NULL DEFAULT '',
  PRIMARY KEY (tenant, workspace)
);

CREATE TABLE workspace_events (
  tenant         text NOT NULL,
  workspace      text NOT NULL,
  seq            bigint NOT NULL,
  id             text NOT NULL,
  type           text NOT NULL,
  ts             text NOT NULL,
  correlation_id text NOT NULL,
  envelope       text NOT NULL,
  PRIMARY KEY (tenant, workspace, seq)
);
CREATE UNIQUE INDEX workspace_events_by_id ON workspace_events (tenant, workspace, id);

CREATE TABLE workspace_command_results (
  tenant      text NOT NULL,
  workspace   text NOT NULL,
  participant text NOT NULL,
  command_id  text NOT NULL,
  code        text NOT NULL DEFAULT 'none',
  ok          bigint NOT NULL,
  max_seq     bigint NOT NULL,
  result      text NOT NULL,
  created_at  double precision NOT NULL,
  PRIMARY KEY (tenant, workspace, participant, command_id)
);
CREATE INDEX workspace_command_results_by_age ON workspace_command_results (created_at);
