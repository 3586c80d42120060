// The SQLite adapter of the job store port: one detached actor with its own connection.
#pragma once

#include "actors/job_store.hpp"

#include <caf/actor_system.hpp>

#include <string>
#include <variant>

namespace troupe::io {

// Opens (creating and migrating) the database at `path`, the file the other stores use, and spawns
// the job store on its own thread. An error names the file and the cause.
std::variant<job_store_actor, std::string> spawn_sqlite_job_store(caf::actor_system& sys, const std::string& path);

} // namespace troupe::io
