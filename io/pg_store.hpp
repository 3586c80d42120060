// The PostgreSQL adapter of troupe's three store ports (CJ-1): the same operations as SQLite's
// (io/run_store_db.hpp, io/response_store_db.hpp, io/workspace_store_db.hpp) on one pool of
// `cluster.pg.pool_size` connections (CJ-4, io/pg_pool.hpp), which each worker lends to all three.
#pragma once

#include "io/pg_pool.hpp"
#include "io/pg_session.hpp"
#include "io/stores.hpp"

#include <caf/actor_system.hpp>

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

// Connects, applies the migrations and spawns the pool; the three ports are its front actor. Stopping
// any of them stops the pool, after it carried out what it was sent. An error is the message troupe
// exits 2 with.
std::variant<store_ports, std::string> spawn_pg_stores(caf::actor_system& sys, const pg_store_settings& settings);

} // namespace troupe::io
