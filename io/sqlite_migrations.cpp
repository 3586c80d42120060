// The schema of the database troupe keeps in its data dir: the numbered files of migrations/sqlite/
// (the run store's, the Responses store's and the workspace logs' tables, since the three stores share
// the database), applied in order at start, each recorded in schema_migrations with its digest (CJ-2).
#include "io/migration_files.hpp"
#include "io/sqlite_support.hpp"
#include "protocol/timestamp.hpp"

#include <sqlite3.h>

#include <set>
#include <string>


namespace troupe::io {

namespace {

// schema_migrations as CJ-2 describes it; a table from before digests were recorded gains the columns.
std::string prepare_ledger(sqlite3* db) {
  if (auto err = sqlite::exec(db, "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)");
      !err.empty())
    return err;
  std::set<std::string> columns;
  auto info = sqlite::prepare(db, "PRAGMA table_info(schema_migrations)");
  while (info && sqlite3_step(info.get()) == SQLITE_ROW)
    columns.insert(reinterpret_cast<const char*>(sqlite3_column_text(info.get(), 1)));
  for (auto [name, definition] : {std::pair{"sha256", "TEXT NOT NULL DEFAULT ''"},
                                  std::pair{"applied_at", "TEXT NOT NULL DEFAULT ''"},
                                  std::pair{"node_id", "TEXT NOT NULL DEFAULT ''"},
                                  std::pair{"min_reader", "INTEGER NOT NULL DEFAULT 0"}}) {
    if (columns.count(name) != 0)
      continue;
    auto sql = std::string("ALTER TABLE schema_migrations ADD COLUMN ") + name + " " + definition;
    if (auto err = sqlite::exec(db, sql.c_str()); !err.empty())
      return err;
  }
  return {};
}

std::vector<protocol::applied_migration> applied(sqlite3* db) {
  std::vector<protocol::applied_migration> rows;
  auto statement = sqlite::prepare(db, "SELECT version, sha256, min_reader FROM schema_migrations ORDER BY version");
  if (!statement)
    return rows;
  sqlite::query q(statement.get());
  while (q.row())
    rows.push_back({q.integer(0), q.text(1), q.integer(2)});
  return rows;
}

std::string record(sqlite3* db, const protocol::migration_file& f, const char* sql) {
  auto statement = sqlite::prepare(db, sql);
  if (!statement)
    return sqlite3_errmsg(db);
  sqlite::query q(statement.get());
  q.bind(1, f.version).bind(2, f.sha256).bind(3, protocol::iso_now()).bind(4, migration_node()).bind(5, f.min_reader);
  if (!q.done())
    return sqlite3_errmsg(db);
  return {};
}

// Runs `work` in one IMMEDIATE transaction; an error rolls it back.
template <class F>
std::string in_transaction(sqlite3* db, F work) {
  if (auto err = sqlite::exec(db, "BEGIN IMMEDIATE"); !err.empty())
    return err;
  auto err = work();
  if (err.empty())
    err = sqlite::exec(db, "COMMIT");
  if (!err.empty())
    sqlite::exec(db, "ROLLBACK");
  return err;
}

} // namespace

std::string sqlite::migrate(sqlite3* db, bool dry_run, std::vector<std::string>* pending) {
  auto shipped = shipped_migrations(embedded::sqlite_migrations);
  if (auto err = std::get_if<std::string>(&shipped))
    return *err;
  auto& files = std::get<std::vector<protocol::migration_file>>(shipped);
  std::variant<protocol::migration_plan, std::string> plan;
  auto err = in_transaction(db, [&]() -> std::string {
    if (auto e = prepare_ledger(db); !e.empty())
      return e;
    plan = protocol::plan_migrations(files, applied(db));
    if (auto refused = std::get_if<std::string>(&plan))
      return *refused;
    for (auto version : std::get<protocol::migration_plan>(plan).adopt) {
      auto& f = files[static_cast<std::size_t>(version - 1)];
      if (auto e = record(db, f, "UPDATE schema_migrations SET sha256 = ?2, applied_at = ?3, node_id = ?4, "
                                 "min_reader = ?5 WHERE version = ?1");
          !e.empty())
        return e;
    }
    return {};
  });
  if (!err.empty())
    return err;
  // Each file in its own transaction, recorded with it (CJ-2).
  for (auto f : std::get<protocol::migration_plan>(plan).pending) {
    if (pending)
      pending->push_back(f->name);
    if (dry_run)
      continue;
    err = in_transaction(db, [&]() -> std::string {
      if (auto e = sqlite::exec(db, f->sql.c_str()); !e.empty())
        return e;
      return record(db, *f, "INSERT INTO schema_migrations (version, sha256, applied_at, node_id, min_reader) "
                            "VALUES (?1, ?2, ?3, ?4, ?5)");
    });
    if (!err.empty())
      return "migration " + f->name + ": " + err;
  }
  return {};
}

} // namespace troupe::io
