-- The Responses gateway's store (RS-53), with the tables and columns of migrations/sqlite/0007 and
-- 0009: responses, their histories and event logs, items shared by reference, conversations and their
-- ordered members, each owned by the caller that created it. Documents are text, never jsonb, so they
-- come back byte for byte (CJ-3). row_order keeps insertion order where SQLite orders by rowid.
CREATE TABLE responses (
  id                   text PRIMARY KEY,
  row_order            bigint GENERATED ALWAYS AS IDENTITY,
  created_at           bigint NOT NULL,
  status               text NOT NULL,
  background           bigint NOT NULL,
  model                text NOT NULL,
  snapshot             text NOT NULL,
  request              text NOT NULL,
  input_count          bigint NOT NULL,
  previous_response_id text NOT NULL,
  conversation_id      text NOT NULL,
  owner                text NOT NULL DEFAULT ''
);
CREATE INDEX responses_by_status ON responses (status);

CREATE TABLE response_history (
  response_id text NOT NULL,
  position    bigint NOT NULL,
  item_id     text NOT NULL,
  PRIMARY KEY (response_id, position)
);
CREATE INDEX response_history_by_item ON response_history (item_id);

CREATE TABLE items (
  id         text PRIMARY KEY,
  json       text NOT NULL,
  created_at bigint NOT NULL,
  owner      text NOT NULL DEFAULT ''
);

CREATE TABLE conversations (
  id         text PRIMARY KEY,
  created_at bigint NOT NULL,
  metadata   text NOT NULL,
  revision   bigint NOT NULL,
  owner      text NOT NULL DEFAULT ''
);

CREATE TABLE conversation_items (
  conversation_id text NOT NULL,
  position        bigint NOT NULL,
  item_id         text NOT NULL,
  PRIMARY KEY (conversation_id, position)
);
CREATE UNIQUE INDEX conversation_items_by_member ON conversation_items (conversation_id, item_id);
CREATE INDEX conversation_items_by_item ON conversation_items (item_id);

CREATE TABLE response_events (
  response_id text NOT NULL,
  sequence    bigint NOT NULL,
  json        text NOT NULL,
  PRIMARY KEY (response_id, sequence)
);
