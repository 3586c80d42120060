// The Responses store port's contract (responses.md §10: RS-53..RS-56 with RS-7, RS-8, RS-11, RS-12),
// driven through response_store_actor messages only. The `[contract]` cases run unchanged on SQLite
// and, with TROUPE_TEST_STORE=postgres, on PostgreSQL (tests/io/store_client.hpp).
#include "actors/errors.hpp"
#include "io/sqlite_response_store.hpp"
#include "io/store_client.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>
#include <pqxx/pqxx>
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

using namespace troupe;
using test::fresh_db;
using test::on_postgres;
using test::spawn_pg_port;
namespace rs = troupe::protocol::responses;

namespace {

// The owner of an open service, which every test row has unless it says otherwise.
const response_owner nobody{};

// One process's Responses store: its own actor system, the store and a blocking caller. Destroying it
// stops the store and waits for it, as a process exit would.
struct responses_client {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  response_store_actor store;
  caf::scoped_actor self{sys};

  // `path`: a database file, or on PostgreSQL a database's URL (test::fresh_db).
  explicit responses_client(const std::string& path) {
    auto spawned = on_postgres() ? spawn_pg_port<response_store_actor>(sys, path)
                                 : io::spawn_sqlite_response_store(sys, path);
    if (auto err = std::get_if<std::string>(&spawned))
      FAIL("cannot open the response store: " << *err);
    store = std::get<response_store_actor>(spawned);
  }
  ~responses_client() { self->send_exit(store, caf::exit_reason::user_shutdown); }

  // The answer to one message: a T, or the error the store answered.
  template <class T, class... Ts>
  std::variant<T, caf::error> call(Ts&&... xs) {
    std::variant<T, caf::error> result = make_error(errc::internal, "no answer");
    self->request(store, std::chrono::seconds(10), std::forward<Ts>(xs)...)
      .receive([&](T& v) { result = std::move(v); }, [&](caf::error& e) { result = std::move(e); });
    return result;
  }

  template <class T, class... Ts>
  T ok(Ts&&... xs) {
    auto result = call<T>(std::forward<Ts>(xs)...);
    if (auto e = std::get_if<caf::error>(&result))
      FAIL("the response store refused: " << message_of(*e));
    return std::get<T>(std::move(result));
  }

  // The error a message is answered with; a test fails when it succeeds instead.
  template <class T, class... Ts>
  caf::error refused(Ts&&... xs) {
    auto result = call<T>(std::forward<Ts>(xs)...);
    if (!std::holds_alternative<caf::error>(result))
      FAIL("the response store accepted what it should refuse");
    return std::get<caf::error>(std::move(result));
  }

  int64_t save(response_commit c) { return ok<int64_t>(save_response_atom::value, std::move(c)); }
  response_row get(const std::string& id) { return ok<response_row>(get_response_atom::value, id, nobody); }
  std::vector<stored_item> items(std::vector<std::string> ids) {
    return ok<std::vector<stored_item>>(get_items_atom::value, std::move(ids), nobody);
  }
  conversation_row conversation(const std::string& id) {
    return ok<conversation_row>(get_conversation_atom::value, id, nobody);
  }
  conversation_row create_conversation(const std::string& id, std::vector<stored_item> members) {
    return ok<conversation_row>(create_conversation_atom::value, conversation_row{id, 1700000000, "{}", 7, ""},
                                std::move(members));
  }
  std::vector<stored_item> add(const std::string& conversation, std::vector<stored_item> members) {
    return ok<std::vector<stored_item>>(add_conversation_items_atom::value, conversation, nobody, std::move(members));
  }

  // The ids of every member, in order, and the revision read with them.
  std::pair<std::vector<std::string>, int64_t> members(const std::string& conversation) {
    std::pair<std::vector<std::string>, int64_t> out;
    self->request(store, std::chrono::seconds(10), conversation_items_atom::value, conversation, nobody)
      .receive(
        [&](conversation_row& row, std::vector<stored_item>& found) {
          for (auto& item : found)
            out.first.push_back(item.id);
          out.second = row.revision;
        },
        [](caf::error& e) { FAIL(message_of(e)); });
    return out;
  }

  // Every id of a listing, walked page by page with `after` as the cursor; each page is checked.
  template <class Atom>
  std::vector<std::string> walk(Atom atom, const std::string& id, bool ascending, int64_t limit) {
    std::vector<std::string> seen;
    page_request p{limit, ascending, ""};
    for (int pages = 0; pages < 100; ++pages) {
      auto page = ok<item_page>(atom, id, nobody, p);
      CHECK(static_cast<int64_t>(page.items.size()) <= limit);
      for (auto& item : page.items)
        seen.push_back(item.id);
      if (!page.has_more)
        return seen;
      REQUIRE(!page.items.empty());
      p.after = page.items.back().id;
    }
    FAIL("a listing that never ends");
    return seen;
  }
};

stored_item item(const std::string& id, const std::string& text = "hi") {
  return {id, R"({"id":")" + id + R"(","type":"message","role":"user","content":[{"type":"input_text","text":")"
                + text + R"("}]})"};
}

std::vector<std::string> ids_of(const std::vector<stored_item>& items) {
  std::vector<std::string> out;
  for (auto& i : items)
    out.push_back(i.id);
  return out;
}

// A commit of response `id` whose history is `history` (all of it input) and which stores `items`.
response_commit commit(const std::string& id, std::vector<std::string> history, std::vector<stored_item> items,
                       std::string status = "completed") {
  response_commit c;
  c.response.id = id;
  c.response.created_at = 1700000000;
  c.response.status = *rs::parse_response_status(status);
  c.response.model = "gpt-test";
  c.response.snapshot = R"({"id":")" + id + R"(","object":"response"})";
  c.response.request = R"({"model":"gpt-test"})";
  c.response.input_count = static_cast<int64_t>(history.size());
  c.response.history_item_ids = std::move(history);
  c.items = std::move(items);
  return c;
}

// The positions of a conversation's members as stored, in order, read straight from the database:
// the port does not show them.
std::vector<int64_t> member_positions(const std::string& db, const std::string& conversation) {
  std::vector<int64_t> out;
  if (on_postgres()) {
    pqxx::connection c(db);
    pqxx::nontransaction tx(c);
    for (auto row : tx.exec_params("SELECT position FROM conversation_items WHERE conversation_id = $1 ORDER BY position",
                                   conversation))
      out.push_back(row[0].as<int64_t>());
    return out;
  }
  sqlite3* raw = nullptr;
  REQUIRE(sqlite3_open_v2(db.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(raw, "SELECT position FROM conversation_items WHERE conversation_id = ?1 ORDER BY position", -1,
                     &q, nullptr);
  sqlite3_bind_text(q, 1, conversation.c_str(), -1, SQLITE_TRANSIENT);
  while (sqlite3_step(q) == SQLITE_ROW)
    out.push_back(sqlite3_column_int64(q, 0));
  sqlite3_finalize(q);
  sqlite3_close(raw);
  return out;
}

std::vector<int64_t> zero_to(std::size_t n) {
  std::vector<int64_t> out;
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(static_cast<int64_t>(i));
  return out;
}

} // namespace

TEST_CASE("a saved response reads back with its fields and its history in order", "[response_store][contract]") {
  responses_client client(fresh_db("responses-roundtrip"));
  // RS-53: the row and history_item_ids as written.
  auto c = commit("resp_1", {"msg_c", "msg_a", "msg_b"}, {item("msg_a"), item("msg_b"), item("msg_c")}, "in_progress");
  c.response.background = true;
  c.response.input_count = 2;
  c.response.previous_response_id = "resp_0";
  c.response.conversation_id = "conv_x";
  CHECK(client.save(c) == -1);
  auto r = client.get("resp_1");
  CHECK(r.id == "resp_1");
  CHECK(r.created_at == 1700000000);
  CHECK(r.status == rs::response_status::in_progress);
  CHECK(r.background);
  CHECK(r.model == "gpt-test");
  CHECK(r.snapshot == c.response.snapshot);
  CHECK(r.request == c.response.request);
  CHECK(r.history_item_ids == std::vector<std::string>{"msg_c", "msg_a", "msg_b"});
  CHECK(r.input_count == 2);
  CHECK(r.previous_response_id == "resp_0");
  CHECK(r.conversation_id == "conv_x");

  // A later save of the same response replaces the row; a history that grew keeps its order.
  c.response.history_item_ids.push_back("msg_d");
  c.items = {item("msg_d")};
  client.save(c);
  CHECK(client.get("resp_1").history_item_ids == std::vector<std::string>{"msg_c", "msg_a", "msg_b", "msg_d"});
  c.response.status = rs::response_status::completed;
  c.response.history_item_ids = {"msg_b", "msg_a"};
  client.save(c);
  r = client.get("resp_1");
  CHECK(r.status == rs::response_status::completed);
  CHECK(r.history_item_ids == std::vector<std::string>{"msg_b", "msg_a"});

  // Items come back in the order asked; ids not stored are left out.
  CHECK(ids_of(client.items({"msg_b", "msg_nope", "msg_c"})) == std::vector<std::string>{"msg_b", "msg_c"});
  CHECK(client.items({"msg_a"}).at(0).json == item("msg_a").json);

  auto missing = client.refused<response_row>(get_response_atom::value, std::string("resp_nope"), nobody);
  CHECK(code_of(missing) == errc::not_found);
  CHECK(message_of(missing) == "Response with id 'resp_nope' not found.");
}

TEST_CASE("another owner's response or conversation is answered exactly like a missing one, and stays as it was",
          "[response_store][contract]") { // issue 15 finding 9
  responses_client client(fresh_db("responses-owners"));
  const response_owner alice{"sha256:alice"};
  const response_owner bob{"sha256:bob"};
  auto c = commit("resp_a", {"msg_a"}, {item("msg_a")});
  c.response.owner = alice.key;
  client.save(c);
  client.ok<conversation_row>(create_conversation_atom::value,
                              conversation_row{"conv_a", 1700000000, "{}", 0, alice.key},
                              std::vector<stored_item>{item("msg_b")});

  // The owner sees both.
  CHECK(client.ok<response_row>(get_response_atom::value, std::string("resp_a"), alice).owner == alice.key);
  CHECK(client.ok<conversation_row>(get_conversation_atom::value, std::string("conv_a"), alice).owner == alice.key);

  // Every message naming another owner's object gets the answer of a missing one, word for word.
  auto resp = [](const char* id) { return std::string(id); };
  CHECK(message_of(client.refused<response_row>(get_response_atom::value, resp("resp_a"), bob))
        == "Response with id 'resp_a' not found.");
  CHECK(message_of(client.refused<response_row>(get_response_atom::value, resp("resp_a"), nobody))
        == "Response with id 'resp_a' not found.");
  CHECK(message_of(client.refused<item_page>(input_items_atom::value, resp("resp_a"), bob, page_request{}))
        == "Response with id 'resp_a' not found.");
  CHECK(message_of(client.refused<bool>(delete_response_atom::value, resp("resp_a"), bob))
        == "Response with id 'resp_a' not found.");
  const std::string gone = "Conversation with id 'conv_a' not found.";
  CHECK(message_of(client.refused<conversation_row>(get_conversation_atom::value, resp("conv_a"), bob)) == gone);
  CHECK(message_of(client.refused<conversation_row>(update_conversation_atom::value, resp("conv_a"), bob,
                                                    std::string(R"({"x":"y"})")))
        == gone);
  CHECK(message_of(client.refused<std::vector<stored_item>>(add_conversation_items_atom::value, resp("conv_a"), bob,
                                                            std::vector<stored_item>{item("msg_c")}))
        == gone);
  CHECK(message_of(client.refused<item_page>(list_conversation_items_atom::value, resp("conv_a"), bob, page_request{}))
        == gone);
  CHECK(message_of(client.refused<conversation_row>(remove_conversation_item_atom::value, resp("conv_a"), bob,
                                                    std::string("msg_b")))
        == gone);
  CHECK(message_of(client.refused<bool>(delete_conversation_atom::value, resp("conv_a"), bob)) == gone);
  {
    caf::error err;
    client.self->request(client.store, std::chrono::seconds(10), conversation_items_atom::value, resp("conv_a"), bob)
      .receive([](conversation_row&, std::vector<stored_item>&) { FAIL("another owner read the members"); },
               [&](caf::error& e) { err = e; });
    CHECK(message_of(err) == gone);
  }
  // A commit of another owner cannot append to the conversation.
  auto onto = commit("resp_b", {"msg_d"}, {item("msg_d")});
  onto.response.owner = bob.key;
  onto.conversation_id = "conv_a";
  onto.conversation_append = {"msg_d"};
  onto.expected_revision = 0;
  CHECK(message_of(client.refused<int64_t>(save_response_atom::value, onto)) == gone);

  // Items are the owner's too: another owner neither reads one by id nor, by storing the same id,
  // reaches its body through its own listings.
  auto none =
    client.ok<std::vector<stored_item>>(get_items_atom::value, std::vector<std::string>{"msg_a", "msg_b"}, bob);
  CHECK(none.empty());
  auto copy = commit("resp_copy", {"msg_a"}, {item("msg_a", "bob's own")});
  copy.response.owner = bob.key;
  client.save(copy);
  CHECK(client.ok<item_page>(input_items_atom::value, resp("resp_copy"), bob, page_request{}).items.empty());
  client.ok<conversation_row>(create_conversation_atom::value,
                              conversation_row{"conv_b", 1700000000, "{}", 0, bob.key},
                              std::vector<stored_item>{item("msg_b", "planted")});
  CHECK(client.ok<item_page>(list_conversation_items_atom::value, resp("conv_b"), bob, page_request{}).items.empty());
  CHECK(client.ok<std::vector<stored_item>>(get_items_atom::value, std::vector<std::string>{"msg_a"}, alice).at(0).json
        == item("msg_a").json);

  // Nothing of the owner's changed.
  auto conv = client.ok<conversation_row>(get_conversation_atom::value, resp("conv_a"), alice);
  CHECK(conv.metadata == "{}");
  CHECK(conv.revision == 0);
  CHECK(client.ok<response_row>(get_response_atom::value, resp("resp_a"), alice).history_item_ids
        == std::vector<std::string>{"msg_a"});
  CHECK(client.ok<item_page>(list_conversation_items_atom::value, resp("conv_a"), alice, page_request{}).items.size()
        == 1);
}

TEST_CASE("an item shared by reference is stored once and keeps the body it was first stored with",
          "[response_store][contract]") {
  responses_client client(fresh_db("responses-by-reference"));
  // RS-12, RS-53: items are immutable; a second write of an id does not change it.
  client.save(commit("resp_1", {"msg_a"}, {item("msg_a", "first")}));
  client.save(commit("resp_2", {"msg_a", "msg_b"}, {item("msg_a", "second"), item("msg_b")}));
  client.create_conversation("conv_1", {item("msg_a", "third")});
  auto found = client.items({"msg_a"});
  REQUIRE(found.size() == 1);
  CHECK(found[0].json == item("msg_a", "first").json);
  CHECK(client.members("conv_1").first == std::vector<std::string>{"msg_a"});
}

TEST_CASE("deleting a response removes it and collects only the items nothing else references",
          "[response_store][contract]") {
  responses_client client(fresh_db("responses-delete"));
  auto first = commit("resp_1", {"msg_a", "msg_b", "msg_c", "msg_d"},
                      {item("msg_a"), item("msg_b"), item("msg_c"), item("msg_d")});
  first.events = {{0, R"({"type":"response.created"})"}};
  client.save(first);
  client.save(commit("resp_2", {"msg_b"}, {}));
  client.create_conversation("conv_1", {item("msg_c")});

  // RS-7: msg_b is in another response's history and msg_c in a conversation; both survive.
  CHECK(client.ok<bool>(delete_response_atom::value, std::string("resp_1"), nobody));
  CHECK(ids_of(client.items({"msg_a", "msg_b", "msg_c", "msg_d"})) == std::vector<std::string>{"msg_b", "msg_c"});
  CHECK(code_of(client.refused<response_row>(get_response_atom::value, std::string("resp_1"), nobody))
        == errc::not_found);
  CHECK(client.ok<std::vector<response_event>>(response_events_atom::value, std::string("resp_1"), int64_t{-1})
          .empty());
  CHECK(client.get("resp_2").history_item_ids == std::vector<std::string>{"msg_b"});

  auto again = client.refused<bool>(delete_response_atom::value, std::string("resp_1"), nobody);
  CHECK(code_of(again) == errc::not_found);
  CHECK(message_of(again) == "Response with id 'resp_1' not found.");

  // Deleting the conversation leaves what a response still holds (RS-11) and collects the rest.
  client.create_conversation("conv_2", {item("msg_b"), item("msg_e")});
  CHECK(client.ok<bool>(delete_conversation_atom::value, std::string("conv_2"), nobody));
  CHECK(ids_of(client.items({"msg_b", "msg_e"})) == std::vector<std::string>{"msg_b"});
  CHECK(code_of(client.refused<conversation_row>(get_conversation_atom::value, std::string("conv_2"), nobody))
        == errc::not_found);
}

TEST_CASE("input_items pages visit each input item once in either order and end without more",
          "[response_store][contract]") {
  responses_client client(fresh_db("responses-input-items"));
  std::vector<std::string> history{"msg_1", "msg_2", "msg_3", "msg_4", "msg_5", "msg_6", "msg_7"};
  std::vector<stored_item> items;
  for (auto& id : history)
    items.push_back(item(id));
  auto c = commit("resp_1", history, items);
  c.response.input_count = 5; // the last two are its own output (RS-8)
  client.save(c);

  std::vector<std::string> input(history.begin(), history.begin() + 5);
  for (int64_t limit : {1, 2, 5, 20}) {
    CHECK(client.walk(input_items_atom::value, "resp_1", true, limit) == input);
    CHECK(client.walk(input_items_atom::value, "resp_1", false, limit)
          == std::vector<std::string>(input.rbegin(), input.rend()));
  }

  auto page =
    client.ok<item_page>(input_items_atom::value, std::string("resp_1"), nobody, page_request{2, false, "msg_2"});
  CHECK(ids_of(page.items) == std::vector<std::string>{"msg_1"});
  CHECK_FALSE(page.has_more);

  // An `after` that is not in the listing, even one of the response's own output items, is unknown.
  for (std::string after : {"msg_nope", "msg_6"}) {
    auto err =
      client.refused<item_page>(input_items_atom::value, std::string("resp_1"), nobody, page_request{2, true, after});
    CHECK(code_of(err) == errc::not_found);
    CHECK(message_of(err) == "No item found with id '" + after + "'");
  }
  auto missing = client.refused<item_page>(input_items_atom::value, std::string("resp_nope"), nobody, page_request{});
  CHECK(message_of(missing) == "Response with id 'resp_nope' not found.");
}

TEST_CASE("a commit whose expected revision is stale writes nothing and answers conflict", "[response_store][contract]") {
  responses_client client(fresh_db("responses-cas"));
  auto created = client.create_conversation("conv_1", {item("msg_a")});
  CHECK(created.revision == 0);
  client.add("conv_1", {item("msg_b")}); // revision 1: another writer moved it

  // RS-54: the revision read at rehydration (0) is no longer the conversation's.
  auto stale = commit("resp_1", {"msg_a", "msg_b", "msg_c", "msg_d"}, {item("msg_c"), item("msg_d")});
  stale.events = {{0, R"({"type":"response.created"})"}};
  stale.conversation_id = "conv_1";
  stale.conversation_append = {"msg_c", "msg_d"};
  stale.expected_revision = 0;
  auto err = client.refused<int64_t>(save_response_atom::value, stale);
  CHECK(code_of(err) == errc::conflict);
  CHECK(message_of(err) == "Another response is in progress for conversation 'conv_1'.");
  CHECK(code_of(client.refused<response_row>(get_response_atom::value, std::string("resp_1"), nobody))
        == errc::not_found);
  CHECK(client.items({"msg_c", "msg_d"}).empty());
  CHECK(client.ok<std::vector<response_event>>(response_events_atom::value, std::string("resp_1"), int64_t{-1})
          .empty());
  CHECK(client.members("conv_1") == std::make_pair(std::vector<std::string>{"msg_a", "msg_b"}, int64_t{1}));

  // The same commit at the current revision appends and bumps it.
  stale.expected_revision = 1;
  CHECK(client.save(stale) == 2);
  CHECK(client.members("conv_1")
        == std::make_pair(std::vector<std::string>{"msg_a", "msg_b", "msg_c", "msg_d"}, int64_t{2}));
  CHECK(client.get("resp_1").status == rs::response_status::completed);

  stale.conversation_id = "conv_nope";
  auto missing = client.refused<int64_t>(save_response_atom::value, stale);
  CHECK(code_of(missing) == errc::not_found);
  CHECK(message_of(missing) == "Conversation with id 'conv_nope' not found.");
}

TEST_CASE("adding an item that is already a member answers conflict and adds nothing", "[response_store][contract]") {
  responses_client client(fresh_db("responses-add-conflict"));
  client.create_conversation("conv_1", {item("msg_a")});
  // RS-12: one id already a member refuses the whole add.
  auto err = client.refused<std::vector<stored_item>>(add_conversation_items_atom::value, std::string("conv_1"), nobody,
                                                      std::vector<stored_item>{item("msg_b"), item("msg_a")});
  CHECK(code_of(err) == errc::conflict);
  CHECK(message_of(err) == "Item already in conversation");
  CHECK(client.members("conv_1") == std::make_pair(std::vector<std::string>{"msg_a"}, int64_t{0}));
  CHECK(client.items({"msg_b"}).empty());

  auto missing = client.refused<std::vector<stored_item>>(add_conversation_items_atom::value, std::string("conv_nope"),
                                                          nobody, std::vector<stored_item>{item("msg_b")});
  CHECK(message_of(missing) == "Conversation with id 'conv_nope' not found.");
}

TEST_CASE("an item added to a conversation by reference comes back with its stored body", "[response_store][contract]") {
  responses_client client(fresh_db("responses-add-by-reference"));
  client.save(commit("resp_1", {"msg_a"}, {item("msg_a", "stored")}));
  client.create_conversation("conv_1", {});
  // RS-12: a supplied id already in storage is added by reference; the submitted body is ignored.
  auto added = client.add("conv_1", {item("msg_a", "submitted"), item("msg_b", "new")});
  REQUIRE(added.size() == 2);
  CHECK(added[0].json == item("msg_a", "stored").json);
  CHECK(added[1].json == item("msg_b", "new").json);
  CHECK(client.conversation("conv_1").revision == 1);
}

TEST_CASE("removing a conversation item detaches it and bumps the revision", "[response_store][contract]") {
  responses_client client(fresh_db("responses-remove-item"));
  client.create_conversation("conv_1", {item("msg_a"), item("msg_b"), item("msg_c")});
  auto after = client.ok<conversation_row>(remove_conversation_item_atom::value, std::string("conv_1"), nobody,
                                           std::string("msg_b"));
  CHECK(after.id == "conv_1");
  CHECK(after.revision == 1);
  CHECK(client.members("conv_1") == std::make_pair(std::vector<std::string>{"msg_a", "msg_c"}, int64_t{1}));
  CHECK(client.items({"msg_b"}).empty()); // referenced by nothing any more

  auto err = client.refused<conversation_row>(remove_conversation_item_atom::value, std::string("conv_1"), nobody,
                                              std::string("msg_b"));
  CHECK(code_of(err) == errc::not_found);
  CHECK(message_of(err) == "No item found with id 'msg_b'");

  // A member added after the removal goes last; listing pages over the members as input_items does.
  client.add("conv_1", {item("msg_d")});
  CHECK(client.walk(list_conversation_items_atom::value, "conv_1", true, 2)
        == std::vector<std::string>{"msg_a", "msg_c", "msg_d"});
  CHECK(client.walk(list_conversation_items_atom::value, "conv_1", false, 1)
        == std::vector<std::string>{"msg_d", "msg_c", "msg_a"});
  auto unknown = client.refused<item_page>(list_conversation_items_atom::value, std::string("conv_1"), nobody,
                                           page_request{20, false, "msg_b"});
  CHECK(message_of(unknown) == "No item found with id 'msg_b'");

  // Updating the metadata replaces it and is one more mutation.
  auto updated = client.ok<conversation_row>(update_conversation_atom::value, std::string("conv_1"), nobody,
                                             std::string(R"({"topic":"x"})"));
  CHECK(updated.metadata == R"({"topic":"x"})");
  CHECK(updated.revision == 3);
  CHECK(client.conversation("conv_1").created_at == 1700000000);
}

TEST_CASE("unfinished lists only the responses still queued or in progress", "[response_store][contract]") {
  responses_client client(fresh_db("responses-unfinished"));
  for (auto status : {"queued", "in_progress", "completed", "failed", "cancelled", "incomplete"})
    client.save(commit(std::string("resp_") + status, {"msg_" + std::string(status)}, {item("msg_" + std::string(status))},
                       status));
  auto rows = client.ok<std::vector<response_row>>(unfinished_atom::value);
  std::vector<std::string> ids;
  for (auto& r : rows) {
    ids.push_back(r.id);
    CHECK(r.history_item_ids == std::vector<std::string>{"msg_" + std::string(rs::to_string(r.status))});
  }
  std::sort(ids.begin(), ids.end());
  CHECK(ids == std::vector<std::string>{"resp_in_progress", "resp_queued"});
}

TEST_CASE("a response's events after a sequence come back in order and are never rewritten", "[response_store][contract]") {
  responses_client client(fresh_db("responses-events"));
  auto c = commit("resp_1", {}, {}, "queued");
  c.events = {{0, R"({"n":0})"}, {1, R"({"n":1})"}, {2, R"({"n":2})"}};
  client.save(c);
  c.response.status = rs::response_status::in_progress;
  c.events = {{2, R"({"n":"again"})"}, {3, R"({"n":3})"}};
  client.save(c);
  // RS-55: the log is append-only.
  auto events = client.ok<std::vector<response_event>>(response_events_atom::value, std::string("resp_1"), int64_t{1});
  REQUIRE(events.size() == 2);
  CHECK(events[0].sequence == 2);
  CHECK(events[0].json == R"({"n":2})");
  CHECK(events[1].sequence == 3);
  CHECK(client.ok<std::vector<response_event>>(response_events_atom::value, std::string("resp_1"), int64_t{3}).empty());
}

TEST_CASE("a response that ended stays as it ended: a later commit keeps nothing and answers conflict",
          "[response_store][contract]") { // CJ-16: a fenced node's writes after another node failed its response
  responses_client client(fresh_db("responses-ended"));
  auto running = commit("resp_1", {"msg_a"}, {item("msg_a")}, "in_progress");
  running.events = {{0, R"({"n":0})"}, {1, R"({"n":1})"}};
  client.save(running);
  auto failing = commit("resp_1", {"msg_a"}, {}, "failed"); // another node fails it, with its closing events
  failing.events = {{2, R"({"type":"response.failed"})"}};
  client.save(failing);

  for (bool events_only : {true, false}) { // the node that ran it, back from a partition
    auto late = commit("resp_1", {"msg_a", "msg_b"}, {item("msg_b")}, "completed");
    late.events = {{3, R"({"n":3})"}, {4, R"({"type":"response.completed"})"}};
    late.events_only = events_only;
    auto err = client.refused<int64_t>(save_response_atom::value, late);
    CHECK(code_of(err) == errc::conflict);
    CHECK(problem_of(err).kind == response_already_ended);
  }
  auto r = client.get("resp_1");
  CHECK(r.status == rs::response_status::failed);
  CHECK(r.history_item_ids == std::vector<std::string>{"msg_a"});
  auto events = client.ok<std::vector<response_event>>(response_events_atom::value, std::string("resp_1"), int64_t{-1});
  REQUIRE(events.size() == 3);
  CHECK(events.back().json == R"({"type":"response.failed"})");
  CHECK(client.items({"msg_b"}).empty());
}

TEST_CASE("responses and conversations survive closing and reopening the store beside the run store",
          "[response_store][contract]") {
  auto db = fresh_db("responses-reopen");
  {
    // The run store opens the database first, as the service does; both keep connections to it.
    test::store_client runs(db);
  }
  {
    responses_client client(db);
    auto c = commit("resp_1", {"msg_a", "msg_b"}, {item("msg_a"), item("msg_b")});
    c.events = {{0, R"({"n":0})"}};
    client.save(c);
    client.create_conversation("conv_1", {item("msg_b")});
    // Sent without waiting: stopping the store must not lose it.
    client.self->send(client.store, add_conversation_items_atom::value, std::string("conv_1"), nobody,
                      std::vector<stored_item>{item("msg_c")});
  }
  responses_client client(db);
  CHECK(client.get("resp_1").history_item_ids == std::vector<std::string>{"msg_a", "msg_b"});
  CHECK(client.ok<std::vector<response_event>>(response_events_atom::value, std::string("resp_1"), int64_t{-1}).size()
        == 1);
  CHECK(client.members("conv_1") == std::make_pair(std::vector<std::string>{"msg_b", "msg_c"}, int64_t{1}));
}

TEST_CASE("an unopenable response store path is an error that names the file", "[response_store]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto store = io::spawn_sqlite_response_store(sys, "/proc/nonexistent/dir/troupe.db");
  REQUIRE(std::holds_alternative<std::string>(store));
  CHECK(std::get<std::string>(store).find("/proc/nonexistent/dir/troupe.db") != std::string::npos);
}

// Runs body(w, client, self) on `writers` threads released together, writer w through `first` or
// `second` in turn (two instances on one database, as two troupe processes).
template <class Body>
void all_at_once(int writers, responses_client& first, responses_client& second, Body body) {
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w) {
    threads.emplace_back([&, w] {
      auto& client = w % 2 == 0 ? first : second;
      caf::scoped_actor self{client.sys};
      while (!go)
        std::this_thread::yield();
      body(w, client, self);
    });
  }
  go = true;
  for (auto& t : threads)
    t.join();
}

TEST_CASE("8 writers adding to one conversation at once, through two store instances, store every item once at "
          "positions without gap (RS-12, RS-54)",
          "[response_store][contract][concurrency]") {
  auto db = fresh_db("responses-concurrent-adds");
  // Two instances on one database, as two troupe processes: only the database orders their writes.
  responses_client first(db);
  responses_client second(db);
  first.create_conversation("conv_1", {});
  constexpr int writers = 8;
  constexpr int per_writer = 25;
  std::atomic<int> refused{0};
  all_at_once(writers, first, second, [&](int w, responses_client& client, caf::scoped_actor& self) {
    for (int i = 0; i < per_writer; ++i) {
      auto id = "msg_" + std::to_string(w) + "_" + std::to_string(i);
      self->request(client.store, std::chrono::seconds(30), add_conversation_items_atom::value,
                    std::string("conv_1"), nobody, std::vector<stored_item>{item(id)})
        .receive([](std::vector<stored_item>&) {}, [&](caf::error&) { ++refused; });
    }
  });
  CHECK(refused == 0);

  constexpr std::size_t total = writers * per_writer;
  auto [ids, revision] = first.members("conv_1");
  CHECK(revision == static_cast<int64_t>(total)); // one bump per add
  REQUIRE(ids.size() == total);
  CHECK(std::set<std::string>(ids.begin(), ids.end()).size() == total);
  // Each writer's items in the order it added them.
  std::map<std::string, int> next;
  for (auto& id : ids) {
    auto writer = id.substr(0, id.rfind('_'));
    CHECK(id == writer + "_" + std::to_string(next[writer]++));
  }
  CHECK(member_positions(db, "conv_1") == zero_to(total));
  CHECK(first.walk(list_conversation_items_atom::value, "conv_1", true, 64) == ids);
}

TEST_CASE("of 8 responses committed at once against one conversation revision, exactly one appends (RS-54)",
          "[response_store][contract][concurrency]") {
  auto db = fresh_db("responses-concurrent-commits");
  responses_client first(db);
  responses_client second(db);
  first.create_conversation("conv_1", {item("msg_seed")});
  constexpr int rounds = 10;
  constexpr int writers = 8;
  std::vector<std::string> expected{"msg_seed"};
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::optional<int64_t>> revisions(writers);
    std::atomic<int> conflicts{0};
    std::atomic<int> other{0};
    all_at_once(writers, first, second, [&](int w, responses_client& client, caf::scoped_actor& self) {
      auto suffix = std::to_string(round) + "_" + std::to_string(w);
      auto c = commit("resp_" + suffix, {"msg_seed", "msg_" + suffix}, {item("msg_" + suffix)});
      c.events = {{0, R"({"type":"response.created"})"}};
      c.conversation_id = "conv_1";
      c.conversation_append = {"msg_" + suffix};
      c.expected_revision = round; // every writer read the same revision
      self->request(client.store, std::chrono::seconds(30), save_response_atom::value, std::move(c))
        .receive([&](int64_t revision) { revisions[static_cast<std::size_t>(w)] = revision; },
                 [&](caf::error& e) { ++(code_of(e) == errc::conflict ? conflicts : other); });
    });
    CHECK(other == 0);
    CHECK(conflicts == writers - 1);
    int winners = 0;
    for (int w = 0; w < writers; ++w) {
      auto suffix = std::to_string(round) + "_" + std::to_string(w);
      auto stored = first.call<response_row>(get_response_atom::value, "resp_" + suffix, nobody);
      if (auto revision = revisions[static_cast<std::size_t>(w)]) {
        ++winners;
        CHECK(*revision == round + 1);
        CHECK(std::holds_alternative<response_row>(stored));
        expected.push_back("msg_" + suffix);
      } else {
        // A refused commit wrote nothing: no row, no item, no event.
        CHECK(std::holds_alternative<caf::error>(stored));
        CHECK(first.items({"msg_" + suffix}).empty());
        CHECK(first.ok<std::vector<response_event>>(response_events_atom::value, "resp_" + suffix, int64_t{-1})
                .empty());
      }
    }
    CHECK(winners == 1);
  }
  CHECK(first.members("conv_1") == std::make_pair(expected, int64_t{rounds}));
  CHECK(member_positions(db, "conv_1") == zero_to(expected.size()));
}
