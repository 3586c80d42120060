// The PostgreSQL Responses store: the port (io/response_store_port.hpp) on each worker of a pool; a
// worker carries out the messages it was handed in one transaction, retried as CJ-5 says.
#include "io/pg_response_store.hpp"

#include "io/pg_connection.hpp"
#include "io/pg_worker.hpp"
#include "io/response_store_port.hpp"
#include "io/response_store_statements.hpp"

namespace troupe::io {

namespace {

using responses_db = response_store::responses_db<pg::connection>;

// The port plus the worker's own flush message.
using worker_actor = batching<response_store_actor>;

struct worker_state {
  static inline const char* name = "pg_response_store_worker";
  pg::worker_core<responses_db> core;
};

using worker_pointer = worker_actor::stateful_pointer<worker_state>;

worker_actor::behavior_type worker_behavior(worker_pointer self, caf::actor pool, pg_store_settings settings) {
  pg::start_core(self->state.core, settings.url, settings.limits, std::move(pool), response_sql::postgres_spelling);
  pg::flush_on_exit(self);
  return response_store::port_behavior<worker_actor>(pg::engine<responses_db, worker_pointer>{self},
                                                    [self](flush_atom) { pg::flush(self); });
}

// What a Responses store message is about: its response or conversation (the id its first argument
// names, or the response a commit writes, or the conversation a create makes), so one response's
// messages and one conversation's keep their order. Writers of one conversation from different
// responses run side by side: the conversation's row lock orders them (RS-54).
std::string response_store_key(const caf::message& msg) {
  if (msg.size() < 2)
    return {};
  if (msg.match_element<std::string>(1))
    return msg.get_as<std::string>(1);
  if (msg.match_element<response_commit>(1))
    return msg.get_as<response_commit>(1).response.id;
  if (msg.match_element<conversation_row>(1))
    return msg.get_as<conversation_row>(1).id;
  return {};
}

} // namespace

std::variant<response_store_actor, std::string> spawn_pg_response_store(caf::actor_system& sys,
                                                                       const pg_store_settings& settings) {
  auto pool = start_pg_pool(sys, settings, response_store_key, [&sys, settings](const caf::actor& pool) {
    return caf::actor_cast<caf::actor>(sys.spawn<caf::detached>(worker_behavior, pool, settings));
  });
  if (auto err = std::get_if<std::string>(&pool))
    return std::move(*err);
  return caf::actor_cast<response_store_actor>(std::get<caf::actor>(pool));
}

} // namespace troupe::io
