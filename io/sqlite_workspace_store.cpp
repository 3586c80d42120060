// The SQLite workspace store's actor: the port (io/workspace_store_port.hpp) over one connection,
// commands through the group commit, reads after it.
#include "io/sqlite_workspace_store.hpp"

#include "io/sqlite_support.hpp"
#include "io/workspace_store_port.hpp"

#include <memory>

namespace troupe::io {

namespace {

using workspace_db = workspace_store::workspace_db<sqlite::connection>;

struct workspace_store_state {
  static inline const char* name = "sqlite_workspace_store";
  std::unique_ptr<workspace_db> db;
  sqlite::write_batch<workspace_db> batch;

  void flush() { batch.flush(*db, "workspace store"); }
};

// The port plus the store's own flush message.
using sqlite_workspace_store_actor = sqlite::batching<workspace_store_actor>;
using workspace_store_pointer = sqlite_workspace_store_actor::stateful_pointer<workspace_store_state>;

sqlite_workspace_store_actor::behavior_type sqlite_workspace_store_behavior(workspace_store_pointer self,
                                                                            sqlite::db_ptr raw) {
  self->state.db = std::make_unique<workspace_db>(std::move(raw));
  sqlite::flush_on_exit(self);
  return workspace_store::port_behavior<sqlite_workspace_store_actor>(
    sqlite::engine<workspace_store_pointer>{self}, [=](sqlite::flush_atom) { self->state.flush(); });
}

} // namespace

std::variant<workspace_store_actor, std::string> spawn_sqlite_workspace_store(caf::actor_system& sys,
                                                                             const std::string& path) {
  auto db = sqlite::open(path);
  if (auto err = std::get_if<std::string>(&db))
    return std::move(*err);
  workspace_store_actor port = sys.spawn<caf::detached>(sqlite_workspace_store_behavior, std::get<sqlite::db_ptr>(std::move(db)));
  return port;
}

} // namespace troupe::io
