-- The cluster node that runs a background response, so that the others fail what a dead node left
-- unfinished (RS-55, CJ-16). An embedded store has one process: its rows keep ''.
ALTER TABLE responses ADD COLUMN node_id TEXT NOT NULL DEFAULT '';
