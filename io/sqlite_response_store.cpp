// The SQLite Responses store's actor: the port (io/response_store_port.hpp) over one connection,
// writes through the group commit, reads after it.
#include "io/sqlite_response_store.hpp"

#include "io/response_store_port.hpp"
#include "io/sqlite_support.hpp"

namespace troupe::io {

std::variant<response_store_actor, std::string> spawn_sqlite_response_store(caf::actor_system& sys,
                                                                           const std::string& path) {
  return sqlite::spawn_store<response_store_actor, response_store::responses_db<sqlite::connection>>(
    sys, path, "response store", [](auto engine, auto flush) {
      return response_store::port_behavior<sqlite::batching<response_store_actor>>(engine, flush);
    });
}

} // namespace troupe::io
