-- Responses, conversations and items belong to the caller that created them; rows from before
-- belong to the open service's owner "".
ALTER TABLE responses ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE conversations ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE items ADD COLUMN owner TEXT NOT NULL DEFAULT '';
