-- A run handed back by a draining node (CJ-16) counts a handoff, not an attempt: retry limits count
-- attempts - handoffs.
ALTER TABLE runs ADD COLUMN handoffs INTEGER NOT NULL DEFAULT 0;
