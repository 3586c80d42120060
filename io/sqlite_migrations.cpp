// The schema of the database troupe keeps in its data dir, as versioned migrations applied in order
// at start. One file holds them all, the run store's, the Responses store's and the workspace logs'
// tables, because the three stores share the database (and its schema_migrations table).
#include "io/sqlite_support.hpp"

#include <sqlite3.h>

#include <string>

namespace troupe::io {

namespace {

// Versioned migrations, applied in order at start; a version is never edited once released.
constexpr const char* migrations[] = {
  R"sql(
    CREATE TABLE sessions (
      tenant_key  TEXT NOT NULL,
      user_key    TEXT NOT NULL,
      session_id  TEXT NOT NULL,
      created_at  TEXT NOT NULL,
      updated_at  TEXT NOT NULL,
      run_count   INTEGER NOT NULL DEFAULT 0,
      last_run_id TEXT NOT NULL DEFAULT '',
      last_status TEXT NOT NULL DEFAULT '',
      last_query  TEXT NOT NULL DEFAULT '',
      last_answer TEXT NOT NULL DEFAULT '',
      PRIMARY KEY (tenant_key, user_key, session_id)
    );
  )sql",
  R"sql(
    CREATE TABLE runs (
      run_id      TEXT PRIMARY KEY,
      run_kind    TEXT NOT NULL,
      session_id  TEXT NOT NULL,
      tenant_key  TEXT NOT NULL,
      user_key    TEXT NOT NULL,
      status      TEXT NOT NULL,
      attempts    INTEGER NOT NULL,
      event_count INTEGER NOT NULL,
      created_at  TEXT NOT NULL,
      updated_at  TEXT NOT NULL
    );
  )sql",
  R"sql(
    ALTER TABLE runs ADD COLUMN started_at TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN completed_at TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN cancelled_at TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN duration_ms REAL;
    ALTER TABLE runs ADD COLUMN error TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE runs ADD COLUMN generation_options TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE runs ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE runs ADD COLUMN lease_expires_at TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN retry_after TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN worker_id TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN last_error TEXT NOT NULL DEFAULT '';
    ALTER TABLE runs ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN request TEXT NOT NULL DEFAULT '{}';
    CREATE INDEX runs_by_status ON runs (status, retry_after, created_at);
    CREATE INDEX runs_by_created ON runs (created_at);
    CREATE TABLE run_events (
      run_id     TEXT NOT NULL,
      sequence   INTEGER NOT NULL,
      type       TEXT NOT NULL,
      payload    TEXT NOT NULL,
      PRIMARY KEY (run_id, sequence)
    ) WITHOUT ROWID;
    CREATE TABLE traces (
      run_id       TEXT PRIMARY KEY,
      session_id   TEXT NOT NULL,
      tenant_key   TEXT NOT NULL,
      trace_type   TEXT NOT NULL,
      status       TEXT NOT NULL,
      completed_at TEXT NOT NULL,
      payload      TEXT NOT NULL
    );
    CREATE INDEX traces_by_completed ON traces (completed_at);
  )sql",
  R"sql(
    CREATE TABLE approvals (
      request_id        TEXT PRIMARY KEY,
      run_id            TEXT NOT NULL,
      session_id        TEXT NOT NULL,
      tenant_key        TEXT NOT NULL,
      user_key          TEXT NOT NULL,
      task_id           TEXT NOT NULL,
      tool_call_id      TEXT NOT NULL,
      tool_name         TEXT NOT NULL,
      tool_args         TEXT NOT NULL,
      reason            TEXT NOT NULL,
      decision_level    TEXT NOT NULL,
      pattern_matched   TEXT NOT NULL,
      policy_scope      TEXT NOT NULL,
      policy_action     TEXT NOT NULL,
      policy_matched    INTEGER NOT NULL,
      status            TEXT NOT NULL,
      approved          INTEGER,
      timeout_seconds   REAL NOT NULL,
      created_at        TEXT NOT NULL,
      expires_at        TEXT NOT NULL,
      resolved_at       TEXT NOT NULL,
      resolution_reason TEXT NOT NULL
    );
    CREATE INDEX approvals_by_status ON approvals (status, created_at);
    CREATE INDEX approvals_by_run ON approvals (run_id);
    CREATE TABLE audit (
      id         INTEGER PRIMARY KEY,
      run_id     TEXT NOT NULL,
      tenant_key TEXT NOT NULL,
      created_at TEXT NOT NULL,
      payload    TEXT NOT NULL
    );
  )sql",
  R"sql(
    CREATE INDEX runs_by_status_created ON runs (status, created_at);
  )sql",
  R"sql(
    CREATE TABLE rate_limits (
      user_key     TEXT PRIMARY KEY,
      window_start INTEGER NOT NULL,
      count        INTEGER NOT NULL
    );
  )sql",
  // The Responses gateway (responses.md RS-53); written through io/sqlite_response_store.cpp.
  R"sql(
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
  )sql",
  // Workspace logs (workspace-stream.md WS-15, WS-40); written through io/sqlite_workspace_store.cpp.
  R"sql(
    CREATE TABLE workspace_events (
      tenant         TEXT NOT NULL,
      workspace      TEXT NOT NULL,
      seq            INTEGER NOT NULL,
      id             TEXT NOT NULL,
      type           TEXT NOT NULL,
      ts             TEXT NOT NULL,
      correlation_id TEXT NOT NULL,
      envelope       TEXT NOT NULL,
      PRIMARY KEY (tenant, workspace, seq)
    ) WITHOUT ROWID;
    CREATE UNIQUE INDEX workspace_events_by_id ON workspace_events (tenant, workspace, id);
    CREATE TABLE workspace_command_results (
      tenant      TEXT NOT NULL,
      workspace   TEXT NOT NULL,
      participant TEXT NOT NULL,
      command_id  TEXT NOT NULL,
      status      INTEGER NOT NULL,
      ok          INTEGER NOT NULL,
      max_seq     INTEGER NOT NULL,
      result      TEXT NOT NULL,
      created_at  REAL NOT NULL,
      PRIMARY KEY (tenant, workspace, participant, command_id)
    ) WITHOUT ROWID;
    CREATE INDEX workspace_command_results_by_age ON workspace_command_results (created_at);
  )sql",
  // Responses, conversations and items belong to the caller that created them (issue 15 finding 9);
  // rows from before belong to the open service's owner "".
  R"sql(
    ALTER TABLE responses ADD COLUMN owner TEXT NOT NULL DEFAULT '';
    ALTER TABLE conversations ADD COLUMN owner TEXT NOT NULL DEFAULT '';
    ALTER TABLE items ADD COLUMN owner TEXT NOT NULL DEFAULT '';
  )sql",
};

} // namespace

std::string sqlite::migrate(sqlite3* db) {
  if (auto err = sqlite::exec(db, "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)"); !err.empty())
    return err;
  auto q = sqlite::prepare(db, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
  if (!q || sqlite3_step(q.get()) != SQLITE_ROW)
    return sqlite3_errmsg(db);
  auto current = sqlite3_column_int(q.get(), 0);
  int version = 0;
  for (auto sql : migrations) {
    ++version;
    if (version <= current)
      continue;
    std::string tx = std::string("BEGIN;") + sql + "INSERT INTO schema_migrations(version) VALUES ("
                     + std::to_string(version) + ");COMMIT;";
    if (auto err = sqlite::exec(db, tx.c_str()); !err.empty()) {
      sqlite::exec(db, "ROLLBACK");
      return "migration " + std::to_string(version) + ": " + err;
    }
  }
  return {};
}

} // namespace troupe::io
