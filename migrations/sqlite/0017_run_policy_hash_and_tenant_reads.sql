-- AS-93: the policy_snapshot_hash in force when the run was accepted, which its trace reports. Runs
-- stored before this migration have none ('', reported as null).
ALTER TABLE runs ADD COLUMN policy_snapshot_hash TEXT NOT NULL DEFAULT '';
-- AS-84: a tenant's own lists, newest first, read from an index rather than filtered from every row.
CREATE INDEX runs_by_tenant_created ON runs (tenant_key, created_at);
CREATE INDEX runs_by_tenant_status_created ON runs (tenant_key, status, created_at);
CREATE INDEX traces_by_tenant_completed ON traces (tenant_key, completed_at);
CREATE INDEX approvals_by_tenant_created ON approvals (tenant_key, created_at);
