// Every SQL statement of the Responses store, in one place. Each is written once in the SQL both
// engines read, with SQLite's ?N parameters (PostgreSQL's connection reads them as $N); where
// PostgreSQL needs its own spelling, `postgres_spelling` at the end gives it. Each fixed one is a named
// array, so its address keys the connection's prepared statement. Included by the Responses store's
// adapters only.
#pragma once

#include "io/statement_spelling.hpp"

#include <string>

namespace troupe::io::response_sql {

#define TROUPE_RESPONSE_COLUMNS                                                                                  \
  "id, created_at, status, background, model, snapshot, request, input_count, previous_response_id, "            \
  "conversation_id, owner, node_id"

// ---- Responses ----

inline constexpr char get_response[] = "SELECT " TROUPE_RESPONSE_COLUMNS " FROM responses WHERE id = ?1 AND owner = ?2";
inline constexpr char unfinished[] = "SELECT " TROUPE_RESPONSE_COLUMNS
                                     " FROM responses WHERE status IN ('queued', 'in_progress') ORDER BY created_at, rowid";
// A later save replaces every column but the id; the row keeps its place in insertion order. A response
// that ended stays as it ended: a save after that (a fenced node's, CJ-16) changes nothing.
inline constexpr char put_response[] = "INSERT INTO responses (" TROUPE_RESPONSE_COLUMNS
                                       ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) "
                                       "ON CONFLICT (id) DO UPDATE SET created_at = excluded.created_at, "
                                       "status = excluded.status, background = excluded.background, "
                                       "model = excluded.model, snapshot = excluded.snapshot, "
                                       "request = excluded.request, input_count = excluded.input_count, "
                                       "previous_response_id = excluded.previous_response_id, "
                                       "conversation_id = excluded.conversation_id, owner = excluded.owner, "
                                       "node_id = excluded.node_id "
                                       "WHERE responses.status IN ('queued', 'in_progress')";
inline constexpr char input_count[] = "SELECT input_count FROM responses WHERE id = ?1 AND owner = ?2";

inline constexpr char history[] = "SELECT item_id FROM response_history WHERE response_id = ?1 ORDER BY position";
inline constexpr char clear_history[] = "DELETE FROM response_history WHERE response_id = ?1";
inline constexpr char add_history[] = "INSERT INTO response_history (response_id, position, item_id) VALUES (?1, ?2, ?3)";

// Nor does an event come after the end: the events of a commit go in before its row.
inline constexpr char put_event[] =
  "INSERT INTO response_events (response_id, sequence, json) SELECT ?1, ?2, ?3 "
  "WHERE NOT EXISTS (SELECT 1 FROM responses WHERE id = ?1 AND status NOT IN ('queued', 'in_progress')) "
  "ON CONFLICT (response_id, sequence) DO NOTHING";
inline constexpr char ended[] =
  "SELECT 1 FROM responses WHERE id = ?1 AND status NOT IN ('queued', 'in_progress')";
inline constexpr char events_after[] =
  "SELECT sequence, json FROM response_events WHERE response_id = ?1 AND sequence > ?2 ORDER BY sequence";

// A deleted response: the items its history held, then its rows.
inline constexpr char response_item_ids[] = "SELECT DISTINCT item_id FROM response_history WHERE response_id = ?1";
inline constexpr char delete_response[] = "DELETE FROM responses WHERE id = ?1";
inline constexpr char delete_response_events[] = "DELETE FROM response_events WHERE response_id = ?1";

// ---- Items ----

inline constexpr char put_item[] =
  "INSERT INTO items (id, json, created_at, owner) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (id) DO NOTHING";
// ?1: a JSON array of ids, whose order the rows keep.
inline constexpr char items_by_id[] =
  "SELECT i.id, i.json FROM json_each(?1) j JOIN items i ON i.id = j.value AND i.owner = ?2 ORDER BY j.key";
inline constexpr char collect_item[] = R"sql(
  DELETE FROM items WHERE id = ?1
    AND NOT EXISTS (SELECT 1 FROM response_history WHERE item_id = ?1)
    AND NOT EXISTS (SELECT 1 FROM conversation_items WHERE item_id = ?1))sql";

// ---- Conversations ----

inline constexpr char get_conversation[] =
  "SELECT created_at, metadata, revision FROM conversations WHERE id = ?1 AND owner = ?2";
// The same read by a write that goes on to change the conversation or its members: PostgreSQL locks
// the row until commit, so writers of one conversation take turns and each reads the revision and the
// members the one before it left (RS-54).
inline constexpr char lock_conversation[] =
  "SELECT created_at, metadata, revision FROM conversations WHERE id = ?1 AND owner = ?2";
// No row inserted: the id is taken.
inline constexpr char create_conversation[] = "INSERT INTO conversations (id, created_at, metadata, revision, owner) "
                                              "VALUES (?1, ?2, ?3, 0, ?4) ON CONFLICT (id) DO NOTHING";
inline constexpr char update_conversation[] =
  "UPDATE conversations SET metadata = ?2, revision = revision + 1 WHERE id = ?1 AND owner = ?3";
inline constexpr char bump_conversation[] = "UPDATE conversations SET revision = revision + 1 WHERE id = ?1";
// After the last position in use; no row inserted: the item is a member already. (A position taken
// meanwhile is an error, not a member: writers hold the conversation's row, so it is never taken.)
inline constexpr char append_member[] = R"sql(
  INSERT INTO conversation_items (conversation_id, position, item_id)
  SELECT ?1, COALESCE(MAX(position), -1) + 1, ?2 FROM conversation_items WHERE conversation_id = ?1
  ON CONFLICT (conversation_id, item_id) DO NOTHING)sql";
inline constexpr char members[] = R"sql(
  SELECT i.id, i.json FROM conversation_items c JOIN items i ON i.id = c.item_id AND i.owner = ?2
  WHERE c.conversation_id = ?1 ORDER BY c.position)sql";
inline constexpr char remove_member[] = "DELETE FROM conversation_items WHERE conversation_id = ?1 AND item_id = ?2";

// A deleted conversation: the items its members held, then its rows.
inline constexpr char member_item_ids[] = "SELECT item_id FROM conversation_items WHERE conversation_id = ?1";
inline constexpr char delete_conversation[] = "DELETE FROM conversations WHERE id = ?1";
inline constexpr char delete_members[] = "DELETE FROM conversation_items WHERE conversation_id = ?1";

// ---- Pages of an ordered list of item ids: a response's history or a conversation's members ----

// Its statements, built once from the list's table and owning column; every parameter a statement
// names is one it binds (PostgreSQL infers each one's type from its use).
struct listing {
  listing(const char* table, const char* owner) {
    std::string from = std::string(" FROM ") + table + " WHERE " + owner + " = ?1 AND item_id = ?2 AND position < ?3";
    first_position = "SELECT MIN(position)" + from;
    last_position = "SELECT MAX(position)" + from;
    // ?2: the listing's owner, whose items alone it shows (an id another owner stored first is not).
    std::string rows = std::string("SELECT i.id, i.json FROM ") + table
                       + " l JOIN items i ON i.id = l.item_id AND i.owner = ?2 WHERE l." + owner + " = ?1 AND ";
    ascending = rows + "l.position > ?3 AND l.position < ?4 ORDER BY l.position ASC LIMIT ?5";
    descending = rows + "l.position < ?3 ORDER BY l.position DESC LIMIT ?4";
  }
  std::string first_position, last_position, ascending, descending;
};

inline const listing& history_listing() {
  static const listing l("response_history", "response_id");
  return l;
}

inline const listing& member_listing() {
  static const listing l("conversation_items", "conversation_id");
  return l;
}

// ---- PostgreSQL's own spelling ----
// Where SQLite's differs: rowid is row_order, a JSON array of ids is read with
// json_array_elements_text, and a write that reads a conversation locks its row.

inline constexpr statement_spelling postgres_spelling[] = {
  {unfinished, "SELECT " TROUPE_RESPONSE_COLUMNS
               " FROM responses WHERE status IN ('queued', 'in_progress') ORDER BY created_at, row_order"},
  {items_by_id, R"sql(
    SELECT i.id, i.json FROM json_array_elements_text($1::json) WITH ORDINALITY AS j(value, key)
    JOIN items i ON i.id = j.value AND i.owner = $2 ORDER BY j.key)sql"},
  {lock_conversation, "SELECT created_at, metadata, revision FROM conversations WHERE id = $1 AND owner = $2 FOR UPDATE"},
  {nullptr, nullptr},
};

#undef TROUPE_RESPONSE_COLUMNS

} // namespace troupe::io::response_sql
