// The Responses store's operations (io/response_store_db.hpp), once for SQLite and PostgreSQL.
#include "io/response_store_db.hpp"

#include "actors/errors.hpp"
#include "io/pg_connection.hpp"
#include "io/response_store_statements.hpp"
#include "io/sqlite_support.hpp"
#include "protocol/json.hpp"
#include "protocol/responses_request.hpp"

#include <algorithm>
#include <chrono>
#include <limits>

namespace troupe::io::response_store {

namespace rs = protocol::responses;

namespace {

caf::error item_not_found(const std::string& id) {
  return make_error({errc::not_found, "No item found with id '" + id + "'", {}, missing_item});
}

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
    .count();
}

} // namespace

caf::error response_not_found(const std::string& id) {
  return make_error({errc::not_found, "Response with id '" + id + "' not found.", {}, missing_response});
}

caf::error conversation_not_found(const std::string& id) {
  return make_error({errc::not_found, "Conversation with id '" + id + "' not found.", {}, missing_conversation});
}

template <class Conn>
caf::error responses_db<Conn>::failed(const char* what) const {
  return make_error(errc::internal, std::string("response store: ") + what + ": " + error());
}

// ---- Responses ----

template <class Conn>
std::vector<std::string> responses_db<Conn>::history(const std::string& response_id) {
  return ids(response_sql::history, response_id);
}

template <class Conn>
std::optional<response_row> responses_db<Conn>::get_response(const std::string& id, const response_owner& owner) {
  auto rows = responses(response_sql::get_response, {id, owner.key});
  if (rows.empty())
    return std::nullopt;
  return std::move(rows.front());
}

template <class Conn>
std::vector<response_row> responses_db<Conn>::unfinished() {
  return responses(response_sql::unfinished);
}

// The rows a statement selects (response columns, given its parameters), each with its history.
template <class Conn>
std::vector<response_row> responses_db<Conn>::responses(const char* text, std::initializer_list<std::string> args) {
  std::vector<response_row> out;
  {
    auto q = sql(text);
    int at = 0;
    for (auto& arg : args)
      q.bind(++at, arg);
    while (q.row()) {
      response_row r;
      r.id = q.text(0);
      r.created_at = q.integer(1);
      // Rows are written by put_response alone; a name no status has reads as failed.
      r.status = rs::parse_response_status(q.text(2)).value_or(rs::response_status::failed);
      r.background = q.integer(3) != 0;
      r.model = q.text(4);
      r.snapshot = q.text(5);
      r.request = q.text(6);
      r.input_count = q.integer(7);
      r.previous_response_id = q.text(8);
      r.conversation_id = q.text(9);
      r.owner = q.text(10);
      r.node_id = q.text(11);
      out.push_back(std::move(r));
    }
  }
  for (auto& r : out)
    r.history_item_ids = history(r.id);
  return out;
}

template <class Conn>
bool responses_db<Conn>::has_ended(const std::string& response_id) {
  auto q = sql(response_sql::ended);
  q.bind(1, response_id);
  return q.row();
}

template <class Conn>
caf::error responses_db<Conn>::ended_elsewhere(const std::string& response_id) {
  return make_error({errc::conflict, "Response '" + response_id + "' already ended; this save was not kept.", {},
                     response_already_ended});
}

template <class Conn>
bool responses_db<Conn>::put_response(const response_row& r) {
  auto q = sql(response_sql::put_response);
  q.bind(1, r.id).bind(2, r.created_at).bind(3, std::string(rs::to_string(r.status))).bind(4, int64_t{r.background});
  q.bind(5, r.model);
  q.bind(6, r.snapshot).bind(7, r.request).bind(8, r.input_count).bind(9, r.previous_response_id);
  q.bind(10, r.conversation_id).bind(11, r.owner).bind(12, r.node_id);
  return q.done();
}

// Rewrites the history rows only where they changed: a history that grew keeps its stored prefix.
template <class Conn>
bool responses_db<Conn>::put_history(const std::string& response_id, const std::vector<std::string>& item_ids) {
  auto stored = history(response_id);
  std::size_t keep = 0;
  if (stored.size() <= item_ids.size() && std::equal(stored.begin(), stored.end(), item_ids.begin())) {
    keep = stored.size();
  } else {
    auto q = sql(response_sql::clear_history);
    q.bind(1, response_id);
    if (!q.done())
      return false;
  }
  for (auto i = keep; i < item_ids.size(); ++i) {
    auto q = sql(response_sql::add_history);
    q.bind(1, response_id).bind(2, static_cast<int64_t>(i)).bind(3, item_ids[i]);
    if (!q.done())
      return false;
  }
  return true;
}

// Items are immutable: a stored id keeps its stored body (RS-12 by reference) and its owner.
template <class Conn>
bool responses_db<Conn>::put_item(const stored_item& item, const response_owner& owner) {
  auto q = sql(response_sql::put_item);
  q.bind(1, item.id).bind(2, item.json).bind(3, now_seconds()).bind(4, owner.key);
  return q.done();
}

template <class Conn>
bool responses_db<Conn>::put_event(const std::string& response_id, const response_event& e) {
  auto q = sql(response_sql::put_event);
  q.bind(1, response_id).bind(2, e.sequence).bind(3, e.json);
  return q.done();
}

template <class Conn>
outcome<int64_t> responses_db<Conn>::save(const response_commit& c) {
  const auto& conversation = c.conversation_id;
  const response_owner owner{c.response.owner};
  if (!conversation.empty()) {
    // Locked until commit where the engine locks rows: no other writer moves it in between (RS-54).
    auto row = lock_conversation(conversation, owner);
    if (!row)
      return conversation_not_found(conversation);
    if (row->revision != c.expected_revision)
      return make_error(errc::conflict, "Another response is in progress for conversation '" + conversation + "'.");
  }
  // Events first: each is kept only while the response has not ended, and so is the row after them.
  for (auto& e : c.events) {
    if (!put_event(c.response.id, e))
      return failed("appending an event");
    if (changes() == 0 && has_ended(c.response.id))
      return ended_elsewhere(c.response.id);
  }
  if (!c.events_only) {
    if (!put_response(c.response))
      return failed("saving a response");
    if (changes() == 0)
      return ended_elsewhere(c.response.id);
    if (!put_history(c.response.id, c.response.history_item_ids))
      return failed("saving a response");
  }
  for (auto& item : c.items)
    if (!put_item(item, owner))
      return failed("storing an item");
  if (conversation.empty())
    return int64_t{-1};
  // An input that referenced a member already is not added twice: membership is a set.
  for (auto& id : c.conversation_append)
    if (auto appended = append_member(conversation, id); std::holds_alternative<caf::error>(appended))
      return std::get<caf::error>(std::move(appended));
  if (!bump(conversation))
    return failed("bumping a conversation's revision");
  return c.expected_revision + 1;
}

template <class Conn>
outcome<bool> responses_db<Conn>::delete_response(const std::string& id, const response_owner& owner) {
  if (!get_response(id, owner))
    return response_not_found(id);
  return drop(id, response_sql::response_item_ids,
              {response_sql::delete_response, response_sql::clear_history, response_sql::delete_response_events});
}

template <class Conn>
int64_t responses_db<Conn>::input_count(const std::string& id, const response_owner& owner) {
  auto q = sql(response_sql::input_count);
  q.bind(1, id).bind(2, owner.key);
  return q.row() ? q.integer(0) : -1;
}

template <class Conn>
outcome<item_page> responses_db<Conn>::input_items(const std::string& id, const response_owner& owner,
                                                   const page_request& p) {
  auto count = input_count(id, owner);
  if (count < 0)
    return response_not_found(id);
  return page(response_sql::history_listing(), id, owner, count, p);
}

template <class Conn>
std::vector<response_event> responses_db<Conn>::events(const std::string& id, int64_t after) {
  auto q = sql(response_sql::events_after);
  q.bind(1, id).bind(2, after);
  std::vector<response_event> out;
  while (q.row())
    out.push_back({q.integer(0), q.text(1)});
  return out;
}

// ---- Items ----

template <class Conn>
std::vector<stored_item> responses_db<Conn>::items(const std::vector<std::string>& item_ids,
                                                   const response_owner& owner) {
  std::string array = "[";
  for (auto& id : item_ids)
    array += (array.size() > 1 ? "," : "") + protocol::json::quote(id);
  array += "]";
  return item_rows(response_sql::items_by_id, array, owner);
}

// The (id, json) rows `text` selects with ?1 = `first` and ?2 = `owner`'s key.
template <class Conn>
std::vector<stored_item> responses_db<Conn>::item_rows(const char* text, const std::string& first,
                                                       const response_owner& owner) {
  std::vector<stored_item> out;
  auto q = sql(text);
  q.bind(1, first).bind(2, owner.key);
  while (q.row())
    out.push_back({q.text(0), q.text(1)});
  return out;
}

// Deletes the items among `candidates` that no history and no conversation references (RS-7).
template <class Conn>
bool responses_db<Conn>::collect_garbage(const std::vector<std::string>& candidates) {
  for (auto& id : candidates) {
    auto q = sql(response_sql::collect_item);
    q.bind(1, id);
    if (!q.done())
      return false;
  }
  return true;
}

// Deletes what `deletes` select by `id`, then the items `referenced` listed and nothing references
// any more (RS-7).
template <class Conn>
outcome<bool> responses_db<Conn>::drop(const std::string& id, const char* referenced,
                                       std::initializer_list<const char*> deletes) {
  auto candidates = ids(referenced, id);
  for (auto text : deletes) {
    auto q = sql(text);
    q.bind(1, id);
    if (!q.done())
      return failed("deleting");
  }
  if (!collect_garbage(candidates))
    return failed("collecting unreferenced items");
  return true;
}

// ---- Conversations ----

template <class Conn>
std::optional<conversation_row> responses_db<Conn>::read_conversation(const char* text, const std::string& id,
                                                                      const response_owner& owner) {
  auto q = sql(text);
  q.bind(1, id).bind(2, owner.key);
  if (!q.row())
    return std::nullopt;
  return conversation_row{id, q.integer(0), q.text(1), q.integer(2), owner.key};
}

template <class Conn>
std::optional<conversation_row> responses_db<Conn>::get_conversation(const std::string& id,
                                                                     const response_owner& owner) {
  return read_conversation(response_sql::get_conversation, id, owner);
}

// The conversation a write is about to change, locked until its transaction ends where the engine
// locks rows.
template <class Conn>
std::optional<conversation_row> responses_db<Conn>::lock_conversation(const std::string& id,
                                                                      const response_owner& owner) {
  return read_conversation(response_sql::lock_conversation, id, owner);
}

// Appends a member after the last position in use; false when it is one already.
template <class Conn>
outcome<bool> responses_db<Conn>::append_member(const std::string& conversation_id, const std::string& item_id) {
  auto q = sql(response_sql::append_member);
  q.bind(1, conversation_id).bind(2, item_id);
  if (!q.done())
    return failed("adding a conversation item");
  return changes() == 1;
}

// Stores `items` and appends them as members; an id already a member undoes it all (RS-12).
template <class Conn>
outcome<bool> responses_db<Conn>::add_members(const std::string& conversation_id, const response_owner& owner,
                                              const std::vector<stored_item>& items) {
  for (auto& item : items) {
    if (!put_item(item, owner))
      return failed("storing an item");
    auto appended = append_member(conversation_id, item.id);
    if (std::holds_alternative<caf::error>(appended))
      return appended;
    if (!std::get<bool>(appended))
      return make_error(errc::conflict, "Item already in conversation");
  }
  return true;
}

template <class Conn>
bool responses_db<Conn>::bump(const std::string& conversation_id) {
  auto q = sql(response_sql::bump_conversation);
  q.bind(1, conversation_id);
  return q.done() && changes() == 1;
}

template <class Conn>
outcome<conversation_row> responses_db<Conn>::create_conversation(conversation_row row,
                                                                  const std::vector<stored_item>& items) {
  row.revision = 0;
  {
    auto q = sql(response_sql::create_conversation);
    q.bind(1, row.id).bind(2, row.created_at).bind(3, row.metadata).bind(4, row.owner);
    if (!q.done())
      return failed("creating a conversation");
    if (changes() != 1)
      return make_error(errc::conflict, "Conversation with id '" + row.id + "' already exists.");
  }
  if (auto added = add_members(row.id, response_owner{row.owner}, items); std::holds_alternative<caf::error>(added))
    return std::get<caf::error>(std::move(added));
  return row;
}

template <class Conn>
outcome<conversation_row> responses_db<Conn>::update_conversation(const std::string& id, const response_owner& owner,
                                                                  const std::string& metadata) {
  auto q = sql(response_sql::update_conversation);
  q.bind(1, id).bind(2, metadata).bind(3, owner.key);
  if (!q.done())
    return failed("updating a conversation");
  if (changes() != 1)
    return conversation_not_found(id);
  return *get_conversation(id, owner);
}

template <class Conn>
outcome<bool> responses_db<Conn>::delete_conversation(const std::string& id, const response_owner& owner) {
  if (!lock_conversation(id, owner))
    return conversation_not_found(id);
  // Stored responses keep their histories (RS-11): only what the members alone held goes.
  return drop(id, response_sql::member_item_ids, {response_sql::delete_conversation, response_sql::delete_members});
}

template <class Conn>
outcome<std::vector<stored_item>> responses_db<Conn>::add_conversation_items(const std::string& id,
                                                                             const response_owner& owner,
                                                                             const std::vector<stored_item>& items) {
  // Locked: concurrent adds take turns, so positions follow one another without gap or repeat.
  if (!lock_conversation(id, owner))
    return conversation_not_found(id);
  if (auto added = add_members(id, owner, items); std::holds_alternative<caf::error>(added))
    return std::get<caf::error>(std::move(added));
  if (!bump(id))
    return failed("bumping a conversation's revision");
  std::vector<std::string> item_ids;
  for (auto& item : items)
    item_ids.push_back(item.id);
  return this->items(item_ids, owner); // as stored: a known id keeps its stored body (RS-12)
}

template <class Conn>
outcome<std::pair<conversation_row, std::vector<stored_item>>>
responses_db<Conn>::conversation_items(const std::string& id, const response_owner& owner) {
  // The revision is read before the members: a writer in between (another worker or instance)
  // leaves the revision older than the members, so a commit based on them fails its check (RS-54).
  auto row = get_conversation(id, owner);
  if (!row)
    return conversation_not_found(id);
  auto found = item_rows(response_sql::members, id, owner);
  return std::make_pair(std::move(*row), std::move(found));
}

template <class Conn>
outcome<item_page> responses_db<Conn>::list_conversation_items(const std::string& id, const response_owner& owner,
                                                               const page_request& p) {
  if (!get_conversation(id, owner))
    return conversation_not_found(id);
  return page(response_sql::member_listing(), id, owner, std::numeric_limits<int64_t>::max(), p);
}

template <class Conn>
outcome<conversation_row> responses_db<Conn>::remove_conversation_item(const std::string& id,
                                                                       const response_owner& owner,
                                                                       const std::string& item_id) {
  if (!lock_conversation(id, owner))
    return conversation_not_found(id);
  auto q = sql(response_sql::remove_member);
  q.bind(1, id).bind(2, item_id);
  if (!q.done())
    return failed("removing a conversation item");
  if (changes() != 1)
    return item_not_found(item_id);
  if (!collect_garbage({item_id}) || !bump(id))
    return failed("removing a conversation item");
  return *get_conversation(id, owner);
}

// ---- Pages ----

// A page of `list` (owned by `owner`, positions below `bound`) as page_request says (RS-8).
template <class Conn>
outcome<item_page> responses_db<Conn>::page(const response_sql::listing& list, const std::string& list_id,
                                            const response_owner& owner, int64_t bound, const page_request& p) {
  std::optional<int64_t> cursor;
  if (!p.after.empty()) {
    auto q = sql(p.ascending ? list.first_position.c_str() : list.last_position.c_str());
    q.bind(1, list_id).bind(2, p.after).bind(3, bound);
    if (!q.row() || !q.real(0))
      return item_not_found(p.after);
    cursor = q.integer(0);
  }
  auto limit = std::clamp<int64_t>(p.limit, 0, std::numeric_limits<int32_t>::max()); // limit + 1 fits
  item_page out;
  {
    auto q = sql(p.ascending ? list.ascending.c_str() : list.descending.c_str());
    q.bind(1, list_id).bind(2, owner.key);
    if (p.ascending)
      q.bind(3, cursor.value_or(-1)).bind(4, bound).bind(5, limit + 1);
    else
      q.bind(3, std::min(bound, cursor.value_or(bound))).bind(4, limit + 1);
    while (q.row())
      out.items.push_back({q.text(0), q.text(1)});
  }
  if (static_cast<int64_t>(out.items.size()) > limit) {
    out.items.resize(static_cast<std::size_t>(limit));
    out.has_more = true;
  }
  return out;
}

template class responses_db<sqlite::connection>;
template class responses_db<pg::connection>;

} // namespace troupe::io::response_store
