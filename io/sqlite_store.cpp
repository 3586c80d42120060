// The SQLite run store's actor: the port (io/run_store_port.hpp) over one connection, writes through
// the group commit, reads after it.
#include "io/sqlite_store.hpp"

#include "io/run_store_port.hpp"
#include "io/sqlite_support.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>

namespace troupe::io {

namespace {

using store_db = run_store::store_db<sqlite::connection>;

// The port plus the store's own flush message.
using sqlite_store_actor = sqlite::batching<store_actor>;

struct store_state {
  static inline const char* name = "sqlite_store";
  std::unique_ptr<store_db> db;
  std::string path;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> audit_file{nullptr, &std::fclose}; // JSONL copy of `audit`
  sqlite::write_batch<store_db> batch;

  void flush() { batch.flush(*db, "store"); }
};

using store_pointer = sqlite_store_actor::stateful_pointer<store_state>;

// The run store's engine: the shared one, plus where the store is and the audit file.
struct run_store_engine : sqlite::engine<store_pointer> {
  const std::string& root() const { return self->state.path; }

  void append_audit_line(const std::string& line) const {
    auto f = self->state.audit_file.get();
    if (!f)
      return;
    std::fputs(line.c_str(), f);
    std::fputc('\n', f);
    std::fflush(f);
  }
};

sqlite_store_actor::behavior_type sqlite_store_behavior(store_pointer self, sqlite::db_ptr raw, std::string path,
                                                        std::string audit_path) {
  self->state.db = std::make_unique<store_db>(std::move(raw));
  self->state.path = std::move(path);
  if (!audit_path.empty()) {
    self->state.audit_file.reset(std::fopen(audit_path.c_str(), "a"));
    if (!self->state.audit_file)
      spdlog::error("store: cannot append to {}; audit records are kept in the store only", audit_path);
  }
  sqlite::flush_on_exit(self);
  return run_store::port_behavior<sqlite_store_actor>(run_store_engine{{self}},
                                                     [=](sqlite::flush_atom) { self->state.flush(); });
}

} // namespace

std::variant<store_actor, std::string> spawn_sqlite_store(caf::actor_system& sys, const std::string& path,
                                                         const std::string& audit_path) {
  auto db = sqlite::open(path);
  if (auto err = std::get_if<std::string>(&db))
    return std::move(*err);
  store_actor port = sys.spawn<caf::detached>(sqlite_store_behavior, std::get<sqlite::db_ptr>(std::move(db)), path,
                                              audit_path);
  return port;
}

} // namespace troupe::io
