// The PostgreSQL adapter of the workspace store port (CJ-1, CJ-9): the same operations as SQLite's
// (io/workspace_store_db.hpp) on a pool of connections (io/pg_pool.hpp).
#pragma once

#include "actors/workspace_store.hpp"
#include "io/pg_store.hpp"

#include <caf/actor_system.hpp>

#include <string>
#include <variant>

namespace troupe::io {

// Connects, applies the migrations (an error is the message troupe exits 2 with, naming the store)
// and spawns the pool. The audit path of `settings` is not used: workspaces keep no audit copy.
std::variant<workspace_store_actor, std::string> spawn_pg_workspace_store(caf::actor_system& sys,
                                                                         const pg_store_settings& settings);

} // namespace troupe::io
