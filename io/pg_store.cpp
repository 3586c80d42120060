// The PostgreSQL run store: the port (io/run_store_port.hpp) on each worker of a pool; a worker
// carries out the messages it was handed in one transaction, retried as CJ-5 says.
#include "io/pg_store.hpp"

#include "io/pg_connection.hpp"
#include "io/pg_migrations.hpp"
#include "io/pg_worker.hpp"
#include "io/run_store_port.hpp"
#include "io/run_store_statements.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <mutex>
#include <regex>

namespace troupe::io {

namespace {

using store_db = run_store::store_db<pg::connection>;

// The JSONL copy of the audit records, shared by the workers.
struct audit_file {
  std::mutex mutex;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file{nullptr, &std::fclose};
};

// The port plus the worker's own flush message.
using worker_actor = batching<store_actor>;

struct worker_state {
  static inline const char* name = "pg_store_worker";
  pg::worker_core<store_db> core;
  std::string root;
  std::shared_ptr<audit_file> audit;
};

using worker_pointer = worker_actor::stateful_pointer<worker_state>;

// The run store's engine: the shared one, plus where the store is and the audit file.
struct run_store_engine : pg::engine<store_db, worker_pointer> {
  const std::string& root() const { return self->state.root; }

  void append_audit_line(const std::string& line) const {
    auto& audit = self->state.audit;
    if (!audit || !audit->file)
      return;
    std::lock_guard<std::mutex> hold(audit->mutex);
    std::fputs(line.c_str(), audit->file.get());
    std::fputc('\n', audit->file.get());
    std::fflush(audit->file.get());
  }
};

worker_actor::behavior_type worker_behavior(worker_pointer self, caf::actor pool, pg_store_settings settings,
                                            std::shared_ptr<audit_file> audit) {
  pg::start_core(self->state.core, settings.url, settings.limits, std::move(pool), store_sql::postgres_spelling);
  self->state.root = redacted_url(settings.url);
  self->state.audit = std::move(audit);
  pg::flush_on_exit(self);
  return run_store::port_behavior<worker_actor>(run_store_engine{{self}}, [self](flush_atom) { pg::flush(self); });
}

// What a run store message is about: its run (or the id its first argument names), so one run's
// messages keep their order.
std::string run_store_key(const caf::message& msg) {
  if (msg.size() < 2)
    return {};
  if (msg.match_element<std::string>(1))
    return msg.get_as<std::string>(1);
  if (msg.match_element<run_record>(1))
    return msg.get_as<run_record>(1).run_id;
  if (msg.match_element<run_transition>(1))
    return msg.get_as<run_transition>(1).run_id;
  if (msg.match_element<protocol::approval_record>(1))
    return msg.get_as<protocol::approval_record>(1).request_id;
  return {};
}

} // namespace

std::string redacted_url(const std::string& url) {
  auto scheme = url.find("://");
  if (scheme == std::string::npos) {
    // key=value form: host=db password='s e c' → host=db password=***
    static const std::regex password(R"(password\s*=\s*('([^'\\]|\\.)*'|\S+))", std::regex::icase);
    return std::regex_replace(url, password, "password=***");
  }
  // postgresql://user:secret@host/db?sslmode=x&password=y → postgresql://user@host/db (the query may
  // carry a password too, and says nothing an operator needs in a log line)
  auto out = url.substr(0, url.find('?'));
  auto at = out.find('@');
  auto colon = out.find(':', scheme + 3);
  if (at != std::string::npos && colon != std::string::npos && colon < at)
    out.erase(colon, at - colon);
  return out;
}

std::variant<caf::actor, std::string> start_pg_pool(caf::actor_system& sys, const pg_store_settings& settings,
                                                    pg::key_function key_of, pg::worker_factory make) {
  pg::session first(settings.url, settings.limits);
  auto migrated = pg::migrate(first);
  if (auto err = std::get_if<std::string>(&migrated))
    return "store.postgres_url " + redacted_url(settings.url) + ": " + *err;
  return pg::spawn_pool(sys, settings.pool, std::move(key_of), std::move(make));
}

std::variant<store_actor, std::string> spawn_pg_store(caf::actor_system& sys, const pg_store_settings& settings) {
  auto audit = std::make_shared<audit_file>();
  if (!settings.audit_path.empty()) {
    audit->file.reset(std::fopen(settings.audit_path.c_str(), "a"));
    if (!audit->file)
      spdlog::error("store: cannot append to {}; audit records are kept in the store only", settings.audit_path);
  }
  auto pool = start_pg_pool(sys, settings, run_store_key, [&sys, settings, audit](const caf::actor& pool) {
    return caf::actor_cast<caf::actor>(sys.spawn<caf::detached>(worker_behavior, pool, settings, audit));
  });
  if (auto err = std::get_if<std::string>(&pool))
    return std::move(*err);
  return caf::actor_cast<store_actor>(std::get<caf::actor>(pool));
}

} // namespace troupe::io
