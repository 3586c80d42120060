// The SQLite store adapter: sessions are kept per (tenant, user, session) and survive a restart.
#include "actors/errors.hpp"
#include "io/sqlite_store.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <filesystem>

#include <unistd.h>

using namespace troupe;

namespace {

std::string temp_db() {
  auto dir = std::filesystem::temp_directory_path() / ("troupe-store-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / "troupe.db";
  std::filesystem::remove(path);
  return path.string();
}

session_record record(std::string tenant, std::string user, std::string session, std::string run) {
  session_record r;
  r.tenant_key = std::move(tenant);
  r.user_key = std::move(user);
  r.session_id = std::move(session);
  r.created_at = r.updated_at = "2026-01-01T00:00:00.000000+00:00";
  r.last_run_id = std::move(run);
  r.last_status = "completed";
  r.last_query = "q";
  r.last_answer = "a";
  return r;
}

} // namespace

TEST_CASE("sessions are kept per tenant, user and session id and survive a restart", "[store]") {
  auto path = temp_db();
  {
    caf::actor_system_config cfg;
    caf::actor_system sys{cfg};
    auto store = io::spawn_sqlite_store(sys, path);
    REQUIRE(std::holds_alternative<store_actor>(store));
    auto s = std::get<store_actor>(store);
    caf::scoped_actor self{sys};
    self->send(s, save_session_atom::value, record("t", "t:u", "s1", "r1"));
    self->send(s, save_session_atom::value, record("t", "t:u", "s1", "r2"));
    self->send(s, save_session_atom::value, record("other", "t:u", "s1", "r3"));
    // a request after the sends is answered after them: the writes are done
    self->request(s, std::chrono::seconds(5), get_session_atom::value, std::string("t"), std::string("t:u"),
                  std::string("s1"))
      .receive([](session_record&) {}, [](caf::error& err) { FAIL(message_of(err)); });
    self->send_exit(s, caf::exit_reason::user_shutdown);
  }
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto store = io::spawn_sqlite_store(sys, path);
  REQUIRE(std::holds_alternative<store_actor>(store));
  auto s = std::get<store_actor>(store);
  caf::scoped_actor self{sys};
  self->request(s, std::chrono::seconds(5), get_session_atom::value, std::string("t"), std::string("t:u"),
                std::string("s1"))
    .receive(
      [](session_record& r) {
        CHECK(r.run_count == 2);
        CHECK(r.last_run_id == "r2");
      },
      [](caf::error& err) { FAIL(message_of(err)); });
  self->request(s, std::chrono::seconds(5), get_session_atom::value, std::string("other"), std::string("t:u"),
                std::string("s1"))
    .receive([](session_record& r) { CHECK(r.last_run_id == "r3"); },
             [](caf::error& err) { FAIL(message_of(err)); });
  self->request(s, std::chrono::seconds(5), get_session_atom::value, std::string("t"), std::string("t:u"),
                std::string("nope"))
    .receive([](session_record&) { FAIL("found a session that was never saved"); },
             [](caf::error& err) { CHECK(code_of(err) == errc::not_found); });
  self->send_exit(s, caf::exit_reason::user_shutdown);
}

TEST_CASE("an unopenable store path is an error that names the file", "[store]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto store = io::spawn_sqlite_store(sys, "/proc/nonexistent/dir/troupe.db");
  REQUIRE(std::holds_alternative<std::string>(store));
  CHECK(std::get<std::string>(store).find("/proc/nonexistent/dir/troupe.db") != std::string::npos);
}
