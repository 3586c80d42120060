-- The Responses gateway (RS-53); written through io/sqlite_response_store.cpp.
CREATE TABLE responses (
  id                   TEXT PRIMARY KEY,
  created_at           INTEGER NOT NULL,
  status               TEXT NOT NULL,
  background           INTEGER NOT NULL,
  model                TEXT NOT NULL,
  snapshot             TEXT NOT NULL,
  request              TEXT NOT NULL,
  input_count          INTEGER NOT NULL,
  previous_response_id TEXT NOT NULL,
  conversation_id      TEXT NOT NULL
);
CREATE INDEX responses_by_status ON responses (status);
CREATE TABLE response_history (
  response_id TEXT NOT NULL,
  position    INTEGER NOT NULL,
  item_id     TEXT NOT NULL,
  PRIMARY KEY (response_id, position)
);
CREATE INDEX response_history_by_item ON response_history (item_id);
CREATE TABLE items (
  id         TEXT PRIMARY KEY,
  json       TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE TABLE conversations (
  id         TEXT PRIMARY KEY,
  created_at INTEGER NOT NULL,
  metadata   TEXT NOT NULL,
  revision   INTEGER NOT NULL
);
CREATE TABLE conversation_items (
  conversation_id TEXT NOT NULL,
  position        INTEGER NOT NULL,
  item_id         TEXT NOT NULL,
  PRIMARY KEY (conversation_id, position)
);
CREATE UNIQUE INDEX conversation_items_by_member ON conversation_items (conversation_id, item_id);
CREATE INDEX conversation_items_by_item ON conversation_items (item_id);
CREATE TABLE response_events (
  response_id TEXT NOT NULL,
  sequence    INTEGER NOT NULL,
  json        TEXT NOT NULL,
  PRIMARY KEY (response_id, sequence)
);
