#include "io/sqlite_response_store.hpp"

#include "actors/errors.hpp"
#include "io/sqlite_response_statements.hpp"
#include "io/sqlite_support.hpp"

#include <caf/all.hpp>
#include <sqlite3.h>

#include "protocol/json.hpp"
#include "protocol/responses_request.hpp"

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace troupe::io {

namespace {

using sqlite::query;
namespace rs = protocol::responses;

template <class T>
using outcome = std::variant<T, caf::error>;

caf::error response_not_found(const std::string& id) {
  return make_error({errc::not_found, "Response with id '" + id + "' not found.", {}, missing_response});
}

caf::error conversation_not_found(const std::string& id) {
  return make_error({errc::not_found, "Conversation with id '" + id + "' not found.", {}, missing_conversation});
}

caf::error item_not_found(const std::string& id) {
  return make_error({errc::not_found, "No item found with id '" + id + "'", {}, missing_item});
}

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
    .count();
}

// The connection and what each operation does with it (the SQL is in io/sqlite_response_statements.hpp).
// Each method runs on the store actor's thread; the write methods run inside the batch's transaction,
// each within its own savepoint.
class responses_db : public sqlite::connection {
public:
  using connection::connection;

  caf::error failed(const char* what) const {
    return make_error(errc::internal, std::string("response store: ") + what + ": " + error());
  }

  std::vector<std::string> history(const std::string& response_id) {
    return ids(response_sql::history, response_id);
  }

  // Another owner's response is none (issue 15 finding 9).
  std::optional<response_row> get_response(const std::string& id, const response_owner& owner) {
    auto rows = responses(response_sql::get_response, {id, owner.key});
    if (rows.empty())
      return std::nullopt;
    return std::move(rows.front());
  }

  // The rows a statement selects (response_columns, given its parameters), each with its history.
  std::vector<response_row> responses(const char* text, std::initializer_list<std::string> args = {}) {
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
        out.push_back(std::move(r));
      }
    }
    for (auto& r : out)
      r.history_item_ids = history(r.id);
    return out;
  }

  bool put_response(const response_row& r) {
    auto q = sql(response_sql::put_response);
    q.bind(1, r.id).bind(2, r.created_at).bind(3, std::string(rs::to_string(r.status))).bind(4, int64_t{r.background});
    q.bind(5, r.model);
    q.bind(6, r.snapshot).bind(7, r.request).bind(8, r.input_count).bind(9, r.previous_response_id);
    q.bind(10, r.conversation_id).bind(11, r.owner);
    return q.done();
  }

  // Rewrites the history rows only where they changed: a history that grew keeps its stored prefix.
  bool put_history(const std::string& response_id, const std::vector<std::string>& item_ids) {
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
  bool put_item(const stored_item& item, const response_owner& owner) {
    auto q = sql(response_sql::put_item);
    q.bind(1, item.id).bind(2, item.json).bind(3, now_seconds()).bind(4, owner.key);
    return q.done();
  }

  bool put_event(const std::string& response_id, const response_event& e) {
    auto q = sql(response_sql::put_event);
    q.bind(1, response_id).bind(2, e.sequence).bind(3, e.json);
    return q.done();
  }

  // `owner`'s items by id in the order asked, in one statement.
  std::vector<stored_item> items(const std::vector<std::string>& item_ids, const response_owner& owner) {
    std::string array = "[";
    for (auto& id : item_ids)
      array += (array.size() > 1 ? "," : "") + protocol::json::quote(id);
    array += "]";
    return item_rows(response_sql::items_by_id, array, owner);
  }

  // The (id, json) rows `text` selects with ?1 = `first` and ?2 = `owner`'s key.
  std::vector<stored_item> item_rows(const char* text, const std::string& first, const response_owner& owner) {
    std::vector<stored_item> out;
    auto q = sql(text);
    q.bind(1, first).bind(2, owner.key);
    while (q.row())
      out.push_back({q.text(0), q.text(1)});
    return out;
  }

  // Deletes the items among `candidates` that no history and no conversation references (RS-7).
  bool collect_garbage(const std::vector<std::string>& candidates) {
    for (auto& id : candidates) {
      auto q = sql(response_sql::collect_item);
      q.bind(1, id);
      if (!q.done())
        return false;
    }
    return true;
  }

  // Another owner's conversation is none (issue 15 finding 9).
  std::optional<conversation_row> get_conversation(const std::string& id, const response_owner& owner) {
    auto q = sql(response_sql::get_conversation);
    q.bind(1, id).bind(2, owner.key);
    if (!q.row())
      return std::nullopt;
    return conversation_row{id, q.integer(0), q.text(1), q.integer(2), owner.key};
  }

  // Appends a member after the last position ever used; SQLITE_CONSTRAINT when it is one already.
  int append_member(const std::string& conversation_id, const std::string& item_id) {
    auto q = sql(response_sql::append_member);
    q.bind(1, conversation_id).bind(2, item_id);
    return q.step();
  }

  // Stores `items` and appends them as members; an id already a member undoes it all (RS-12).
  outcome<bool> add_members(const std::string& conversation_id, const response_owner& owner,
                            const std::vector<stored_item>& items) {
    for (auto& item : items) {
      if (!put_item(item, owner))
        return failed("storing an item");
      auto rc = append_member(conversation_id, item.id);
      if (rc == SQLITE_CONSTRAINT)
        return make_error(errc::conflict, "Item already in conversation");
      if (rc != SQLITE_DONE)
        return failed("adding a conversation item");
    }
    return true;
  }

  bool bump(const std::string& conversation_id) {
    auto q = sql(response_sql::bump_conversation);
    q.bind(1, conversation_id);
    return q.done() && sqlite3_changes(raw()) == 1;
  }

  // Deletes what `deletes` select by `id`, then the items `referenced` listed and nothing references
  // any more (RS-7).
  outcome<bool> drop(const std::string& id, const char* referenced, std::initializer_list<const char*> deletes) {
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

  // One response commit (RS-53, RS-54): the revision is checked before anything is written.
  outcome<int64_t> save(const response_commit& c) {
    const auto& conversation = c.conversation_id;
    if (!conversation.empty()) {
      auto row = get_conversation(conversation, response_owner{c.response.owner});
      if (!row)
        return conversation_not_found(conversation);
      if (row->revision != c.expected_revision)
        return make_error(errc::conflict, "Another response is in progress for conversation '" + conversation + "'.");
    }
    if (!c.events_only && (!put_response(c.response) || !put_history(c.response.id, c.response.history_item_ids)))
      return failed("saving a response");
    for (auto& item : c.items)
      if (!put_item(item, response_owner{c.response.owner}))
        return failed("storing an item");
    for (auto& e : c.events)
      if (!put_event(c.response.id, e))
        return failed("appending an event");
    if (conversation.empty())
      return int64_t{-1};
    // An input that referenced a member already is not added twice: membership is a set.
    for (auto& id : c.conversation_append) {
      auto rc = append_member(conversation, id);
      if (rc != SQLITE_DONE && rc != SQLITE_CONSTRAINT)
        return failed("adding a conversation item");
    }
    if (!bump(conversation))
      return failed("bumping a conversation's revision");
    return c.expected_revision + 1;
  }

  // A page of `list` (owned by `owner`, positions below `bound`) as page_request says (RS-8).
  caf::expected<item_page> page(const response_sql::listing& list, const std::string& list_id, const response_owner& owner,
                                int64_t bound, const page_request& p) {
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
      q.bind(1, list_id).bind(9, owner.key);
      if (p.ascending)
        q.bind(2, cursor.value_or(-1)).bind(3, bound).bind(4, limit + 1);
      else
        q.bind(2, std::min(bound, cursor.value_or(bound))).bind(3, limit + 1);
      while (q.row())
        out.items.push_back({q.text(0), q.text(1)});
    }
    if (static_cast<int64_t>(out.items.size()) > limit) {
      out.items.resize(static_cast<std::size_t>(limit));
      out.has_more = true;
    }
    return out;
  }

  int64_t input_count(const std::string& id, const response_owner& owner) {
    auto q = sql(response_sql::input_count);
    q.bind(1, id).bind(2, owner.key);
    return q.row() ? q.integer(0) : -1;
  }

  std::vector<response_event> events(const std::string& id, int64_t after) {
    auto q = sql(response_sql::events_after);
    q.bind(1, id).bind(2, after);
    std::vector<response_event> out;
    while (q.row())
      out.push_back({q.integer(0), q.text(1)});
    return out;
  }

  outcome<bool> delete_response(const std::string& id, const response_owner& owner) {
    if (!get_response(id, owner))
      return response_not_found(id);
    return drop(id, response_sql::response_item_ids,
                {response_sql::delete_response, response_sql::clear_history, response_sql::delete_response_events});
  }

  outcome<conversation_row> create_conversation(conversation_row row, const std::vector<stored_item>& items) {
    row.revision = 0;
    {
      auto q = sql(response_sql::create_conversation);
      q.bind(1, row.id).bind(2, row.created_at).bind(3, row.metadata).bind(4, row.owner);
      auto rc = q.step();
      if (rc == SQLITE_CONSTRAINT)
        return make_error(errc::conflict, "Conversation with id '" + row.id + "' already exists.");
      if (rc != SQLITE_DONE)
        return failed("creating a conversation");
    }
    if (auto added = add_members(row.id, response_owner{row.owner}, items); std::holds_alternative<caf::error>(added))
      return std::get<caf::error>(std::move(added));
    return row;
  }

  outcome<conversation_row> update_conversation(const std::string& id, const response_owner& owner,
                                                const std::string& metadata) {
    auto q = sql(response_sql::update_conversation);
    q.bind(1, id).bind(2, metadata).bind(3, owner.key);
    if (!q.done())
      return failed("updating a conversation");
    if (sqlite3_changes(raw()) != 1)
      return conversation_not_found(id);
    return *get_conversation(id, owner);
  }

  outcome<bool> delete_conversation(const std::string& id, const response_owner& owner) {
    if (!get_conversation(id, owner))
      return conversation_not_found(id);
    // Stored responses keep their histories (RS-11): only what the members alone held goes.
    return drop(id, response_sql::member_item_ids, {response_sql::delete_conversation, response_sql::delete_members});
  }

  outcome<std::vector<stored_item>> add_conversation_items(const std::string& id, const response_owner& owner,
                                                           const std::vector<stored_item>& items) {
    if (!get_conversation(id, owner))
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

  std::vector<stored_item> members(const std::string& id, const response_owner& owner) {
    return item_rows(response_sql::members, id, owner);
  }

  outcome<conversation_row> remove_conversation_item(const std::string& id, const response_owner& owner,
                                                     const std::string& item_id) {
    if (!get_conversation(id, owner))
      return conversation_not_found(id);
    auto q = sql(response_sql::remove_member);
    q.bind(1, id).bind(2, item_id);
    if (!q.done())
      return failed("removing a conversation item");
    if (sqlite3_changes(raw()) != 1)
      return item_not_found(item_id);
    if (!collect_garbage({item_id}) || !bump(id))
      return failed("removing a conversation item");
    return *get_conversation(id, owner);
  }

};

struct response_store_state {
  static inline const char* name = "sqlite_response_store";
  std::unique_ptr<responses_db> db;
  sqlite::write_batch<responses_db> batch;

  void flush() { batch.flush(*db, "response store"); }
};

// The port plus the store's own flush message.
using sqlite_response_store_actor = sqlite::batching<response_store_actor>;
using response_store_pointer = sqlite_response_store_actor::stateful_pointer<response_store_state>;
using sqlite::write;

// The database for a read, with every write received before it committed.
responses_db& fresh(response_store_pointer self) {
  self->state.flush();
  return *self->state.db;
}

sqlite_response_store_actor::behavior_type sqlite_response_store_behavior(response_store_pointer self,
                                                                          sqlite::db_ptr raw) {
  self->state.db = std::make_unique<responses_db>(std::move(raw));
  sqlite::flush_on_exit(self);
  return {
    [=](sqlite::flush_atom) { self->state.flush(); },
    [=](save_response_atom, response_commit& c) {
      return write<int64_t>(self, [c = std::move(c)](responses_db& db) { return db.save(c); });
    },
    [=](get_response_atom, const std::string& id, const response_owner& owner) -> caf::result<response_row> {
      if (auto r = fresh(self).get_response(id, owner))
        return std::move(*r);
      return response_not_found(id);
    },
    [=](get_items_atom, const std::vector<std::string>& ids,
        const response_owner& owner) -> caf::result<std::vector<stored_item>> {
      return fresh(self).items(ids, owner);
    },
    [=](input_items_atom, const std::string& id, const response_owner& owner,
        const page_request& p) -> caf::result<item_page> {
      auto& db = fresh(self);
      auto input_count = db.input_count(id, owner);
      if (input_count < 0)
        return response_not_found(id);
      return db.page(response_sql::history_listing(), id, owner, input_count, p);
    },
    [=](delete_response_atom, std::string& id, const response_owner& owner) {
      return write<bool>(self, [id, owner](responses_db& db) { return db.delete_response(id, owner); });
    },
    [=](response_events_atom, const std::string& id, int64_t after) -> caf::result<std::vector<response_event>> {
      return fresh(self).events(id, after);
    },
    [=](unfinished_atom) -> caf::result<std::vector<response_row>> {
      return fresh(self).responses(response_sql::unfinished);
    },
    [=](create_conversation_atom, conversation_row& row, std::vector<stored_item>& items) {
      return write<conversation_row>(self, [row = std::move(row), items = std::move(items)](responses_db& db) {
        return db.create_conversation(row, items);
      });
    },
    [=](get_conversation_atom, const std::string& id, const response_owner& owner) -> caf::result<conversation_row> {
      if (auto row = fresh(self).get_conversation(id, owner))
        return std::move(*row);
      return conversation_not_found(id);
    },
    [=](update_conversation_atom, std::string& id, const response_owner& owner, std::string& metadata) {
      return write<conversation_row>(self, [id, owner, metadata](responses_db& db) {
        return db.update_conversation(id, owner, metadata);
      });
    },
    [=](delete_conversation_atom, std::string& id, const response_owner& owner) {
      return write<bool>(self, [id, owner](responses_db& db) { return db.delete_conversation(id, owner); });
    },
    [=](add_conversation_items_atom, std::string& id, const response_owner& owner, std::vector<stored_item>& items) {
      return write<std::vector<stored_item>>(self, [id, owner, items = std::move(items)](responses_db& db) {
        return db.add_conversation_items(id, owner, items);
      });
    },
    [=](conversation_items_atom, const std::string& id,
        const response_owner& owner) -> caf::result<conversation_row, std::vector<stored_item>> {
      auto& db = fresh(self);
      // The revision is read before the members: a writer in between (another instance) leaves the
      // revision older than the members, so a commit based on them fails its check (RS-54).
      auto row = db.get_conversation(id, owner);
      if (!row)
        return conversation_not_found(id);
      return caf::result<conversation_row, std::vector<stored_item>>(std::move(*row), db.members(id, owner));
    },
    [=](list_conversation_items_atom, const std::string& id, const response_owner& owner,
        const page_request& p) -> caf::result<item_page> {
      auto& db = fresh(self);
      if (!db.get_conversation(id, owner))
        return conversation_not_found(id);
      return db.page(response_sql::member_listing(), id, owner, std::numeric_limits<int64_t>::max(), p);
    },
    [=](remove_conversation_item_atom, std::string& id, const response_owner& owner, std::string& item_id) {
      return write<conversation_row>(self, [id, owner, item_id](responses_db& db) {
        return db.remove_conversation_item(id, owner, item_id);
      });
    },
  };
}

} // namespace

std::variant<response_store_actor, std::string> spawn_sqlite_response_store(caf::actor_system& sys,
                                                                           const std::string& path) {
  auto db = sqlite::open(path);
  if (auto err = std::get_if<std::string>(&db))
    return std::move(*err);
  response_store_actor port =
    sys.spawn<caf::detached>(sqlite_response_store_behavior, std::get<sqlite::db_ptr>(std::move(db)));
  return port;
}

} // namespace troupe::io
