// The PostgreSQL adapter of the Responses store port: the same operations as SQLite's
// (io/response_store_db.hpp) on a pool of connections (io/pg_pool.hpp), the run store's settings.
#pragma once

#include "actors/response_store.hpp"
#include "io/pg_store.hpp"

#include <caf/actor_system.hpp>

#include <string>
#include <variant>

namespace troupe::io {

// Connects, applies the migrations (an error is the message troupe exits 2 with, naming the store)
// and spawns the pool. `settings.audit_path` is not used: the Responses store keeps no audit copy.
std::variant<response_store_actor, std::string> spawn_pg_response_store(caf::actor_system& sys,
                                                                       const pg_store_settings& settings);

} // namespace troupe::io
