-- The nodes of a cluster (CJ-12): one row per `troupe serve` start, its heartbeat on the database
-- clock. Node node-<hex> claims runs as worker-<hex> (AS-54), so a death declaration finds and
-- expires their leases in the same transaction (CJ-13).
CREATE TABLE nodes (
  node_id      text PRIMARY KEY,
  name         text NOT NULL,
  endpoint     text NOT NULL,
  version      text NOT NULL,
  started_at   timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now(),
  state        text NOT NULL CHECK (state IN ('alive', 'draining', 'dead', 'left'))
);
CREATE INDEX nodes_live ON nodes (heartbeat_at) WHERE state IN ('alive', 'draining');
CREATE INDEX runs_by_worker ON runs (worker_id) WHERE status = 'running';
