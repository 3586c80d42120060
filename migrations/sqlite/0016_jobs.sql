-- The jobs API's queue (CJ-30 to CJ-41). Times are epoch seconds (NULL: none), so a lease's end and
-- an attempt's deadline are sums in either engine; the API shows them as AS-78 text. '' stands for
-- null in the text columns; documents are text, returned as stored (CJ-3).
CREATE TABLE jobs (
  job_id             TEXT PRIMARY KEY, -- job_ + 32 hex of a UUIDv7: creation order
  type               TEXT NOT NULL,
  tenant_key         TEXT NOT NULL,
  user_key           TEXT NOT NULL DEFAULT '', -- the enqueuer: a follow-up run's user (CJ-40)
  status             TEXT NOT NULL,            -- queued | leased | completed | cancelled | dead
  priority           INTEGER NOT NULL DEFAULT 0,
  payload            TEXT NOT NULL,
  result             TEXT NOT NULL DEFAULT '',
  idempotency_key    TEXT NOT NULL DEFAULT '',
  attempts           INTEGER NOT NULL DEFAULT 0,
  max_attempts       INTEGER NOT NULL,
  timeout_seconds    INTEGER NOT NULL,
  run_after          REAL NOT NULL,
  ready_at           REAL NOT NULL, -- run_after, then each retry's time: the claim order (CJ-18)
  created_at         REAL NOT NULL,
  updated_at         REAL NOT NULL,
  started_at         REAL,          -- the current attempt's start
  attempt_deadline   REAL,          -- started_at + timeout_seconds
  completed_at       REAL,
  cancelled_at       REAL,
  dead_at            REAL,
  worker_id          TEXT NOT NULL DEFAULT '',
  lease_epoch        INTEGER NOT NULL DEFAULT 0,
  lease_seconds      REAL NOT NULL DEFAULT 60, -- the lease's length: a heartbeat without one renews by it
  lease_expires_at   REAL,
  lease_token        TEXT NOT NULL DEFAULT '',
  last_error         TEXT NOT NULL DEFAULT '',
  errors             TEXT NOT NULL DEFAULT '[]',
  progress           TEXT NOT NULL DEFAULT '',
  on_complete        TEXT NOT NULL DEFAULT '',
  on_complete_run_id TEXT NOT NULL DEFAULT '',
  on_complete_error  TEXT NOT NULL DEFAULT ''
);
-- CJ-31: a tenant's idempotency key names one job while the row lives.
CREATE UNIQUE INDEX jobs_idempotency ON jobs (tenant_key, idempotency_key) WHERE idempotency_key <> '';
-- The ready jobs in claim order: per tenant, priority descending, then ready time (CJ-18); the same
-- index finds the next tenant with ready work (CJ-19).
CREATE INDEX jobs_claim_order ON jobs (tenant_key, priority DESC, ready_at) WHERE status = 'queued';
-- The leases the sweep looks at (CJ-37), and a tenant's leased jobs of a type (CJ-32's caps).
CREATE INDEX jobs_lease_expiry ON jobs (lease_expires_at) WHERE status = 'leased';
CREATE INDEX jobs_leased_by_tenant ON jobs (tenant_key, type) WHERE status = 'leased';
-- Listings by status (dead letters) in id order (CJ-39).
CREATE INDEX jobs_by_status ON jobs (status, job_id);
