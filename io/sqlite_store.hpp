// The SQLite adapter of the store port: one detached actor that owns the database connection.
#pragma once

#include "actors/store.hpp"

#include <caf/actor_system.hpp>

#include <string>
#include <variant>

namespace troupe::io {

// Opens (creating and migrating) the database at `path` and spawns the store actor on its own
// thread, so SQLite never blocks a scheduler thread. An error names the file and the cause. Audit
// records are also appended, once committed, as JSON lines to `audit_path` (when not empty).
std::variant<store_actor, std::string> spawn_sqlite_store(caf::actor_system& sys, const std::string& path,
                                                         const std::string& audit_path = {});

} // namespace troupe::io
