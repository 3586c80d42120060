-- Claims take turns between tenants and, within a tenant, go by priority (CJ-18, CJ-19). A run's
-- priority is its request's metadata.priority; runs queued before this migration keep 0.
ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
-- The queued runs in claim order: per tenant, priority descending, then the time they became ready
-- (retry_after once a retry set it, else created_at), then rowid. The same index finds the next tenant
-- with ready work, so a claim's cost does not grow with the queue's depth.
CREATE INDEX runs_claim_order ON runs (
  tenant_key, priority DESC, (CASE WHEN retry_after = '' THEN created_at ELSE retry_after END)
) WHERE status = 'queued';
-- A tenant's running runs, counted against cluster.tenant_max_running.
CREATE INDEX runs_running_by_tenant ON runs (tenant_key) WHERE status = 'running';
