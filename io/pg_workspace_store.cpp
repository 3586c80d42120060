// The PostgreSQL workspace store: the port (io/workspace_store_port.hpp) on each worker of a pool; a
// worker carries out the messages it was handed in one transaction, retried as CJ-5 says. Messages
// about one log go to one worker at a time, in order; commands on other nodes wait on the log's head
// row (CJ-9).
#include "io/pg_workspace_store.hpp"

#include "io/pg_connection.hpp"
#include "io/pg_worker.hpp"
#include "io/workspace_store_port.hpp"
#include "io/workspace_store_statements.hpp"

namespace troupe::io {

namespace {

using workspace_db = workspace_store::workspace_db<pg::connection>;

// The port plus the worker's own flush message.
using worker_actor = batching<workspace_store_actor>;

struct worker_state {
  static inline const char* name = "pg_workspace_store_worker";
  pg::worker_core<workspace_db> core;
};

using worker_pointer = worker_actor::stateful_pointer<worker_state>;

worker_actor::behavior_type worker_behavior(worker_pointer self, caf::actor pool, pg_store_settings settings) {
  pg::start_core(self->state.core, settings.url, settings.limits, std::move(pool), workspace_sql::postgres_spelling);
  pg::flush_on_exit(self);
  return workspace_store::port_behavior<worker_actor>(pg::engine<workspace_db, worker_pointer>{self},
                                                      [self](flush_atom) { pg::flush(self); });
}

// What a workspace store message is about: its log (tenant and workspace), so one log's messages keep
// their order; a prune is about nothing in particular.
std::string workspace_key_of(const caf::message& msg) {
  const workspace_key* key = nullptr;
  if (msg.size() >= 2 && msg.match_element<workspace_key>(1))
    key = &msg.get_as<workspace_key>(1);
  else if (msg.size() >= 2 && msg.match_element<workspace_command>(1))
    key = &msg.get_as<workspace_command>(1).key;
  if (!key)
    return {};
  return key->tenant + '\0' + key->workspace;
}

} // namespace

std::variant<workspace_store_actor, std::string> spawn_pg_workspace_store(caf::actor_system& sys,
                                                                         const pg_store_settings& settings) {
  auto pool = start_pg_pool(sys, settings, workspace_key_of, [&sys, settings](const caf::actor& pool) {
    return caf::actor_cast<caf::actor>(sys.spawn<caf::detached>(worker_behavior, pool, settings));
  });
  if (auto err = std::get_if<std::string>(&pool))
    return std::move(*err);
  return caf::actor_cast<workspace_store_actor>(std::get<caf::actor>(pool));
}

} // namespace troupe::io
