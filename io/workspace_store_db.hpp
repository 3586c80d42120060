// What the workspace store does with its database, one method an operation of the workspace store
// port (actors/workspace_store.hpp), written once for both engines: `Conn` is a SQLite connection
// (io/sqlite_support.hpp) or a PostgreSQL one (io/pg_connection.hpp). Each method runs on its
// adapter's thread inside a transaction the adapter opened (SQLite: the group commit's, in a
// savepoint; PostgreSQL: the worker's). The SQL is in io/workspace_store_statements.hpp. Included by
// the workspace store adapters only.
#pragma once

#include "actors/workspace_store.hpp"

#include <caf/error.hpp>

#include <optional>
#include <variant>

namespace troupe::io::workspace_store {

template <class T>
using outcome = std::variant<T, caf::error>;

template <class Conn>
class workspace_db : public Conn {
public:
  using Conn::Conn;

  // Carries out a command against its log (WS-24) with its envelopes and, for a keyed command, its
  // result (WS-40); a key already answered returns that first answer (WS-39). The log's head is held
  // from the start, so concurrent commands take seqs one after the other (CJ-9).
  outcome<workspace_outcome> carry_out(const workspace_command& c);
  workspace_slice read(const workspace_key& key, const workspace_read& r);
  // The log's head seq (0 when empty).
  int64_t head(const workspace_key& key);
  // Forgets the command results remembered more than `retention` seconds ago (WS-40).
  void prune(double retention);
  // CJ-28, PostgreSQL only (an embedded store has no nodes): takes the log for `node_id` unless a
  // live node owns it, and answers its owner; gives it up while `owner` still holds it.
  outcome<workspace_owner> own(const workspace_key& key, const std::string& node_id);
  outcome<bool> disown(const workspace_key& key, const workspace_owner& owner);

private:
  // The log as a command reads it inside its transaction (io/workspace_store_db.cpp).
  class reader;

  std::optional<workspace_outcome> remembered(const workspace_command& c);
  // Locks the head (CJ-9) and answers the log's owner, read under that lock.
  workspace_owner lock_head(const workspace_key& key);
  caf::error failed(const char* what) const;

  using Conn::error;
  using Conn::sql;
};

} // namespace troupe::io::workspace_store
