-- The database's identity (CJ-2): one random id, fixed when the schema is first created.
CREATE TABLE cluster (cluster_id TEXT NOT NULL);
INSERT INTO cluster (cluster_id) VALUES (lower(hex(randomblob(16))));
