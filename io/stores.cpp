#include "io/stores.hpp"

#include "io/pg_migrations.hpp"
#include "io/pg_store.hpp"
#include "io/pg_wakeups.hpp"
#include "io/sqlite_job_store.hpp"
#include "io/sqlite_response_store.hpp"
#include "io/sqlite_store.hpp"
#include "io/sqlite_support.hpp"
#include "io/sqlite_workspace_store.hpp"

#include <filesystem>

namespace troupe::io {

namespace {

pg_store_settings postgres_settings(const protocol::config& cfg) {
  pg_store_settings s;
  s.url = cfg.postgres_url;
  s.limits.statement_timeout_seconds = cfg.postgres.statement_timeout_seconds;
  s.limits.idle_in_transaction_seconds = cfg.postgres.idle_in_transaction_seconds;
  s.limits.lock_timeout_seconds = cfg.postgres.lock_timeout_seconds;
  s.pool.size = static_cast<std::size_t>(cfg.postgres.pool_size);
  s.pool.active = static_cast<std::size_t>(cfg.postgres.active_transactions);
  s.pool.acquire_timeout_seconds = cfg.postgres.acquire_timeout_seconds;
  return s;
}

} // namespace

notifier_actor spawn_wakeup_notifier(caf::actor_system& sys, const protocol::config& cfg) {
  return spawn_pg_notifier(sys, cfg.postgres_url, postgres_settings(cfg).limits, cfg.cluster.notify_coalesce_seconds);
}

std::shared_ptr<pg_listener> listen_for_wakeups(const protocol::config& cfg,
                                                std::function<void(const std::string&, const std::string&)> wake) {
  return std::make_shared<pg_listener>(cfg.postgres_url, postgres_settings(cfg).limits,
                                       std::vector<std::string>{work_channel, workspace_channel, approval_channel, jobs_channel},
                                       cfg.cluster.poll_interval_seconds, std::move(wake));
}

std::variant<store_ports, std::string> open_stores(caf::actor_system& sys, const protocol::config& cfg,
                                                   std::shared_ptr<node_metrics> metrics) {
  auto audit_path = (std::filesystem::path(cfg.data_dir) / "audit.jsonl").string();
  if (!cfg.postgres_url.empty()) {
    auto settings = postgres_settings(cfg);
    settings.audit_path = audit_path;
    settings.pool.metrics = std::move(metrics);
    return spawn_pg_stores(sys, settings);
  }
  auto runs = spawn_sqlite_store(sys, cfg.store_path, audit_path);
  auto responses = spawn_sqlite_response_store(sys, cfg.store_path);
  auto workspaces = spawn_sqlite_workspace_store(sys, cfg.store_path);
  auto jobs = spawn_sqlite_job_store(sys, cfg.store_path);
  for (auto* err : {std::get_if<std::string>(&runs), std::get_if<std::string>(&responses),
                    std::get_if<std::string>(&workspaces), std::get_if<std::string>(&jobs)})
    if (err)
      return *err;
  return store_ports{std::get<store_actor>(runs), std::get<response_store_actor>(responses),
                     std::get<workspace_store_actor>(workspaces), std::get<job_store_actor>(jobs), {}};
}

std::string describe_store(const protocol::config& cfg) {
  if (cfg.postgres_url.empty())
    return "sqlite " + cfg.store_path;
  return "postgres " + redacted_url(cfg.postgres_url);
}

std::variant<std::vector<std::string>, std::string> migrate_store(const protocol::config& cfg, bool dry_run) {
  if (!cfg.postgres_url.empty()) {
    pg::session db(cfg.postgres_url, postgres_settings(cfg).limits);
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
