#include "io/sqlite_response_store.hpp"

#include "actors/errors.hpp"
#include "io/sqlite_support.hpp"

#include <caf/all.hpp>
#include <sqlite3.h>

#include "protocol/json.hpp"

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

template <class T>
using outcome = std::variant<T, caf::error>;

caf::error response_not_found(const std::string& id) {
  return make_error(errc::not_found, "Response with id '" + id + "' not found.");
}

caf::error conversation_not_found(const std::string& id) {
  return make_error(errc::not_found, "Conversation with id '" + id + "' not found.");
}

caf::error item_not_found(const std::string& id) {
  return make_error(errc::not_found, "No item found with id '" + id + "'");
}

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
    .count();
}

// An ordered list of item ids that pages are read from: a response's history or a conversation's
// members. Its statements are built once from the table's names.
struct listing {
  listing(const char* table, const char* owner) {
    std::string from = std::string(" FROM ") + table + " WHERE " + owner + " = ?1 AND item_id = ?2 AND position < ?3";
    first_position = "SELECT MIN(position)" + from;
    last_position = "SELECT MAX(position)" + from;
    // ?9: the listing's owner, whose items alone it shows (an id another owner stored first is not).
    std::string rows = std::string("SELECT i.id, i.json FROM ") + table
                       + " l JOIN items i ON i.id = l.item_id AND i.owner = ?9 WHERE l." + owner + " = ?1 AND ";
    ascending = rows + "l.position > ?2 AND l.position < ?3 ORDER BY l.position ASC LIMIT ?4";
    descending = rows + "l.position < ?2 ORDER BY l.position DESC LIMIT ?3";
  }
  std::string first_position, last_position, ascending, descending;
};

const listing& history_listing() {
  static const listing l("response_history", "response_id");
  return l;
}

const listing& member_listing() {
  static const listing l("conversation_items", "conversation_id");
  return l;
}

constexpr const char* response_columns =
  "id, created_at, status, background, model, snapshot, request, input_count, previous_response_id, conversation_id, "
  "owner";

// The connection and the SQL of every operation. Each method runs on the store actor's thread; the
// write methods run inside the batch's transaction, each within its own savepoint.
class responses_db : public sqlite::connection {
public:
  using connection::connection;

  caf::error failed(const char* what) const {
    return make_error(errc::internal, std::string("response store: ") + what + ": " + error());
  }

  std::vector<std::string> history(const std::string& response_id) {
    return ids("SELECT item_id FROM response_history WHERE response_id = ?1 ORDER BY position", response_id);
  }

  // Another owner's response is none (issue 15 finding 9).
  std::optional<response_row> get_response(const std::string& id, const response_owner& owner) {
    static const std::string text =
      std::string("SELECT ") + response_columns + " FROM responses WHERE id = ?1 AND owner = ?2";
    auto rows = responses(text.c_str(), {id, owner.key});
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
        r.status = q.text(2);
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
    static const std::string text = std::string("INSERT OR REPLACE INTO responses (") + response_columns
                                    + ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";
    auto q = sql(text.c_str());
    q.bind(1, r.id).bind(2, r.created_at).bind(3, r.status).bind(4, int64_t{r.background}).bind(5, r.model);
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
      auto q = sql("DELETE FROM response_history WHERE response_id = ?1");
      q.bind(1, response_id);
      if (!q.done())
        return false;
    }
    for (auto i = keep; i < item_ids.size(); ++i) {
      auto q = sql("INSERT INTO response_history (response_id, position, item_id) VALUES (?1, ?2, ?3)");
      q.bind(1, response_id).bind(2, static_cast<int64_t>(i)).bind(3, item_ids[i]);
      if (!q.done())
        return false;
    }
    return true;
  }

  // Items are immutable: a stored id keeps its stored body (RS-12 by reference) and its owner.
  bool put_item(const stored_item& item, const response_owner& owner) {
    auto q = sql("INSERT OR IGNORE INTO items (id, json, created_at, owner) VALUES (?1, ?2, ?3, ?4)");
    q.bind(1, item.id).bind(2, item.json).bind(3, now_seconds()).bind(4, owner.key);
    return q.done();
  }

  bool put_event(const std::string& response_id, const response_event& e) {
    auto q = sql("INSERT OR IGNORE INTO response_events (response_id, sequence, json) VALUES (?1, ?2, ?3)");
    q.bind(1, response_id).bind(2, e.sequence).bind(3, e.json);
    return q.done();
  }

  // `owner`'s items by id in the order asked, in one statement.
  std::vector<stored_item> items(const std::vector<std::string>& item_ids, const response_owner& owner) {
    std::string array = "[";
    for (auto& id : item_ids)
      array += (array.size() > 1 ? "," : "") + protocol::json::quote(id);
    array += "]";
    std::vector<stored_item> out;
    auto q = sql(
      "SELECT i.id, i.json FROM json_each(?1) j JOIN items i ON i.id = j.value AND i.owner = ?2 ORDER BY j.key");
    q.bind(1, array).bind(2, owner.key);
    while (q.row())
      out.push_back({q.text(0), q.text(1)});
    return out;
  }

  // Deletes the items among `candidates` that no history and no conversation references (RS-7).
  bool collect_garbage(const std::vector<std::string>& candidates) {
    for (auto& id : candidates) {
      auto q = sql(R"sql(
        DELETE FROM items WHERE id = ?1
          AND NOT EXISTS (SELECT 1 FROM response_history WHERE item_id = ?1)
          AND NOT EXISTS (SELECT 1 FROM conversation_items WHERE item_id = ?1))sql");
      q.bind(1, id);
      if (!q.done())
        return false;
    }
    return true;
  }

  // Another owner's conversation is none (issue 15 finding 9).
  std::optional<conversation_row> get_conversation(const std::string& id, const response_owner& owner) {
    auto q = sql("SELECT created_at, metadata, revision FROM conversations WHERE id = ?1 AND owner = ?2");
    q.bind(1, id).bind(2, owner.key);
    if (!q.row())
      return std::nullopt;
    return conversation_row{id, q.integer(0), q.text(1), q.integer(2), owner.key};
  }

  // Appends a member after the last position ever used; SQLITE_CONSTRAINT when it is one already.
  int append_member(const std::string& conversation_id, const std::string& item_id) {
    auto q = sql(R"sql(
      INSERT INTO conversation_items (conversation_id, position, item_id)
      SELECT ?1, COALESCE(MAX(position), -1) + 1, ?2 FROM conversation_items WHERE conversation_id = ?1)sql");
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
    auto q = sql("UPDATE conversations SET revision = revision + 1 WHERE id = ?1");
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
  caf::expected<item_page> page(const listing& list, const std::string& list_id, const response_owner& owner,
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

sqlite_response_store_actor::behavior_type sqlite_response_store_behavior(response_store_pointer self, sqlite::db_ptr raw) {
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
      int64_t input_count = 0;
      {
        auto q = db.sql("SELECT input_count FROM responses WHERE id = ?1 AND owner = ?2");
        q.bind(1, id).bind(2, owner.key);
        if (!q.row())
          return response_not_found(id);
        input_count = q.integer(0);
      }
      return db.page(history_listing(), id, owner, input_count, p);
    },
    [=](delete_response_atom, std::string& id, const response_owner& owner) {
      return write<bool>(self, [id, owner](responses_db& db) -> outcome<bool> {
        if (!db.get_response(id, owner))
          return response_not_found(id);
        return db.drop(id, "SELECT DISTINCT item_id FROM response_history WHERE response_id = ?1",
                       {"DELETE FROM responses WHERE id = ?1", "DELETE FROM response_history WHERE response_id = ?1",
                        "DELETE FROM response_events WHERE response_id = ?1"});
      });
    },
    [=](response_events_atom, const std::string& id, int64_t after) -> caf::result<std::vector<response_event>> {
      auto q = fresh(self).sql(
        "SELECT sequence, json FROM response_events WHERE response_id = ?1 AND sequence > ?2 ORDER BY sequence");
      q.bind(1, id).bind(2, after);
      std::vector<response_event> out;
      while (q.row())
        out.push_back({q.integer(0), q.text(1)});
      return out;
    },
    [=](unfinished_atom) -> caf::result<std::vector<response_row>> {
      static const std::string text = std::string("SELECT ") + response_columns
                                      + " FROM responses WHERE status IN ('queued', 'in_progress')"
                                        " ORDER BY created_at, rowid";
      return fresh(self).responses(text.c_str());
    },
    [=](create_conversation_atom, conversation_row& row, std::vector<stored_item>& items) {
      return write<conversation_row>(
        self, [row = std::move(row), items = std::move(items)](responses_db& db) mutable -> outcome<conversation_row> {
          row.revision = 0;
          {
            auto q = db.sql(
              "INSERT INTO conversations (id, created_at, metadata, revision, owner) VALUES (?1, ?2, ?3, 0, ?4)");
            q.bind(1, row.id).bind(2, row.created_at).bind(3, row.metadata).bind(4, row.owner);
            auto rc = q.step();
            if (rc == SQLITE_CONSTRAINT)
              return make_error(errc::conflict, "Conversation with id '" + row.id + "' already exists.");
            if (rc != SQLITE_DONE)
              return db.failed("creating a conversation");
          }
          if (auto added = db.add_members(row.id, response_owner{row.owner}, items);
              std::holds_alternative<caf::error>(added))
            return std::get<caf::error>(std::move(added));
          return row;
        });
    },
    [=](get_conversation_atom, const std::string& id, const response_owner& owner) -> caf::result<conversation_row> {
      if (auto row = fresh(self).get_conversation(id, owner))
        return std::move(*row);
      return conversation_not_found(id);
    },
    [=](update_conversation_atom, std::string& id, const response_owner& owner, std::string& metadata) {
      return write<conversation_row>(self, [id, owner, metadata](responses_db& db) -> outcome<conversation_row> {
        auto q = db.sql("UPDATE conversations SET metadata = ?2, revision = revision + 1 WHERE id = ?1 AND owner = ?3");
        q.bind(1, id).bind(2, metadata).bind(3, owner.key);
        if (!q.done())
          return db.failed("updating a conversation");
        if (sqlite3_changes(db.raw()) != 1)
          return conversation_not_found(id);
        return *db.get_conversation(id, owner);
      });
    },
    [=](delete_conversation_atom, std::string& id, const response_owner& owner) {
      return write<bool>(self, [id, owner](responses_db& db) -> outcome<bool> {
        if (!db.get_conversation(id, owner))
          return conversation_not_found(id);
        // Stored responses keep their histories (RS-11): only what the members alone held goes.
        return db.drop(id, "SELECT item_id FROM conversation_items WHERE conversation_id = ?1",
                       {"DELETE FROM conversations WHERE id = ?1",
                        "DELETE FROM conversation_items WHERE conversation_id = ?1"});
      });
    },
    [=](add_conversation_items_atom, std::string& id, const response_owner& owner, std::vector<stored_item>& items) {
      return write<std::vector<stored_item>>(
        self, [id, owner, items = std::move(items)](responses_db& db) -> outcome<std::vector<stored_item>> {
          if (!db.get_conversation(id, owner))
            return conversation_not_found(id);
          if (auto added = db.add_members(id, owner, items); std::holds_alternative<caf::error>(added))
            return std::get<caf::error>(std::move(added));
          if (!db.bump(id))
            return db.failed("bumping a conversation's revision");
          std::vector<std::string> ids;
          for (auto& item : items)
            ids.push_back(item.id);
          return db.items(ids, owner); // as stored: a known id keeps its stored body (RS-12)
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
      std::vector<stored_item> items;
      auto q = db.sql(R"sql(
        SELECT i.id, i.json FROM conversation_items c JOIN items i ON i.id = c.item_id AND i.owner = ?2
        WHERE c.conversation_id = ?1 ORDER BY c.position)sql");
      q.bind(1, id).bind(2, owner.key);
      while (q.row())
        items.push_back({q.text(0), q.text(1)});
      return caf::result<conversation_row, std::vector<stored_item>>(std::move(*row), std::move(items));
    },
    [=](list_conversation_items_atom, const std::string& id, const response_owner& owner,
        const page_request& p) -> caf::result<item_page> {
      auto& db = fresh(self);
      if (!db.get_conversation(id, owner))
        return conversation_not_found(id);
      return db.page(member_listing(), id, owner, std::numeric_limits<int64_t>::max(), p);
    },
    [=](remove_conversation_item_atom, std::string& id, const response_owner& owner, std::string& item_id) {
      return write<conversation_row>(self, [id, owner, item_id](responses_db& db) -> outcome<conversation_row> {
        if (!db.get_conversation(id, owner))
          return conversation_not_found(id);
        auto q = db.sql("DELETE FROM conversation_items WHERE conversation_id = ?1 AND item_id = ?2");
        q.bind(1, id).bind(2, item_id);
        if (!q.done())
          return db.failed("removing a conversation item");
        if (sqlite3_changes(db.raw()) != 1)
          return item_not_found(item_id);
        if (!db.collect_garbage({item_id}) || !db.bump(id))
          return db.failed("removing a conversation item");
        return *db.get_conversation(id, owner);
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
  response_store_actor port = sys.spawn<caf::detached>(sqlite_response_store_behavior, std::get<sqlite::db_ptr>(std::move(db)));
  return port;
}

} // namespace troupe::io
