-- CJ-28: one node at a time owns a workspace log. The owner is named with the epoch it took the log
-- at; every command locks the head row and goes on only while both still match (CJ-9), so a node that
-- lost the log appends nothing. The ownership lasts as long as the owner's membership: once its node
-- is dead or left (CJ-13), the next node a command reaches takes it with the epoch one higher.
ALTER TABLE workspaces ADD COLUMN owner_node text NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN owner_epoch bigint NOT NULL DEFAULT 0;
