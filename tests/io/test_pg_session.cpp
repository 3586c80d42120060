// A PostgreSQL session's limits and retries (CJ-4, CJ-5) against a real server: run by the
// `postgres_io` ctest test inside scripts/pg-throwaway (hidden from a plain run of the io tests).
#include "actors/errors.hpp"
#include "io/pg_session.hpp"
#include "io/pg_store.hpp"
#include "io/cut_proxy.hpp"

#include <catch2/catch.hpp>
#include <pqxx/pqxx>

#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <variant>
#include <vector>

using namespace troupe;
using namespace troupe::io;

namespace {

std::string postgres_url() {
  auto url = std::getenv("TROUPE_POSTGRES_URL");
  if (!url || !*url)
    FAIL("TROUPE_POSTGRES_URL is not set: run these cases through scripts/pg-throwaway (ctest: postgres_io)");
  return url;
}

// A fresh table `name (k TEXT PRIMARY KEY, v INTEGER)` with rows 'a' and 'b'.
void fresh_table(const std::string& url, const std::string& name) {
  pqxx::connection c(url);
  pqxx::work tx(c);
  tx.exec("DROP TABLE IF EXISTS " + name);
  tx.exec("CREATE TABLE " + name + " (k TEXT PRIMARY KEY, v INTEGER NOT NULL)");
  tx.exec("INSERT INTO " + name + " VALUES ('a', 0), ('b', 0)");
  tx.commit();
}

int64_t count(const std::string& url, const std::string& sql) {
  pqxx::connection c(url);
  pqxx::nontransaction tx(c);
  return tx.exec1(sql)[0].as<int64_t>();
}

// The port of a postgresql://user@host:port/db URL, and the same URL through another port.
uint16_t port_of(const std::string& url) {
  auto colon = url.rfind(':');
  return static_cast<uint16_t>(std::stoi(url.substr(colon + 1, url.find('/', colon) - colon - 1)));
}

std::string through(const std::string& url, uint16_t port) {
  auto colon = url.rfind(':');
  return url.substr(0, colon + 1) + std::to_string(port) + url.substr(url.find('/', colon));
}

void terminate_backend(const std::string& url, int pid) {
  pqxx::connection admin(url);
  pqxx::nontransaction tx(admin);
  tx.exec("SELECT pg_terminate_backend(" + std::to_string(pid) + ")");
}

} // namespace

TEST_CASE("what the CJ-5 rules retry, settle or report", "[pg_session]") {
  using pg::after_failure;
  CHECK(pg::classify(pqxx::sql_error("x", "q", "40001"), false) == after_failure::retry);
  CHECK(pg::classify(pqxx::sql_error("x", "q", "40P01"), false) == after_failure::retry);
  CHECK(pg::classify(pqxx::sql_error("x", "q", "55P03"), false) == after_failure::retry);
  CHECK(pg::classify(pqxx::serialization_failure("x"), false) == after_failure::retry);
  CHECK(pg::classify(pqxx::deadlock_detected("x"), false) == after_failure::retry);
  CHECK(pg::classify(pqxx::statement_completion_unknown("x"), false) == after_failure::settle);
  CHECK(pg::classify(pqxx::sql_error("x", "q", "23505"), false) == after_failure::fail);
  CHECK(pg::classify(pqxx::broken_connection("gone"), false) == after_failure::retry);
  CHECK(pg::classify(pqxx::broken_connection("gone"), true) == after_failure::settle);
  CHECK(pg::classify(pqxx::in_doubt_error("unknown"), true) == after_failure::settle);
  CHECK(pg::classify(std::runtime_error("other"), false) == after_failure::fail);
}

TEST_CASE("the connection URL gains keepalives, a connect timeout and troupe's name unless it sets them",
          "[pg_session]") {
  pg::session_limits l;
  l.connect_timeout_seconds = 7;
  CHECK(pg::connection_url("postgresql://u@h:5/db", l)
        == "postgresql://u@h:5/db?keepalives=1&keepalives_idle=10&keepalives_interval=5&keepalives_count=3"
           "&connect_timeout=7&application_name=troupe");
  CHECK(pg::connection_url("postgresql://u@h/db?sslmode=require&keepalives_idle=60", l)
        == "postgresql://u@h/db?sslmode=require&keepalives_idle=60&keepalives=1&keepalives_interval=5"
           "&keepalives_count=3&connect_timeout=7&application_name=troupe");
  CHECK(pg::connection_url("host=h dbname=db application_name=mine", l)
        == "host=h dbname=db application_name=mine keepalives=1 keepalives_idle=10 keepalives_interval=5 "
           "keepalives_count=3 connect_timeout=7");
  CHECK(pg::connection_url("postgresql://u@h/db", l, "troupe-listen").find("&application_name=troupe-listen")
        != std::string::npos); // CJ-10's own connections, told apart
}

TEST_CASE("a store URL is shown without its password, in either form libpq reads", "[pg_session]") {
  using troupe::io::redacted_url;
  CHECK(redacted_url("postgresql://troupe:s3cret@db.example:5432/troupe") == "postgresql://troupe@db.example:5432/troupe");
  CHECK(redacted_url("postgresql://troupe@db/troupe?sslmode=require&password=s3cret") == "postgresql://troupe@db/troupe");
  CHECK(redacted_url("postgresql://db/troupe") == "postgresql://db/troupe");
  CHECK(redacted_url("host=db password=s3cret dbname=troupe") == "host=db password=*** dbname=troupe");
  CHECK(redacted_url("host=db PASSWORD = 'a b\\'c' dbname=troupe") == "host=db password=*** dbname=troupe");
}

TEST_CASE("a session runs with the statement, lock and idle-transaction limits of cluster.pg (CJ-4)",
          "[.][postgres][pg_session]") {
  pg::session_limits l;
  l.statement_timeout_seconds = 1.5;
  l.lock_timeout_seconds = 0.25;
  l.idle_in_transaction_seconds = 10;
  pg::session s(postgres_url(), l);
  std::string statement, lock, idle, name;
  REQUIRE_FALSE(s.transact([&](pqxx::work& tx) {
    statement = tx.exec1("SHOW statement_timeout")[0].c_str();
    lock = tx.exec1("SHOW lock_timeout")[0].c_str();
    idle = tx.exec1("SHOW idle_in_transaction_session_timeout")[0].c_str();
    name = tx.exec1("SHOW application_name")[0].c_str();
    return true;
  }));
  CHECK(statement == "1500ms");
  CHECK(lock == "250ms");
  CHECK(idle == "10s");
  CHECK(name == "troupe");
}

TEST_CASE("a lock wait past lock_timeout (55P03) is tried again and then succeeds (CJ-5)", "[.][postgres][pg_session]") {
  auto url = postgres_url();
  fresh_table(url, "retry_lock");
  pg::session_limits l;
  l.lock_timeout_seconds = 0.1;
  pg::session s(url, l);

  std::promise<void> release, released;
  std::promise<void> holding;
  std::thread holder([&] {
    pqxx::connection c(url);
    pqxx::work tx(c);
    tx.exec("SELECT v FROM retry_lock WHERE k = 'a' FOR UPDATE");
    holding.set_value();
    release.get_future().wait();
    tx.commit();
    released.set_value();
  });
  holding.get_future().wait();
  int runs = 0;
  auto err = s.transact([&](pqxx::work& tx) {
    if (++runs == 2) { // the first try timed out: let the holder go, so the second gets the lock
      release.set_value();
      released.get_future().wait();
    }
    tx.exec("UPDATE retry_lock SET v = v + 1 WHERE k = 'a'");
    return true;
  });
  holder.join();
  CHECK_FALSE(err);
  CHECK(runs == 2);
  CHECK(s.last_tries() == 2);
  CHECK(count(url, "SELECT v FROM retry_lock WHERE k = 'a'") == 1);
}

TEST_CASE("a deadlock (40P01) is retried: both transactions end written once (CJ-5)", "[.][postgres][pg_session]") {
  auto url = postgres_url();
  fresh_table(url, "retry_deadlock");
  std::promise<void> a_locked, b_locked;
  auto a_ready = b_locked.get_future().share();
  auto b_ready = a_locked.get_future().share();
  auto cross = [&](const char* first, const char* second, std::promise<void>& mine,
                   std::shared_future<void> theirs) {
    pg::session s(url, {});
    int runs = 0;
    auto err = s.transact([&](pqxx::work& tx) {
      tx.exec(std::string("UPDATE retry_deadlock SET v = v + 1 WHERE k = '") + first + "'");
      if (++runs == 1) { // only the first tries cross: the retry runs alone
        mine.set_value();
        theirs.wait();
      }
      tx.exec(std::string("UPDATE retry_deadlock SET v = v + 1 WHERE k = '") + second + "'");
      return true;
    });
    return std::make_pair(static_cast<bool>(err), s.last_tries());
  };
  auto a = std::async(std::launch::async, cross, "a", "b", std::ref(a_locked), a_ready);
  auto b = std::async(std::launch::async, cross, "b", "a", std::ref(b_locked), b_ready);
  auto ra = a.get();
  auto rb = b.get();
  CHECK_FALSE(ra.first);
  CHECK_FALSE(rb.first);
  CHECK(ra.second + rb.second == 3); // one of them was the deadlock's victim and ran again
  CHECK(count(url, "SELECT SUM(v) FROM retry_deadlock") == 4);
}

TEST_CASE("a connection lost before COMMIT is replaced and the transaction runs again on the new one (CJ-5)",
          "[.][postgres][pg_session]") {
  auto url = postgres_url();
  fresh_table(url, "retry_lost");
  pg::session s(url, {});
  std::vector<int> pids;
  auto err = s.transact([&](pqxx::work& tx) {
    pids.push_back(s.backend_pid());
    if (pids.size() == 1)
      terminate_backend(url, pids.back());
    tx.exec("INSERT INTO retry_lost VALUES ('c', 1)");
    return true;
  });
  CHECK_FALSE(err);
  REQUIRE(pids.size() == 2);
  CHECK(pids[0] != pids[1]);
  CHECK(count(url, "SELECT COUNT(*) FROM retry_lost WHERE k = 'c'") == 1);
}

TEST_CASE("a COMMIT whose answer is lost is settled by the transaction's id and not run again (CJ-5)",
          "[.][postgres][pg_session]") {
  auto url = postgres_url();
  fresh_table(url, "retry_settle");
  test::cut_proxy proxy(port_of(url));
  pg::session s(through(url, proxy.port()), {});
  proxy.cut_after(std::string("COMMIT\0", 7)); // the COMMIT message itself, not READ COMMITTED
  int runs = 0;
  auto err = s.transact([&](pqxx::work& tx) {
    ++runs;
    tx.exec("INSERT INTO retry_settle VALUES ('d', 1)");
    return true;
  });
  CHECK_FALSE(err);
  CHECK(proxy.cuts() == 1);
  CHECK(runs == 1); // it committed: running it again would have met the primary key
  CHECK(s.last_tries() == 1);
  CHECK(count(url, "SELECT COUNT(*) FROM retry_settle WHERE k = 'd'") == 1);
}

TEST_CASE("a read-only transaction whose COMMIT answer is lost is simply run again (CJ-5)",
          "[.][postgres][pg_session]") {
  auto url = postgres_url();
  fresh_table(url, "retry_read");
  test::cut_proxy proxy(port_of(url));
  pg::session s(through(url, proxy.port()), {});
  proxy.cut_after(std::string("COMMIT\0", 7)); // the COMMIT message itself, not READ COMMITTED
  int runs = 0;
  int64_t seen = -1;
  auto err = s.transact([&](pqxx::work& tx) {
    ++runs;
    seen = tx.exec1("SELECT COUNT(*) FROM retry_read")[0].as<int64_t>();
    return true;
  });
  CHECK_FALSE(err);
  CHECK(proxy.cuts() == 1);
  CHECK(runs == 2);
  CHECK(seen == 2);
}

TEST_CASE("a transaction another client holds open is found once older than the limit, the session's own never "
          "(CJ-11)",
          "[.][postgres][pg_session]") {
  auto url = postgres_url();
  pqxx::connection other(url + "?application_name=holder");
  pqxx::work held(other);
  auto pid = held.exec1("SELECT pg_backend_pid()")[0].as<int>();
  pg::session s(url, {});
  auto young = pg::long_transactions(s, 3600);
  REQUIRE(std::holds_alternative<std::vector<pg::open_transaction>>(young));
  CHECK(std::get<std::vector<pg::open_transaction>>(young).empty());
  auto old = pg::long_transactions(s, 0);
  REQUIRE(std::holds_alternative<std::vector<pg::open_transaction>>(old));
  auto& found = std::get<std::vector<pg::open_transaction>>(old);
  REQUIRE(found.size() == 1);
  CHECK(found[0].pid == pid);
  CHECK(found[0].application == "holder");
  CHECK(found[0].state == "idle in transaction");
  CHECK(found[0].age_seconds > 0);
  held.abort();
}

TEST_CASE("a server that cannot be reached is store_unavailable after the retries, naming the cause (CJ-4)",
          "[pg_session]") {
  pg::session_limits l;
  l.connect_timeout_seconds = 2;
  l.retries = 1;
  pg::session s("postgresql://troupe@127.0.0.1:1/none", l);
  auto err = s.transact([](pqxx::work&) { return true; });
  REQUIRE(err);
  CHECK(code_of(*err) == errc::unavailable);
  CHECK(message_of(*err).find("store_unavailable") != std::string::npos);
  CHECK(s.last_tries() == 2);
}
