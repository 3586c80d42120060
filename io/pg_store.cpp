// The PostgreSQL stores: the four ports (io/run_store_port.hpp, io/response_store_port.hpp,
// io/workspace_store_port.hpp, io/job_store_port.hpp) on each worker of one pool; a worker carries out the messages it was
// handed, whichever store they are for, in one transaction, retried as CJ-5 says.
#include "io/pg_store.hpp"

#include "io/job_store_port.hpp"
#include "io/job_store_statements.hpp"
#include "io/pg_connection.hpp"
#include "io/pg_migrations.hpp"
#include "io/pg_node_store.hpp"
#include "io/pg_worker.hpp"
#include "io/response_store_port.hpp"
#include "io/response_store_statements.hpp"
#include "io/run_store_port.hpp"
#include "io/run_store_statements.hpp"
#include "io/workspace_store_port.hpp"
#include "io/workspace_store_statements.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <mutex>
#include <regex>

namespace troupe::io {

namespace {

using runs_db = run_store::store_db<pg::connection>;
using responses_db = response_store::responses_db<pg::connection>;
using workspaces_db = workspace_store::workspace_db<pg::connection>;
using jobs_db = job_store::job_db<pg::connection>;

// The JSONL copy of the audit records, shared by the workers.
struct audit_file {
  std::mutex mutex;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file{nullptr, &std::fclose};
};

struct worker_state {
  static inline const char* name = "pg_store_worker";
  pg::worker_core core;
  std::unique_ptr<runs_db> runs;
  std::unique_ptr<responses_db> responses;
  std::unique_ptr<workspaces_db> workspaces;
  std::unique_ptr<jobs_db> jobs;
  std::string root;
  std::shared_ptr<audit_file> audit;
};

// A worker serves four typed ports, so it is dynamically typed: each port's handlers are a message
// handler, and the SQLite adapters check the same handlers against their port's type.
using worker_pointer = caf::stateful_actor<worker_state>*;
struct handlers {
  using behavior_type = caf::message_handler;
};

// The run store's engine: the shared one, plus where the store is and the audit file.
struct run_store_engine : pg::engine<runs_db, worker_pointer> {
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

caf::behavior worker_behavior(worker_pointer self, caf::actor pool, pg_store_settings settings,
                              std::shared_ptr<audit_file> audit) {
  auto& st = self->state;
  st.core.db_session = std::make_unique<pg::session>(settings.url, settings.limits);
  st.core.pool = std::move(pool);
  st.core.settings = settings.pool;
  st.runs = std::make_unique<runs_db>(store_sql::postgres_spelling);
  st.responses = std::make_unique<responses_db>(response_sql::postgres_spelling);
  st.workspaces = std::make_unique<workspaces_db>(workspace_sql::postgres_spelling);
  st.jobs = std::make_unique<jobs_db>(job_sql::postgres_spelling);
  st.core.stores = {st.runs.get(), st.responses.get(), st.workspaces.get(), st.jobs.get()};
  if (auto metrics = settings.pool.metrics)
    for (auto store : st.core.stores)
      store->time_statements([metrics](double seconds) { metrics->store_statement(seconds); });
  st.root = redacted_url(settings.url);
  st.audit = std::move(audit);
  pg::flush_on_exit(self);
  caf::message_handler own{
    [self](flush_atom) { pg::flush(self); },
    [self](pg::watch_atom) { pg::warn_of_long_transactions(self->state.core); },
  };
  // Each port answers `ping` the same way (one database): the first handler takes it.
  return own.or_else(run_store::port_behavior<handlers>(run_store_engine{{self, st.runs.get()}}))
    .or_else(response_store::port_behavior<handlers>(pg::engine<responses_db, worker_pointer>{self, st.responses.get()}))
    .or_else(
      workspace_store::port_behavior<handlers>(pg::engine<workspaces_db, worker_pointer>{self, st.workspaces.get()}))
    .or_else(job_store::port_behavior<handlers>(pg::engine<jobs_db, worker_pointer>{self, st.jobs.get()}));
}

// The node store's worker: one connection of its own, so a heartbeat never waits behind the stores'
// work (CJ-4).
struct node_worker_state {
  static inline const char* name = "pg_node_worker";
  pg::worker_core core;
  std::unique_ptr<node_store::nodes_db> nodes;
};

using node_worker_pointer = caf::stateful_actor<node_worker_state>*;

caf::behavior node_worker_behavior(node_worker_pointer self, caf::actor pool, pg_store_settings settings) {
  auto& st = self->state;
  st.core.db_session = std::make_unique<pg::session>(settings.url, settings.limits);
  st.core.pool = std::move(pool);
  st.core.settings = settings.pool;
  st.nodes = std::make_unique<node_store::nodes_db>();
  st.core.stores = {st.nodes.get()};
  pg::flush_on_exit(self);
  caf::message_handler own{
    [self](flush_atom) { pg::flush(self); },
    [](pg::watch_atom) {}, // the stores' first worker watches the database
  };
  return own.or_else(node_store::port_behavior(pg::engine<node_store::nodes_db, node_worker_pointer>{self, st.nodes.get()}));
}

// What a store message is about, so messages about one thing keep their order: a run (or the id the
// first argument names), a response or conversation, a workspace log. Writers of one conversation
// from different responses run side by side: the conversation's row lock orders them (RS-54).
std::string subject_of(const caf::message& msg) {
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
  if (msg.match_element<response_commit>(1))
    return msg.get_as<response_commit>(1).response.id;
  if (msg.match_element<conversation_row>(1))
    return msg.get_as<conversation_row>(1).id;
  const workspace_key* key = nullptr;
  if (msg.match_element<workspace_key>(1))
    key = &msg.get_as<workspace_key>(1);
  else if (msg.match_element<workspace_command>(1))
    key = &msg.get_as<workspace_command>(1).key;
  return key ? key->tenant + '\0' + key->workspace : std::string{};
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

std::variant<store_ports, std::string> spawn_pg_stores(caf::actor_system& sys, const pg_store_settings& settings) {
  {
    pg::session first(settings.url, settings.limits);
    auto migrated = pg::migrate(first);
    if (auto err = std::get_if<std::string>(&migrated))
      return "store.postgres_url " + redacted_url(settings.url) + ": " + *err;
  }
  auto audit = std::make_shared<audit_file>();
  if (!settings.audit_path.empty()) {
    audit->file.reset(std::fopen(settings.audit_path.c_str(), "a"));
    if (!audit->file)
      spdlog::error("store: cannot append to {}; audit records are kept in the store only", settings.audit_path);
  }
  auto pool = pg::spawn_pool(sys, settings.pool, subject_of, [&sys, settings, audit](const caf::actor& pool) {
    return sys.spawn<caf::detached>(worker_behavior, pool, settings, audit);
  });
  auto node_pool_settings = settings.pool;
  node_pool_settings.size = 1;
  node_pool_settings.active = 1;
  auto nodes = pg::spawn_pool(
    sys, node_pool_settings, [](const caf::message&) { return std::string{}; },
    [&sys, settings](const caf::actor& pool) { return sys.spawn<caf::detached>(node_worker_behavior, pool, settings); });
  // Stopping the stores stops the node store with them: their callers know the stores' ports only.
  caf::actor_cast<caf::abstract_actor*>(pool)->attach_functor(
    [nodes](const caf::error&) { caf::anon_send_exit(nodes, caf::exit_reason::user_shutdown); });
  return store_ports{caf::actor_cast<store_actor>(pool), caf::actor_cast<response_store_actor>(pool),
                     caf::actor_cast<workspace_store_actor>(pool), caf::actor_cast<job_store_actor>(pool),
                     caf::actor_cast<node_store_actor>(nodes)};
}

} // namespace troupe::io
