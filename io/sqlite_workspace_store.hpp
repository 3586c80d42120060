// The SQLite adapter of the workspace store port: one detached actor with its own connection.
#pragma once

#include "actors/workspace_store.hpp"

#include <caf/actor_system.hpp>

#include <string>
#include <variant>

namespace troupe::io {

// Opens (creating and migrating) the database at `path`, the file the other stores use, and spawns
// the workspace store on its own thread. An error names the file and the cause.
std::variant<workspace_store_actor, std::string> spawn_sqlite_workspace_store(caf::actor_system& sys,
                                                                             const std::string& path);

} // namespace troupe::io
