// The SQLite Responses store's actor: the port (io/response_store_port.hpp) over one connection,
// writes through the group commit, reads after it.
#include "io/sqlite_response_store.hpp"

#include "io/response_store_port.hpp"
#include "io/sqlite_support.hpp"

#include <memory>

namespace troupe::io {

namespace {

using responses_db = response_store::responses_db<sqlite::connection>;

// The port plus the store's own flush message.
using sqlite_response_store_actor = sqlite::batching<response_store_actor>;

struct response_store_state {
  static inline const char* name = "sqlite_response_store";
  std::unique_ptr<responses_db> db;
  sqlite::write_batch<responses_db> batch;

  void flush() { batch.flush(*db, "response store"); }
};

using response_store_pointer = sqlite_response_store_actor::stateful_pointer<response_store_state>;

sqlite_response_store_actor::behavior_type sqlite_response_store_behavior(response_store_pointer self,
                                                                          sqlite::db_ptr raw) {
  self->state.db = std::make_unique<responses_db>(std::move(raw));
  sqlite::flush_on_exit(self);
  return response_store::port_behavior<sqlite_response_store_actor>(
    sqlite::engine<response_store_pointer>{self}, [=](sqlite::flush_atom) { self->state.flush(); });
}

} // namespace

std::variant<response_store_actor, std::string> spawn_sqlite_response_store(caf::actor_system& sys,
                                                                           const std::string& path) {
  auto db = sqlite::open(path);
  if (auto err = std::get_if<std::string>(&db))
    return std::move(*err);
  response_store_actor port =
    sys.spawn<caf::detached>(sqlite_response_store_behavior, std::get<sqlite::db_ptr>(std::move(db)));
  return port;
}

} // namespace troupe::io
