// What the Responses store does with its database, one method an operation of the store port
// (actors/response_store.hpp), written once for both engines: `Conn` is a SQLite connection
// (io/sqlite_support.hpp) or a PostgreSQL one (io/pg_connection.hpp), each giving the same small
// query interface. Each method runs on its adapter's thread inside a transaction the adapter opened
// (SQLite: the group commit's, in a savepoint; PostgreSQL: the worker's, in a savepoint when it
// carries out several). The SQL is in io/response_store_statements.hpp. Included by the Responses
// store adapters only.
#pragma once

#include "actors/response_store.hpp"

#include <caf/error.hpp>

#include <initializer_list>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace troupe::io::response_sql {
struct listing;
}

namespace troupe::io::response_store {

template <class T>
using outcome = std::variant<T, caf::error>;

caf::error response_not_found(const std::string& id);
caf::error conversation_not_found(const std::string& id);

template <class Conn>
class responses_db : public Conn {
public:
  using Conn::Conn;

  // ---- Responses ----

  // Another owner's response is none (issue 15 finding 9).
  std::optional<response_row> get_response(const std::string& id, const response_owner& owner);
  // Every response still queued or in progress, each with its history.
  std::vector<response_row> unfinished();
  // One response commit (RS-53, RS-54): the revision is checked before anything is written. A commit
  // for a response that already ended (another node failed or cancelled it) keeps nothing and answers
  // errc::conflict of kind response_already_ended.
  outcome<int64_t> save(const response_commit& c);
  outcome<bool> delete_response(const std::string& id, const response_owner& owner);
  // A page of a response's input listing (RS-8).
  outcome<item_page> input_items(const std::string& id, const response_owner& owner, const page_request& p);
  std::vector<response_event> events(const std::string& id, int64_t after);

  // ---- Items ----

  // `owner`'s items by id in the order asked, in one statement.
  std::vector<stored_item> items(const std::vector<std::string>& item_ids, const response_owner& owner);

  // ---- Conversations ----

  // Another owner's conversation is none (issue 15 finding 9).
  std::optional<conversation_row> get_conversation(const std::string& id, const response_owner& owner);
  outcome<conversation_row> create_conversation(conversation_row row, const std::vector<stored_item>& items);
  outcome<conversation_row> update_conversation(const std::string& id, const response_owner& owner,
                                                const std::string& metadata);
  outcome<bool> delete_conversation(const std::string& id, const response_owner& owner);
  outcome<std::vector<stored_item>> add_conversation_items(const std::string& id, const response_owner& owner,
                                                           const std::vector<stored_item>& items);
  // The revision, then every member in order (RS-20 rehydration).
  outcome<std::pair<conversation_row, std::vector<stored_item>>> conversation_items(const std::string& id,
                                                                                    const response_owner& owner);
  outcome<item_page> list_conversation_items(const std::string& id, const response_owner& owner,
                                             const page_request& p);
  outcome<conversation_row> remove_conversation_item(const std::string& id, const response_owner& owner,
                                                     const std::string& item_id);

private:
  caf::error failed(const char* what) const;
  std::vector<std::string> history(const std::string& response_id);
  std::vector<response_row> responses(const char* text, std::initializer_list<std::string> args = {});
  bool has_ended(const std::string& response_id);
  caf::error ended_elsewhere(const std::string& response_id);
  bool put_response(const response_row& r);
  bool put_history(const std::string& response_id, const std::vector<std::string>& item_ids);
  bool put_item(const stored_item& item, const response_owner& owner);
  bool put_event(const std::string& response_id, const response_event& e);
  std::vector<stored_item> item_rows(const char* text, const std::string& first, const response_owner& owner);
  bool collect_garbage(const std::vector<std::string>& candidates);
  std::optional<conversation_row> read_conversation(const char* text, const std::string& id,
                                                    const response_owner& owner);
  std::optional<conversation_row> lock_conversation(const std::string& id, const response_owner& owner);
  outcome<bool> append_member(const std::string& conversation_id, const std::string& item_id);
  outcome<bool> add_members(const std::string& conversation_id, const response_owner& owner,
                            const std::vector<stored_item>& items);
  bool bump(const std::string& conversation_id);
  outcome<bool> drop(const std::string& id, const char* referenced, std::initializer_list<const char*> deletes);
  outcome<item_page> page(const response_sql::listing& list, const std::string& list_id, const response_owner& owner,
                          int64_t bound, const page_request& p);
  int64_t input_count(const std::string& id, const response_owner& owner);

  using Conn::changes;
  using Conn::error;
  using Conn::ids;
  using Conn::sql;
};

} // namespace troupe::io::response_store
