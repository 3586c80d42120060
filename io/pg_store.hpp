// The PostgreSQL adapter of the run store port (CJ-1): the same operations as SQLite's
// (io/run_store_db.hpp), each in its own transaction on a pool of connections (io/pg_pool.hpp).
#pragma once

#include "actors/store.hpp"
#include "io/pg_pool.hpp"
#include "io/pg_session.hpp"

#include <caf/actor_system.hpp>

#include <memory>
#include <string>
#include <variant>

namespace troupe::io {

struct pg_store_settings {
  std::string url;            // store.postgres_url
  pg::session_limits limits;  // cluster.pg.*
  pg::pool_settings pool;
  std::string audit_path;     // the JSONL copy of the audit records ("" = none)
};

// The URL (or key=value connection string) without its password, as logs and the counts show it.
std::string redacted_url(const std::string& url);

// What every PostgreSQL store does to start: applies the migrations, then spawns its pool of workers.
// An error is the message troupe exits 2 with, naming the store.
std::variant<caf::actor, std::string> start_pg_pool(caf::actor_system& sys, const pg_store_settings& settings,
                                                    pg::key_function key_of, pg::worker_factory make);

// The run store: connects, applies the migrations and spawns the pool.
std::variant<store_actor, std::string> spawn_pg_store(caf::actor_system& sys, const pg_store_settings& settings);

} // namespace troupe::io
