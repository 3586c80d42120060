-- The database's identity (CJ-2): one random id, fixed when the schema is first created.
CREATE TABLE cluster (cluster_id text NOT NULL);
INSERT INTO cluster (cluster_id) VALUES (replace(gen_random_uuid()::text, '-', ''));
