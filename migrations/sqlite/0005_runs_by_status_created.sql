-- Run lists newest first by status (AS-50).
CREATE INDEX runs_by_status_created ON runs (status, created_at);
