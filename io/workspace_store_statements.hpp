// Every SQL statement of the workspace store, in one place. Each is written once in the SQL both
// engines read, with SQLite's ?N parameters (PostgreSQL's connection reads them as $N); where
// PostgreSQL needs its own spelling, `postgres_spelling` at the end gives it. Each is a named array,
// so its address keys the connection's prepared statement. Included by the workspace store adapters
// only.
#pragma once

#include "io/statement_spelling.hpp"

namespace troupe::io::workspace_sql {

inline constexpr char head[] = "SELECT COALESCE(MAX(seq), 0) FROM workspace_events WHERE tenant = ?1 AND workspace = ?2";

// CJ-9: a command holds its log's head until it commits, so concurrent writers take seqs one after
// the other, and reads the log's owner and epoch (CJ-28) under the same lock. SQLite has one writer
// at a time, no owners, and reads the head; PostgreSQL locks the head row.
inline constexpr char lock_head[] =
  "SELECT COALESCE(MAX(seq), 0), '', 0 FROM workspace_events WHERE tenant = ?1 AND workspace = ?2";

inline constexpr char last_ts[] =
  "SELECT ts FROM workspace_events WHERE tenant = ?1 AND workspace = ?2 ORDER BY seq DESC LIMIT 1";

inline constexpr char find_event[] =
  "SELECT seq, correlation_id FROM workspace_events WHERE tenant = ?1 AND workspace = ?2 AND id = ?3";

inline constexpr char append_envelope[] = R"sql(
  INSERT INTO workspace_events (tenant, workspace, seq, id, type, ts, correlation_id, envelope)
  VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8))sql";

inline constexpr char remembered_result[] = R"sql(
  SELECT code, ok, max_seq, result FROM workspace_command_results
  WHERE tenant = ?1 AND workspace = ?2 AND participant = ?3 AND command_id = ?4)sql";

inline constexpr char remember_result[] = R"sql(
  INSERT INTO workspace_command_results
    (tenant, workspace, participant, command_id, code, ok, max_seq, result, created_at)
  VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9))sql";

// CJ-28, PostgreSQL only: the log goes to ?3 unless a node alive or draining owns it, with the epoch
// one higher, and the statement answers the owner either way. The head row is made here when the
// log is new. A take that lost a race to another node reads the row as it was before, at worst an
// owner no longer alive: a forward to it fails and the command asks again.
inline constexpr char take_owner[] = R"sql(
  WITH taken AS (
    INSERT INTO workspaces AS w (tenant, workspace, owner_node, owner_epoch) VALUES (?1, ?2, ?3, 1)
    ON CONFLICT (tenant, workspace) DO UPDATE SET owner_node = ?3, owner_epoch = w.owner_epoch + 1
    WHERE w.owner_node <> ?3 AND NOT EXISTS (
      SELECT 1 FROM nodes n WHERE n.node_id = w.owner_node AND n.state IN ('alive', 'draining'))
    RETURNING owner_node, owner_epoch)
  SELECT owner_node, owner_epoch FROM taken
  UNION ALL
  SELECT owner_node, owner_epoch FROM workspaces
  WHERE tenant = ?1 AND workspace = ?2 AND NOT EXISTS (SELECT 1 FROM taken))sql";

// CJ-28: an owner idle past WS-128's timeout gives the log up, only if it still holds it.
inline constexpr char give_up_owner[] = R"sql(
  UPDATE workspaces SET owner_node = ''
  WHERE tenant = ?1 AND workspace = ?2 AND owner_node = ?3 AND owner_epoch = ?4)sql";

inline constexpr char prune_results[] = "DELETE FROM workspace_command_results WHERE created_at < ?1";

// One statement per direction; the type filter ?5 is a JSON list so the SQL text stays fixed.
inline constexpr char read_ascending[] = R"sql(
  SELECT seq, envelope, type FROM workspace_events
  WHERE tenant = ?1 AND workspace = ?2 AND seq > ?3 AND seq < ?4
    AND (?5 = '[]' OR type IN (SELECT value FROM json_each(?5)))
  ORDER BY seq ASC LIMIT ?6)sql";
inline constexpr char read_descending[] = R"sql(
  SELECT seq, envelope, type FROM workspace_events
  WHERE tenant = ?1 AND workspace = ?2 AND seq > ?3 AND seq < ?4
    AND (?5 = '[]' OR type IN (SELECT value FROM json_each(?5)))
  ORDER BY seq DESC LIMIT ?6)sql";

// ---- PostgreSQL's own spelling ----
// Where SQLite's differs: the head row of `workspaces` is taken (made on a log's first command) and
// locked until commit, each append advances it, and the type filter's JSON list is read with
// json_array_elements_text.

#define TROUPE_WORKSPACE_READ(order)                                                          \
  "SELECT seq, envelope, type FROM workspace_events "                                        \
  "WHERE tenant = $1 AND workspace = $2 AND seq > $3 AND seq < $4 "                          \
  "AND ($5::text = '[]' OR type IN (SELECT json_array_elements_text($5::text::json))) " \
  "ORDER BY seq " order " LIMIT $6"

inline constexpr statement_spelling postgres_spelling[] = {
  {lock_head, R"sql(
    INSERT INTO workspaces AS w (tenant, workspace) VALUES ($1, $2)
    ON CONFLICT (tenant, workspace) DO UPDATE SET head_seq = w.head_seq
    RETURNING head_seq, owner_node, owner_epoch)sql"},
  {append_envelope, R"sql(
    WITH advanced AS (
      UPDATE workspaces SET head_seq = $3, head_ts = $6 WHERE tenant = $1 AND workspace = $2)
    INSERT INTO workspace_events (tenant, workspace, seq, id, type, ts, correlation_id, envelope)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8))sql"},
  {read_ascending, TROUPE_WORKSPACE_READ("ASC")},
  {read_descending, TROUPE_WORKSPACE_READ("DESC")},
  {nullptr, nullptr},
};

#undef TROUPE_WORKSPACE_READ

} // namespace troupe::io::workspace_sql
