// The SQLite job store's actor: the port (io/job_store_port.hpp) over one connection, changes
// through the group commit, reads after it.
#include "io/sqlite_job_store.hpp"

#include "io/job_store_port.hpp"
#include "io/sqlite_support.hpp"

namespace troupe::io {

std::variant<job_store_actor, std::string> spawn_sqlite_job_store(caf::actor_system& sys, const std::string& path) {
  return sqlite::spawn_store<job_store_actor, job_store::job_db<sqlite::connection>>(
    sys, path, "job store", [](auto engine, auto flush) {
      return job_store::port_behavior<sqlite::batching<job_store_actor>>(engine, flush);
    });
}

} // namespace troupe::io
