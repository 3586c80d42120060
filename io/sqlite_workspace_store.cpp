// The SQLite workspace store's actor: the port (io/workspace_store_port.hpp) over one connection,
// commands through the group commit, reads after it.
#include "io/sqlite_workspace_store.hpp"

#include "io/sqlite_support.hpp"
#include "io/workspace_store_port.hpp"

namespace troupe::io {

std::variant<workspace_store_actor, std::string> spawn_sqlite_workspace_store(caf::actor_system& sys,
                                                                             const std::string& path) {
  return sqlite::spawn_store<workspace_store_actor, workspace_store::workspace_db<sqlite::connection>>(
    sys, path, "workspace store", [](auto engine, auto flush) {
      return workspace_store::port_behavior<sqlite::batching<workspace_store_actor>>(engine, flush);
    });
}

} // namespace troupe::io
