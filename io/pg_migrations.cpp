#include "io/pg_migrations.hpp"

#include "actors/errors.hpp"
#include "io/migration_files.hpp"

#include <pqxx/pqxx>

namespace troupe::io::pg {

namespace {

// The key of the migration advisory lock: "troupe" in ASCII.
constexpr const char* lock_migrations = "SELECT pg_advisory_xact_lock(116114111117112101)";

constexpr const char* ledger = R"sql(
  CREATE TABLE IF NOT EXISTS schema_migrations (
    version    bigint PRIMARY KEY,
    sha256     text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    node_id    text NOT NULL,
    min_reader bigint NOT NULL DEFAULT 0
  ))sql";

std::vector<protocol::applied_migration> applied(pqxx::transaction_base& tx) {
  std::vector<protocol::applied_migration> rows;
  for (auto row : tx.exec("SELECT version, sha256, min_reader FROM schema_migrations ORDER BY version"))
    rows.push_back({row[0].as<int64_t>(), row[1].as<std::string>(), row[2].as<int64_t>()});
  return rows;
}

// The plan as the database stands now, under the lock.
std::variant<protocol::migration_plan, std::string> plan(pqxx::transaction_base& tx,
                                                         const std::vector<protocol::migration_file>& files) {
  tx.exec(lock_migrations);
  tx.exec(ledger);
  return protocol::plan_migrations(files, applied(tx));
}

} // namespace

std::variant<migration_report, std::string> migrate(session& db, bool dry_run) {
  auto shipped = shipped_migrations(embedded::postgres_migrations);
  if (auto err = std::get_if<std::string>(&shipped))
    return *err;
  auto& files = std::get<std::vector<protocol::migration_file>>(shipped);
  migration_report report;
  std::string refused;
  std::vector<const protocol::migration_file*> pending;
  auto err = db.transact([&](pqxx::work& tx) {
    auto p = plan(tx, files);
    if (auto why = std::get_if<std::string>(&p)) {
      refused = *why;
      return false;
    }
    pending = std::get<protocol::migration_plan>(p).pending;
    return true;
  });
  if (err)
    return "store.postgres_url: " + message_of(*err);
  if (!refused.empty())
    return refused;
  report.version = static_cast<int64_t>(files.size()) - static_cast<int64_t>(pending.size());
  for (auto f : pending) {
    report.applied.push_back(f->name);
    if (dry_run)
      continue;
    // Each file in its own transaction, under the lock; one another node applied meanwhile is skipped.
    err = db.transact([&](pqxx::work& tx) {
      auto p = plan(tx, files);
      auto still = std::get_if<protocol::migration_plan>(&p);
      if (!still || still->pending.empty() || still->pending.front() != f)
        return false;
      tx.exec(f->sql);
      tx.exec_params("INSERT INTO schema_migrations (version, sha256, node_id, min_reader) VALUES ($1, $2, $3, $4)",
                     f->version, f->sha256, migration_node(), f->min_reader);
      return true;
    });
    if (err)
      return "migration " + f->name + ": " + message_of(*err);
  }
  if (!dry_run)
    report.version = static_cast<int64_t>(files.size());
  return report;
}

} // namespace troupe::io::pg
