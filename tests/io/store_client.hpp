// The run store as a test drives it: one process's store actor and a blocking caller, fresh databases,
// and the small readers the store tests share (tests/io/test_sqlite_store.cpp,
// tests/io/test_store_contract.cpp). With TROUPE_TEST_STORE=postgres every store is a fresh database
// on the server TROUPE_POSTGRES_URL names (scripts/pg-throwaway), so the `[contract]` cases run
// unchanged on both engines (CJ-1).
#pragma once

#include "actors/errors.hpp"
#include "io/pg_store.hpp"
#include "io/sqlite_store.hpp"
#include "protocol/json.hpp"
#include "protocol/timestamp.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <pqxx/pqxx>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <unistd.h>

namespace troupe::test {

using sys_clock = std::chrono::system_clock;

inline bool on_postgres() {
  auto store = std::getenv("TROUPE_TEST_STORE");
  return store && std::string(store) == "postgres";
}

// A fresh PostgreSQL database named after `name`: the server's URL with that database.
inline std::string fresh_pg_database(const std::string& name) {
  auto server = std::getenv("TROUPE_POSTGRES_URL");
  if (!server)
    FAIL("TROUPE_TEST_STORE=postgres needs TROUPE_POSTGRES_URL (run through scripts/pg-throwaway)");
  std::string url = server;
  auto db = "t_" + std::to_string(std::hash<std::string>{}(name) % 1000000000000ULL);
  pqxx::connection admin(url);
  pqxx::nontransaction tx(admin);
  tx.exec("DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
  tx.exec("CREATE DATABASE " + db);
  return url.substr(0, url.rfind('/') + 1) + db;
}

// A fresh store for one test case: a database file (its WAL and shared-memory files removed too), or
// a PostgreSQL database.
inline std::string fresh_db(const std::string& name) {
  if (on_postgres())
    return fresh_pg_database(name);
  auto dir = std::filesystem::temp_directory_path() / ("troupe-store-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / (name + ".db");
  for (auto suffix : {"", "-wal", "-shm", "-journal"})
    std::filesystem::remove(path.string() + suffix);
  return path.string();
}

// One port of the PostgreSQL stores at `url` (the four share one pool of `pool` connections), or why
// they did not start.
template <class Port>
std::variant<Port, std::string> spawn_pg_port(caf::actor_system& sys, const std::string& url, std::size_t pool = 8) {
  io::pg_store_settings settings;
  settings.url = url;
  settings.pool.size = pool;
  auto s = io::spawn_pg_stores(sys, settings);
  if (auto err = std::get_if<std::string>(&s))
    return *err;
  auto& ports = std::get<io::store_ports>(s);
  if constexpr (std::is_same_v<Port, store_actor>)
    return ports.runs;
  else if constexpr (std::is_same_v<Port, response_store_actor>)
    return ports.responses;
  else if constexpr (std::is_same_v<Port, workspace_store_actor>)
    return ports.workspaces;
  else
    return ports.jobs;
}

template <class T>
using answer = std::variant<T, caf::error>;

// One process's view of a store port: its own actor system, the port's actor (spawned by
// `spawn(sys)`, which answers the port or why it did not start) and a blocking caller. Destroying it
// stops the store and waits for it, as a process exit would.
template <class Port>
struct port_client {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  Port store;
  caf::scoped_actor self{sys};

  template <class Spawn>
  explicit port_client(Spawn spawn) {
    auto s = spawn(sys);
    if (auto err = std::get_if<std::string>(&s))
      FAIL("cannot open the store: " << *err);
    store = std::get<Port>(s);
  }

  ~port_client() { self->send_exit(store, caf::exit_reason::user_shutdown); }

  template <class T, class... Ts>
  answer<T> ask(Ts&&... xs) {
    answer<T> out = make_error(errc::internal, "no answer");
    self->request(store, std::chrono::seconds(10), std::forward<Ts>(xs)...)
      .receive([&](T& v) { out = std::move(v); }, [&](caf::error& err) { out = std::move(err); });
    return out;
  }
};

// The run store's client.
struct store_client : port_client<store_actor> {
  // `pg_pool`: the PostgreSQL pool's connections (SQLite has one writer).
  explicit store_client(const std::string& path, std::size_t pg_pool = 8)
    : port_client([&](caf::actor_system& sys) {
        return on_postgres() ? spawn_pg_port<store_actor>(sys, path, pg_pool) : io::spawn_sqlite_store(sys, path);
      }) {}

  answer<run_record> create(run_record r) { return ask<run_record>(create_run_atom::value, std::move(r)); }
  answer<run_record> begin_chat(run_record r, std::string worker, double lease) {
    return ask<run_record>(begin_chat_atom::value, std::move(r), std::move(worker), lease);
  }
  answer<run_claim> claim(std::string worker, double lease, uint32_t n) {
    return claim(claim_request{std::move(worker), lease, n});
  }
  answer<run_claim> claim(claim_request want) { return ask<run_claim>(claim_atom::value, std::move(want)); }
  answer<bool> append(std::string run_id, int64_t epoch, int64_t sequence, std::string type) {
    stored_event e{sequence, type, R"({"type":")" + type + R"(","sequence":)" + std::to_string(sequence) + "}"};
    return ask<bool>(append_atom::value, std::move(run_id), epoch, std::move(e));
  }
  answer<run_record> transition(run_transition t) { return ask<run_record>(transition_atom::value, std::move(t)); }
  answer<bool> renew(std::string run_id, int64_t epoch, double lease) {
    return ask<bool>(renew_atom::value, std::move(run_id), epoch, lease);
  }
  answer<recovery_report> recover(bool all_running) {
    return ask<recovery_report>(recover_atom::value, all_running, protocol::lapsed_lease_ends());
  }
  answer<int64_t> hand_back(std::string worker, int64_t max_handoffs = 10) {
    return ask<int64_t>(handback_atom::value, std::move(worker), protocol::handed_back_end("node-a"), max_handoffs);
  }
  answer<bool> hand_back_run(std::string run_id, int64_t epoch) {
    return ask<bool>(handback_atom::value, std::move(run_id), epoch, protocol::handed_back_end("node-a"), int64_t{10});
  }
  answer<run_record> cancel(std::string run_id) {
    return ask<run_record>(cancel_atom::value, std::move(run_id), protocol::cancelled_end());
  }
  answer<run_record> get(std::string run_id) { return ask<run_record>(get_run_atom::value, std::move(run_id)); }
  answer<run_list> list(std::string status, int64_t limit, protocol::tenant_scope scope = {}) {
    return ask<run_list>(list_runs_atom::value, std::move(status), limit, std::move(scope));
  }
  answer<run_events_page> events(std::string run_id, int64_t after, int64_t limit) {
    return ask<run_events_page>(events_atom::value, std::move(run_id), after, limit);
  }
  answer<trace_list> traces(std::string session_id, int64_t limit, protocol::tenant_scope scope = {}) {
    return ask<trace_list>(list_traces_atom::value, std::move(session_id), limit, std::move(scope));
  }
  answer<protocol::store_stats> stats(protocol::tenant_scope scope = {}) {
    return ask<protocol::store_stats>(stats_atom::value, true, std::move(scope));
  }
  answer<std::string> trace(std::string run_id) { return ask<std::string>(get_trace_atom::value, std::move(run_id)); }

  // A stored run claimed by `worker`: its record at the claim's epoch.
  run_record create_and_claim(const std::string& run_id, const std::string& worker = "worker-a",
                              double lease = 60, int max_attempts = 3) {
    ok(create(run(run_id, max_attempts)));
    auto claimed = ok(claim(worker, lease, 1));
    REQUIRE(claimed.runs.size() == 1);
    REQUIRE(claimed.runs[0].run_id == run_id);
    return claimed.runs[0];
  }

  static run_record run(std::string run_id, int max_attempts = 3, std::string session = "s1",
                        std::string kind = "background") {
    run_record r;
    r.run_id = std::move(run_id);
    r.run_kind = std::move(kind);
    r.session_id = std::move(session);
    r.tenant_key = "t";
    r.user_key = "t:u";
    r.max_attempts = max_attempts;
    r.metadata = R"({"k":"v"})";
    r.request = R"({"messages":[{"role":"user","content":"hi"}]})";
    return r;
  }

  template <class T>
  static T ok(answer<T> a) {
    if (auto err = std::get_if<caf::error>(&a))
      FAIL("the store refused: " << message_of(*err));
    return std::move(std::get<T>(a));
  }

  template <class T>
  static caf::error refused(answer<T> a) {
    if (!std::holds_alternative<caf::error>(a))
      FAIL("the store accepted a write it must refuse");
    return std::get<caf::error>(a);
  }
};

inline run_transition transition_of(const run_record& r, std::string status) {
  run_transition t;
  t.run_id = r.run_id;
  t.lease_epoch = r.lease_epoch;
  t.status = std::move(status);
  t.trace.trace_type = r.run_kind == "chat" ? "chat" : "background_run";
  return t;
}

inline sys_clock::time_point when(const std::string& iso) {
  auto t = protocol::parse_iso_timestamp(iso);
  if (!t)
    FAIL("not an iso timestamp: '" << iso << "'");
  return *t;
}

inline double seconds_until(const std::string& iso) {
  return std::chrono::duration<double>(when(iso) - sys_clock::now()).count();
}

} // namespace troupe::test
