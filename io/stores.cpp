#include "io/stores.hpp"

#include "io/pg_migrations.hpp"
#include "io/pg_response_store.hpp"
#include "io/pg_store.hpp"
#include "io/pg_workspace_store.hpp"
#include "io/sqlite_response_store.hpp"
#include "io/sqlite_store.hpp"
#include "io/sqlite_support.hpp"
#include "io/sqlite_workspace_store.hpp"

#include <algorithm>
#include <filesystem>

namespace troupe::io {

namespace {

pg_store_settings postgres_settings(const protocol::config& cfg, int64_t pool_size) {
  pg_store_settings s;
  s.url = cfg.postgres_url;
  s.limits.statement_timeout_seconds = cfg.postgres.statement_timeout_seconds;
  s.limits.idle_in_transaction_seconds = cfg.postgres.idle_in_transaction_seconds;
  s.limits.lock_timeout_seconds = cfg.postgres.lock_timeout_seconds;
  s.pool.size = static_cast<std::size_t>(pool_size);
  s.pool.acquire_timeout_seconds = cfg.postgres.acquire_timeout_seconds;
  return s;
}

} // namespace

std::variant<store_ports, std::string> open_stores(caf::actor_system& sys, const protocol::config& cfg) {
  auto audit_path = (std::filesystem::path(cfg.data_dir) / "audit.jsonl").string();
  std::variant<store_actor, std::string> runs;
  std::variant<response_store_actor, std::string> responses;
  std::variant<workspace_store_actor, std::string> workspaces;
  if (cfg.postgres_url.empty()) {
    runs = spawn_sqlite_store(sys, cfg.store_path, audit_path);
    responses = spawn_sqlite_response_store(sys, cfg.store_path);
    workspaces = spawn_sqlite_workspace_store(sys, cfg.store_path);
  } else {
    // The agent service's runs take the pool; the Responses and workspace stores a quarter each.
    auto side = std::max<int64_t>(2, cfg.postgres.pool_size / 4);
    auto run_settings = postgres_settings(cfg, cfg.postgres.pool_size);
    run_settings.audit_path = audit_path;
    runs = spawn_pg_store(sys, run_settings);
    responses = spawn_pg_response_store(sys, postgres_settings(cfg, side));
    workspaces = spawn_pg_workspace_store(sys, postgres_settings(cfg, side));
  }
  std::string error;
  for (auto* err : {std::get_if<std::string>(&runs), std::get_if<std::string>(&responses),
                    std::get_if<std::string>(&workspaces)})
    if (err && error.empty())
      error = *err;
  if (!error.empty())
    return error;
  return store_ports{std::get<store_actor>(runs), std::get<response_store_actor>(responses),
                     std::get<workspace_store_actor>(workspaces)};
}

std::string describe_store(const protocol::config& cfg) {
  if (cfg.postgres_url.empty())
    return "sqlite " + cfg.store_path;
  return "postgres " + redacted_url(cfg.postgres_url);
}

std::variant<std::vector<std::string>, std::string> migrate_store(const protocol::config& cfg, bool dry_run) {
  if (!cfg.postgres_url.empty()) {
    pg::session db(cfg.postgres_url, postgres_settings(cfg, 1).limits);
    auto report = pg::migrate(db, dry_run);
    if (auto err = std::get_if<std::string>(&report))
      return "store.postgres_url " + redacted_url(cfg.postgres_url) + ": " + *err;
    return std::get<pg::migration_report>(report).applied;
  }
  auto db = sqlite::open_unmigrated(cfg.store_path);
  if (auto err = std::get_if<std::string>(&db))
    return *err;
  std::vector<std::string> names;
  if (auto err = sqlite::migrate(std::get<sqlite::db_ptr>(db).get(), dry_run, &names); !err.empty())
    return "store.path " + cfg.store_path + ": " + err;
  return names;
}

} // namespace troupe::io
