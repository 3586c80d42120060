// The workspace store port's contract (WS-15, WS-29, WS-39, WS-40, CJ-3, CJ-9): cases every adapter
// must pass unchanged, driven through workspace_store_actor messages only. With
// TROUPE_TEST_STORE=postgres each case runs on a fresh PostgreSQL database (tests/io/store_client.hpp).
#include "io/sqlite_workspace_store.hpp"
#include "io/store_client.hpp"
#include "protocol/config.hpp"
#include "protocol/json.hpp"
#include "protocol/workspace_events.hpp"

#include <atomic>
#include <memory>
#include <set>
#include <thread>

using namespace troupe;
using namespace troupe::test;
namespace rx = troupe::protocol::reflexr;

namespace {

// One process's workspace stores, each with its own connection(s) to one database, and the event
// types the cases publish.
struct workspace_client {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  std::string db;
  std::vector<workspace_store_actor> stores;
  std::shared_ptr<const rx::event_registry> types;

  // `n` stores on the database `name` names, as `n` nodes would share it.
  explicit workspace_client(const std::string& name, int n = 1) : db(fresh_db(name)) {
    auto parsed = protocol::parse_config(
      R"({"workspaces":{"event_types":[
           {"name":"ops:deploy.finished","schema":{"type":"object","additionalProperties":true}},
           {"name":"ops:service.error","schema":{"type":"object","additionalProperties":true}}]}})",
      {}, [](const std::string&) { return std::nullopt; });
    REQUIRE(parsed.errors == std::vector<std::string>{});
    types = std::get<0>(rx::event_registry::build(parsed.value.workspaces));
    for (int i = 0; i < n; ++i) {
      auto s = on_postgres() ? spawn_pg_port<workspace_store_actor>(sys, db)
                             : io::spawn_sqlite_workspace_store(sys, db);
      if (auto err = std::get_if<std::string>(&s))
        FAIL("cannot open the workspace store: " << *err);
      stores.push_back(std::get<workspace_store_actor>(s));
    }
  }

  ~workspace_client() {
    for (auto& s : stores)
      caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
  }

  workspace_command command(rx::command_request request, const std::string& workspace = "prod") const {
    workspace_command c;
    c.key = {"acme", workspace};
    c.participant = "user:ana";
    c.request = std::move(request);
    c.context.workspace_id = workspace;
    c.context.actor.kind = "user";
    c.context.actor.id = "ana";
    c.context.now = protocol::utc_timestamp(sys_clock::now());
    c.context.types = types;
    return c;
  }

  // A REST publish body (WS-63) as a command.
  workspace_command publish(const std::string& body, const std::string& workspace = "prod") const {
    auto parsed = rx::parse_publish_body(body, *types);
    if (auto bad = std::get_if<rx::problems>(&parsed))
      FAIL(rx::first_problem(*bad));
    return command(std::get<rx::command_request>(std::move(parsed)), workspace);
  }

  // A keyed command frame (WS-38).
  workspace_command keyed(const std::string& frame) const {
    auto parsed = rx::parse_command_frame(frame, *types);
    if (auto bad = std::get_if<rx::problems>(&parsed))
      FAIL(rx::first_problem(*bad));
    return command(std::get<rx::command_request>(std::move(parsed)));
  }

  template <class T, class... Ts>
  answer<T> ask(const workspace_store_actor& store, Ts&&... xs) {
    caf::scoped_actor self{sys};
    answer<T> out = make_error(errc::internal, "no answer");
    self->request(store, std::chrono::seconds(30), std::forward<Ts>(xs)...)
      .receive([&](T& v) { out = std::move(v); }, [&](caf::error& err) { out = std::move(err); });
    return out;
  }

  workspace_outcome carry_out(workspace_command c, std::size_t store = 0) {
    return store_client::ok(ask<workspace_outcome>(stores.at(store), command_atom::value, std::move(c)));
  }

  // `copies` of one command sent at once, alternately to each store; their answers in sending order.
  std::vector<answer<workspace_outcome>> at_once(const workspace_command& command, int copies) {
    std::vector<answer<workspace_outcome>> out(static_cast<std::size_t>(copies));
    std::vector<std::thread> threads;
    for (int i = 0; i < copies; ++i)
      threads.emplace_back([&, i] {
        out[static_cast<std::size_t>(i)] =
          ask<workspace_outcome>(stores[static_cast<std::size_t>(i) % stores.size()], command_atom::value, command);
      });
    for (auto& t : threads)
      t.join();
    return out;
  }

  workspace_slice read(workspace_read r, const std::string& workspace = "prod") {
    return store_client::ok(
      ask<workspace_slice>(stores.at(0), read_atom::value, workspace_key{"acme", workspace}, std::move(r)));
  }

  int64_t head(const std::string& workspace = "prod") {
    return store_client::ok(ask<int64_t>(stores.at(0), head_atom::value, workspace_key{"acme", workspace}));
  }
};

std::string event(const std::string& type, const std::string& service) {
  return R"({"type":")" + type + R"(","service":")" + service + R"("})";
}

int64_t seq_in(const std::string& envelope) {
  auto doc = protocol::json::parse(envelope);
  REQUIRE(doc);
  auto seq = protocol::json::member(*doc, "seq");
  REQUIRE(seq);
  return seq->GetInt64();
}

} // namespace

TEST_CASE("8 concurrent publishers to one workspace, through two stores, take seqs 1..n without gap or repeat "
          "(CJ-9)",
          "[store][contract][workspace]") {
  workspace_client c("ws-concurrent", 2);
  constexpr int publishers = 8;
  constexpr int commands = 25; // each, of two events
  std::vector<std::vector<workspace_command>> sent(publishers);
  for (int p = 0; p < publishers; ++p)
    for (int i = 0; i < commands; ++i) {
      auto name = std::to_string(p) + "-" + std::to_string(i);
      sent[static_cast<std::size_t>(p)].push_back(c.publish(R"({"events":[{"event":)" + event("ops:deploy.finished", name)
                                                            + R"(},{"event":)" + event("ops:service.error", name)
                                                            + "}]}"));
    }
  std::vector<std::vector<workspace_outcome>> answered(publishers);
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (int p = 0; p < publishers; ++p)
    threads.emplace_back([&, p] {
      caf::scoped_actor self{c.sys};
      for (int i = 0; i < commands && !failed; ++i) {
        auto& store = c.stores[static_cast<std::size_t>((p + i) % 2)];
        auto& command = sent[static_cast<std::size_t>(p)][static_cast<std::size_t>(i)];
        self->request(store, std::chrono::seconds(60), command_atom::value, command)
          .receive([&](workspace_outcome& o) { answered[static_cast<std::size_t>(p)].push_back(std::move(o)); },
                   [&](caf::error&) { failed = true; });
      }
    });
  for (auto& t : threads)
    t.join();
  REQUIRE_FALSE(failed);

  constexpr int64_t n = publishers * commands * 2;
  std::set<int64_t> seqs;
  for (auto& mine : answered) {
    int64_t last = 0;
    for (auto& o : mine) {
      REQUIRE(o.ok);
      REQUIRE(o.appended.size() == 2);
      CHECK(o.first_seq > last); // one publisher's commands commit in the order it sent them
      last = o.first_seq;
      for (std::size_t i = 0; i < o.appended.size(); ++i) {
        CHECK(seq_in(o.appended[i]) == o.first_seq + static_cast<int64_t>(i));
        CHECK(seqs.insert(o.first_seq + static_cast<int64_t>(i)).second);
      }
    }
  }
  REQUIRE(static_cast<int64_t>(seqs.size()) == n);
  CHECK(*seqs.begin() == 1);
  CHECK(*seqs.rbegin() == n);
  CHECK(c.head() == n);

  workspace_read all;
  all.limit = n + 10;
  auto log = c.read(all);
  REQUIRE(static_cast<int64_t>(log.seqs.size()) == n);
  for (int64_t i = 0; i < n; ++i) {
    CHECK(log.seqs[static_cast<std::size_t>(i)] == i + 1);
    CHECK(seq_in(log.envelopes[static_cast<std::size_t>(i)]) == i + 1);
  }
}

TEST_CASE("a command carried out twice with one id, at once on two stores, stores one result (WS-39, WS-40)",
          "[store][contract][workspace]") {
  workspace_client c("ws-keyed", 2);
  auto frame = R"({"type":"command","command_id":"cmd_7","command":{"type":"publish","event":)"
               + event("ops:service.error", "auth") + "}}";
  std::vector<workspace_outcome> outcomes;
  for (auto& a : c.at_once(c.keyed(frame), 6))
    outcomes.push_back(store_client::ok(std::move(a)));
  outcomes.push_back(c.carry_out(c.keyed(frame), 1)); // and once more, long after

  int first = 0;
  for (auto& o : outcomes) {
    CHECK(o.ok);
    CHECK(o.code == errc::none);
    CHECK(o.max_seq == 1);
    CHECK(o.body == outcomes[0].body);
    if (!o.remembered) {
      ++first;
      CHECK(o.appended.size() == 1);
    } else {
      CHECK(o.appended.empty());
    }
  }
  CHECK(first == 1);
  CHECK(c.head() == 1);
  CHECK(c.read({}).seqs == std::vector<int64_t>{1});

  // WS-40: a result older than the retention is forgotten, so the key is carried out anew.
  store_client::ok(c.ask<bool>(c.stores[0], prune_atom::value, -1.0));
  auto again = c.carry_out(c.keyed(frame));
  CHECK_FALSE(again.remembered);
  CHECK(again.max_seq == 2);
  CHECK(c.head() == 2);
}

TEST_CASE("an event id published twice at once is appended once (WS-29)", "[store][contract][workspace]") {
  workspace_client c("ws-event-id", 2);
  auto body = R"({"event":)" + event("ops:deploy.finished", "api") + R"(,"id":"evt_same"})";
  std::size_t appended = 0;
  for (auto& a : c.at_once(c.publish(body), 4)) {
    auto o = store_client::ok(std::move(a));
    CHECK(o.ok);
    CHECK(o.max_seq == 1);
    appended += o.appended.size();
  }
  CHECK(appended == 1);
  CHECK(c.head() == 1);
}

TEST_CASE("envelopes come back byte for byte (CJ-3)", "[store][contract][workspace]") {
  workspace_client c("ws-bytes");
  std::string big(100000, 'x');
  std::vector<std::string> bodies = {
    R"({"event":{"type":"ops:deploy.finished","service":"caf\u00e9 \u2713 \ud83d\ude80","note":"tab\tquote\"back\\slash nul\u0000"}})",
    R"({"event":{"type":"ops:service.error","n":1e308,"m":-0.0,"i":12345678901234567890,"nested":{"a":[1,2,{"b":null}]}}})",
    R"({"event":{"type":"ops:deploy.finished","big":")" + big + R"("}})",
  };
  std::vector<std::string> written;
  for (auto& b : bodies) {
    auto o = c.carry_out(c.publish(b));
    REQUIRE(o.ok);
    REQUIRE(o.appended.size() == 1);
    written.push_back(o.appended[0]);
  }
  auto log = c.read({});
  CHECK(log.envelopes == written);
  CHECK(log.types == std::vector<std::string>{"ops:deploy.finished", "ops:service.error", "ops:deploy.finished"});
  CHECK(written[0].find(u8"caf\u00e9 \u2713 \U0001F680") != std::string::npos);
}

TEST_CASE("reads filter by type and bound, from either end (WS-15)", "[store][contract][workspace]") {
  workspace_client c("ws-reads");
  for (int i = 0; i < 6; ++i)
    c.carry_out(c.publish(R"({"event":)" + event(i % 2 ? "ops:service.error" : "ops:deploy.finished", "s") + "}"));
  workspace_read errors;
  errors.types = {"ops:service.error"};
  CHECK(c.read(errors).seqs == std::vector<int64_t>{2, 4, 6});
  workspace_read last_two;
  last_two.from_end = true;
  last_two.limit = 2;
  last_two.before_seq = 6;
  CHECK(c.read(last_two).seqs == std::vector<int64_t>{4, 5});
  workspace_read between;
  between.after_seq = 1;
  between.before_seq = 5;
  between.types = {"ops:deploy.finished", "ops:service.error"};
  CHECK(c.read(between).seqs == std::vector<int64_t>{2, 3, 4});
  workspace_read first;
  first.limit = 1;
  CHECK(c.read(first).seqs == std::vector<int64_t>{1});
  CHECK(c.read({}, "other").seqs.empty()); // one workspace's log is not another's
}

TEST_CASE("a log the store never saw reads empty, and a chain it does not hold is not found (WS-30)",
          "[store][contract][workspace]") {
  workspace_client c("ws-missing");
  CHECK(c.head("nowhere") == 0);
  CHECK(c.read({}, "nowhere").seqs.empty());
  auto o = c.carry_out(c.publish(R"({"events":[{"event":)" + event("ops:deploy.finished", "api")
                                 + R"(}],"correlation_id":"evt_missing"})",
                                 "nowhere"));
  CHECK_FALSE(o.ok);
  CHECK(o.code == errc::not_found);
  CHECK(o.appended.empty());
  CHECK(c.head("nowhere") == 0);

  // Once the chain's first event is in the log, the same chain is found.
  auto started = c.carry_out(c.publish(R"({"event":)" + event("ops:deploy.finished", "api") + R"(,"id":"evt_root"})",
                                       "nowhere"));
  REQUIRE(started.ok);
  auto chained = c.carry_out(c.publish(R"({"events":[{"event":)" + event("ops:service.error", "api")
                                       + R"(}],"correlation_id":"evt_root"})",
                                       "nowhere"));
  CHECK(chained.ok);
  CHECK(chained.first_seq == 2);
}
