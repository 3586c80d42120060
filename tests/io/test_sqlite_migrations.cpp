// The SQLite schema is migrations/sqlite/ applied in order and recorded with digests; a database a
// changed or newer schema wrote is refused with a message naming why (CJ-2).
#include "io/migration_files.hpp"
#include "io/sqlite_support.hpp"

#include <catch2/catch.hpp>
#include <sqlite3.h>

#include <filesystem>
#include <string>

#include <unistd.h>

using namespace troupe::io;

namespace {

std::string fresh_path(const char* name) {
  auto dir = std::filesystem::temp_directory_path() / ("troupe-migrations-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto path = dir / name;
  std::filesystem::remove(path);
  return path.string();
}

std::string open_error(const std::string& path) {
  auto db = sqlite::open(path);
  if (auto err = std::get_if<std::string>(&db))
    return *err;
  return {};
}

int64_t scalar(sqlite3* db, const char* sql) {
  auto s = sqlite::prepare(db, sql);
  REQUIRE(s);
  sqlite::query q(s.get());
  REQUIRE(q.row());
  return q.integer(0);
}

} // namespace

TEST_CASE("a new database gets every shipped migration, each recorded with its digest, time and node", "[migrations]") {
  auto path = fresh_path("new.db");
  REQUIRE(open_error(path).empty());
  auto db = std::get<sqlite::db_ptr>(sqlite::open(path)); // a second open applies nothing more
  auto applied = scalar(db.get(), "SELECT COUNT(*) FROM schema_migrations");
  CHECK(applied >= 10);
  CHECK(scalar(db.get(), "SELECT MAX(version) FROM schema_migrations") == applied);
  CHECK(scalar(db.get(), "SELECT COUNT(*) FROM schema_migrations WHERE length(sha256) = 64 AND applied_at <> '' "
                         "AND node_id <> ''")
        == applied);
  CHECK(scalar(db.get(), "SELECT COUNT(*) FROM cluster WHERE length(cluster_id) = 32") == 1);
}

TEST_CASE("a database from before digests were recorded adopts them and gains the migrations it lacks", "[migrations]") {
  auto path = fresh_path("old.db");
  {
    // As an older troupe left it: the first nine files applied, recorded by number only.
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
    sqlite::db_ptr db(raw, sqlite::db_closer{});
    REQUIRE(sqlite::exec(db.get(), "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY)").empty());
    for (int v = 1; v <= 9; ++v) {
      REQUIRE(sqlite::exec(db.get(), embedded::sqlite_migrations[v - 1].text).empty());
      auto row = "INSERT INTO schema_migrations VALUES (" + std::to_string(v) + ")";
      REQUIRE(sqlite::exec(db.get(), row.c_str()).empty());
    }
    REQUIRE(sqlite::exec(db.get(), "INSERT INTO workspace_command_results VALUES "
                                   "('t', 'w', 'p', 'c1', 422, 0, 0, '{}', 0), ('t', 'w', 'p', 'c2', 200, 1, 3, '{}', 0)")
              .empty());
  }
  REQUIRE(open_error(path).empty());
  auto db = std::get<sqlite::db_ptr>(sqlite::open(path));
  CHECK(scalar(db.get(), "SELECT COUNT(*) FROM schema_migrations WHERE length(sha256) <> 64") == 0);
  CHECK(scalar(db.get(), "SELECT COUNT(*) FROM cluster") == 1);
  // A remembered result's HTTP status became its problem code (migration 11).
  CHECK(scalar(db.get(), "SELECT COUNT(*) FROM workspace_command_results WHERE command_id = 'c1' AND "
                         "code = 'validation_failed'") == 1);
  CHECK(scalar(db.get(), "SELECT COUNT(*) FROM workspace_command_results WHERE command_id = 'c2' AND code = 'none'")
        == 1);
}

TEST_CASE("a database whose applied migration differs from the shipped file is refused (CJ-2)", "[migrations]") {
  auto path = fresh_path("changed.db");
  {
    REQUIRE(open_error(path).empty());
    auto db = std::get<sqlite::db_ptr>(sqlite::open(path));
    REQUIRE(sqlite::exec(db.get(), "UPDATE schema_migrations SET sha256 = 'x' WHERE version = 3").empty());
  }
  auto err = open_error(path);
  CHECK(err.find(path) != std::string::npos);
  CHECK(err.find("migration 3 was changed after it was applied") != std::string::npos);
}

TEST_CASE("a database a newer troupe migrated past this one's reader is refused, and left as it was (CJ-2)",
          "[migrations]") {
  auto path = fresh_path("newer.db");
  {
    REQUIRE(open_error(path).empty());
    auto db = std::get<sqlite::db_ptr>(sqlite::open(path));
    REQUIRE(sqlite::exec(db.get(), "INSERT INTO schema_migrations (version, sha256, min_reader) "
                                   "VALUES (999, 'ab', 999)")
              .empty());
  }
  auto err = open_error(path);
  CHECK(err.find("schema reader 999") != std::string::npos);
  sqlite3* raw = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
  sqlite::db_ptr db(raw, sqlite::db_closer{});
  CHECK(scalar(db.get(), "SELECT COUNT(*) FROM schema_migrations WHERE version = 999") == 1);
}
