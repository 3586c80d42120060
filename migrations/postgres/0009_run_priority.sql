-- Claims take turns between tenants and, within a tenant, go by priority (CJ-18, CJ-19). A run's
-- priority is its request's metadata.priority; runs queued before this migration keep 0.
ALTER TABLE runs ADD COLUMN priority bigint NOT NULL DEFAULT 0;
-- The queued runs in claim order: per tenant, priority descending, then the time they became ready
-- (retry_after once a retry set it, else created_at), then row_order. The same index finds the next
-- tenant with ready work, so a claim's cost does not grow with the queue's depth. It replaces the
-- queue's global order by creation, which no claim reads any more.
CREATE INDEX runs_claim_order ON runs (
  tenant_key, priority DESC, (CASE WHEN retry_after = '' THEN created_at ELSE retry_after END), row_order
) WHERE status = 'queued';
DROP INDEX runs_queued_by_created;
-- A tenant's running background runs, counted against cluster.tenant_max_running.
CREATE INDEX runs_running_by_tenant ON runs (tenant_key) WHERE status = 'running';
-- The same count, read with a snapshot of its own: a claim calls it once it holds the tenant's advisory
-- lock, so it sees the runs of a claim that held the lock before and committed while the claim's own
-- statement was already running, which that statement's snapshot does not. VOLATILE is what gives
-- each call its fresh snapshot (and keeps the function from being inlined).
CREATE FUNCTION tenant_running_runs(tenant text) RETURNS bigint LANGUAGE sql VOLATILE AS $$
  SELECT count(*) FROM runs WHERE status = 'running' AND run_kind <> 'chat' AND tenant_key = tenant
$$;
