-- Claims take queued runs oldest first (CJ-18). Walking runs_by_created for that order passed every
-- run that had left the queue before it met a queued one, so a claim slowed as history grew (5 ms
-- with 10,000 finished runs); this index holds the queued runs alone, in claim order.
CREATE INDEX runs_queued_by_created ON runs (created_at, row_order) WHERE status = 'queued';
