// The SQLite adapter of the Responses gateway's store port: one detached actor with its own connection.
#pragma once

#include "actors/response_store.hpp"

#include <caf/actor_system.hpp>

#include <string>
#include <variant>

namespace troupe::io {

// Opens (creating and migrating) the database at `path`, the file the run store uses, and spawns the
// Responses store on its own thread, so SQLite never blocks a scheduler thread. An error names the
// file and the cause.
std::variant<response_store_actor, std::string> spawn_sqlite_response_store(caf::actor_system& sys,
                                                                           const std::string& path);

} // namespace troupe::io
