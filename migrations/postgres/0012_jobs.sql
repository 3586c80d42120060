-- The jobs API's queue (CJ-30 to CJ-41), with the columns of migrations/sqlite/0016_jobs.sql. Times
-- are epoch seconds (NULL: none), so a lease's end and an attempt's deadline are sums; '' stands for
-- null in the text columns; documents are text, never jsonb, returned as stored (CJ-3). row_order
-- keeps insertion order where SQLite orders by rowid.
CREATE TABLE jobs (
  job_id             text PRIMARY KEY,
  row_order          bigint GENERATED ALWAYS AS IDENTITY,
  type               text NOT NULL,
  tenant_key         text NOT NULL,
  user_key           text NOT NULL DEFAULT '',
  status             text NOT NULL,
  priority           bigint NOT NULL DEFAULT 0,
  payload            text NOT NULL,
  result             text NOT NULL DEFAULT '',
  idempotency_key    text NOT NULL DEFAULT '',
  attempts           bigint NOT NULL DEFAULT 0,
  max_attempts       bigint NOT NULL,
  timeout_seconds    bigint NOT NULL,
  run_after          double precision NOT NULL,
  ready_at           double precision NOT NULL,
  created_at         double precision NOT NULL,
  updated_at         double precision NOT NULL,
  started_at         double precision,
  attempt_deadline   double precision,
  completed_at       double precision,
  cancelled_at       double precision,
  dead_at            double precision,
  worker_id          text NOT NULL DEFAULT '',
  lease_epoch        bigint NOT NULL DEFAULT 0,
  lease_seconds      double precision NOT NULL DEFAULT 60,
  lease_expires_at   double precision,
  lease_token        text NOT NULL DEFAULT '',
  last_error         text NOT NULL DEFAULT '',
  errors             text NOT NULL DEFAULT '[]',
  progress           text NOT NULL DEFAULT '',
  on_complete        text NOT NULL DEFAULT '',
  on_complete_run_id text NOT NULL DEFAULT '',
  on_complete_error  text NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX jobs_idempotency ON jobs (tenant_key, idempotency_key) WHERE idempotency_key <> '';
CREATE INDEX jobs_claim_order ON jobs (tenant_key, priority DESC, ready_at, row_order) WHERE status = 'queued';
CREATE INDEX jobs_lease_expiry ON jobs (lease_expires_at) WHERE status = 'leased';
CREATE INDEX jobs_leased_by_tenant ON jobs (tenant_key, type) WHERE status = 'leased';
CREATE INDEX jobs_by_status ON jobs (status, job_id);
-- A tenant's leased jobs of a type, read with a snapshot of its own once the claim holds the
-- tenant's advisory lock for the type, as tenant_running_runs does for runs (0009).
CREATE FUNCTION tenant_leased_jobs(tenant text, job_type text) RETURNS bigint LANGUAGE sql VOLATILE AS $$
  SELECT count(*) FROM jobs WHERE status = 'leased' AND tenant_key = tenant AND type = job_type
$$;
