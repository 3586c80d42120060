// The PostgreSQL run store: the port (io/run_store_port.hpp) on each worker of a pool; a worker
// carries out the messages it was handed in one transaction, retried as CJ-5 says.
#include "io/pg_store.hpp"

#include "io/group_commit.hpp"
#include "io/pg_connection.hpp"
#include "io/pg_migrations.hpp"
#include "io/run_store_port.hpp"
#include "io/run_store_statements.hpp"

#include <caf/all.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <mutex>

namespace troupe::io {

namespace {

using store_db = run_store::store_db<pg::connection>;

// The JSONL copy of the audit records, shared by the workers.
struct audit_file {
  std::mutex mutex;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file{nullptr, &std::fclose};
};

// One message's work in a batch: `run` carries it out (true: keep what it wrote), `reply` answers it
// once the batch's transaction ended (`failed`: why the whole transaction did not commit).
struct pending_op {
  std::function<bool(store_db&)> run;
  std::function<void(const caf::error* failed, const caf::error* refused)> reply;
  std::optional<caf::error> refused; // an SQL error of this message alone
};

// The port plus the worker's own flush message.
using worker_actor = batching<store_actor>;

struct worker_state {
  static inline const char* name = "pg_store_worker";
  std::unique_ptr<pg::session> session;
  std::unique_ptr<store_db> db;
  caf::actor pool;
  std::string root;
  std::shared_ptr<audit_file> audit;
  std::vector<pending_op> batch;
};

using worker_pointer = worker_actor::stateful_pointer<worker_state>;

// Carries out one op of a batch. An SQL error of the op alone (a constraint, a bad value) refuses
// that op and, inside a savepoint, leaves the rest of the batch; what may succeed on another try
// (CJ-5) or a lost connection fails the whole transaction, which the session retries.
bool carry_out(pending_op& op, store_db& db) {
  try {
    return op.run(db);
  } catch (const pqxx::sql_error& e) {
    if (pg::classify(e, false) != pg::after_failure::fail)
      throw;
    op.refused = make_error(errc::internal, std::string("store: ") + e.what());
    return false;
  }
}

// Runs the gathered ops in one transaction, a savepoint each when there are several, then answers
// each and tells the pool how many it answered (in that order, so answers about one thing arrive in
// order).
void flush(worker_pointer self) {
  auto& st = self->state;
  auto ops = std::move(st.batch);
  st.batch.clear();
  if (ops.empty())
    return;
  auto failed = st.session->transact([&](pqxx::work& tx) {
    st.db->attach(&tx);
    struct detach {
      store_db& db;
      ~detach() { db.attach(nullptr); }
    } guard{*st.db};
    if (ops.size() == 1) {
      ops[0].refused.reset();
      return carry_out(ops[0], *st.db);
    }
    for (auto& op : ops) {
      op.refused.reset();
      pqxx::subtransaction savepoint(tx, "op");
      if (carry_out(op, *st.db))
        savepoint.commit();
      else
        savepoint.abort();
    }
    return true;
  });
  for (auto& op : ops)
    op.reply(failed ? &*failed : nullptr, op.refused ? &*op.refused : nullptr);
  caf::anon_send(st.pool, pg::worker_idle_atom::value, self->address(), static_cast<uint64_t>(ops.size()));
}

// How the port's operations reach PostgreSQL: gathered while the pool hands them over, then carried
// out together by flush().
struct pg_engine {
  worker_pointer self;

  void enqueue(pending_op op) const {
    if (self->state.batch.empty())
      self->send(self, flush_atom::value);
    self->state.batch.push_back(std::move(op));
  }

  template <class T, class F>
  caf::result<T> write(F fn) const {
    auto answer = self->template make_response_promise<T>();
    auto out = std::make_shared<run_store::outcome<T>>(caf::error{});
    enqueue({[fn = std::move(fn), out](store_db& db) {
               *out = fn(db);
               return std::holds_alternative<T>(*out);
             },
             [answer, out](const caf::error* failed, const caf::error* refused) mutable {
               if (failed || refused)
                 answer.deliver(failed ? *failed : *refused);
               else if (auto value = std::get_if<T>(out.get()))
                 answer.deliver(std::move(*value));
               else
                 answer.deliver(std::get<caf::error>(*out));
             },
             {}});
    return answer;
  }

  template <class T, class F>
  caf::result<T> read(F fn) const {
    return write<T>(std::move(fn));
  }

  template <class F>
  void tell(F fn, std::function<void(bool)> after = {}) const {
    enqueue({[fn = std::move(fn)](store_db& db) {
               fn(db);
               return true;
             },
             [after](const caf::error* failed, const caf::error* refused) {
               if (failed || refused)
                 spdlog::error("store: a write was lost: {}", message_of(failed ? *failed : *refused));
               if (after)
                 after(!failed && !refused);
             },
             {}});
  }

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
  auto& st = self->state;
  st.session = std::make_unique<pg::session>(settings.url, settings.limits);
  st.db = std::make_unique<store_db>(store_sql::postgres_spelling);
  st.pool = std::move(pool);
  st.root = redacted_url(settings.url);
  st.audit = std::move(audit);
  return run_store::port_behavior<worker_actor>(pg_engine{self}, [self](flush_atom) { flush(self); });
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
  // postgresql://user:secret@host/db → postgresql://user@host/db
  auto scheme = url.find("://");
  auto at = url.find('@');
  if (scheme == std::string::npos || at == std::string::npos || at < scheme)
    return url;
  auto colon = url.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at)
    return url;
  return url.substr(0, colon) + url.substr(at);
}

std::variant<store_actor, std::string> spawn_pg_store(caf::actor_system& sys, const pg_store_settings& settings) {
  pg::session first(settings.url, settings.limits);
  auto migrated = pg::migrate(first);
  if (auto err = std::get_if<std::string>(&migrated))
    return "store.postgres_url " + redacted_url(settings.url) + ": " + *err;
  auto audit = std::make_shared<audit_file>();
  if (!settings.audit_path.empty()) {
    audit->file.reset(std::fopen(settings.audit_path.c_str(), "a"));
    if (!audit->file)
      spdlog::error("store: cannot append to {}; audit records are kept in the store only", settings.audit_path);
  }
  auto pool = pg::spawn_pool(sys, settings.pool, run_store_key, [&sys, settings, audit](const caf::actor& pool) {
    return caf::actor_cast<caf::actor>(sys.spawn<caf::detached>(worker_behavior, pool, settings, audit));
  });
  return caf::actor_cast<store_actor>(pool);
}

} // namespace troupe::io
