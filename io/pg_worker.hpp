// What every PostgreSQL store worker shares (io/pg_pool.hpp): the messages a worker was handed are
// gathered while they arrive and carried out together in one transaction (a group commit), a savepoint
// each when there are several, retried as CJ-5 says; then each is answered and the pool told. `Db` is a
// store's operations over pg::connection; a worker's state holds a `worker_core<Db>` named `core`.
// Included by the PostgreSQL adapters only.
#pragma once

#include "actors/errors.hpp"
#include "io/group_commit.hpp"
#include "io/pg_pool.hpp"
#include "io/pg_session.hpp"

#include <caf/all.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include <functional>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

namespace troupe::io::pg {

// One message's work in a batch: `run` carries it out (true: keep what it wrote), `reply` answers it
// once the batch's transaction ended (`failed`: why the whole transaction did not commit; `refused`:
// an SQL error of this message alone).
template <class Db>
struct pending_op {
  std::function<bool(Db&)> run;
  std::function<void(const caf::error* failed, const caf::error* refused)> reply;
  std::optional<caf::error> refused;
};

template <class Db>
struct worker_core {
  std::unique_ptr<session> db_session;
  std::unique_ptr<Db> db;
  caf::actor pool;
  std::vector<pending_op<Db>> batch;
};

// Carries out one op of a batch. An SQL error of the op alone (a constraint, a bad value) refuses
// that op and, inside a savepoint, leaves the rest of the batch; what may succeed on another try
// (CJ-5) or a lost connection fails the whole transaction, which the session retries.
template <class Db>
bool carry_out(pending_op<Db>& op, Db& db) {
  op.refused.reset();
  try {
    return op.run(db);
  } catch (const pqxx::sql_error& e) {
    if (classify(e, false) != after_failure::fail)
      throw;
    op.refused = make_error(errc::internal, std::string("store: ") + e.what());
    return false;
  }
}

// Runs the gathered ops in one transaction, then answers each and tells the pool how many it answered
// (in that order, so answers about one thing arrive in order).
template <class Pointer>
void flush(Pointer self) {
  auto& core = self->state.core;
  auto ops = std::move(core.batch);
  core.batch.clear();
  if (ops.empty())
    return;
  auto& db = *core.db;
  using db_type = std::remove_reference_t<decltype(db)>;
  auto failed = core.db_session->transact([&](pqxx::work& tx) {
    db.attach(&tx);
    struct detach {
      db_type& attached;
      ~detach() { attached.attach(nullptr); }
    } guard{db};
    if (ops.size() == 1)
      return carry_out(ops[0], db);
    for (auto& op : ops) {
      pqxx::subtransaction savepoint(tx, "op");
      if (carry_out(op, db))
        savepoint.commit();
      else
        savepoint.abort();
    }
    return true;
  });
  for (auto& op : ops)
    op.reply(failed ? &*failed : nullptr, op.refused ? &*op.refused : nullptr);
  caf::anon_send(core.pool, worker_idle_atom::value, self->address(), static_cast<uint64_t>(ops.size()));
}

// How a store's port (its *_port.hpp) reaches PostgreSQL from a worker: gathered, then flushed.
//   write<T>(fn) / read<T>(fn): fn(db) returns std::variant<T, caf::error>, answered once committed
//   tell(fn, after): fn(db) returns nothing; after(committed) runs once the transaction ended
template <class Db, class Pointer>
struct engine {
  Pointer self;

  void enqueue(pending_op<Db> op) const {
    auto& batch = self->state.core.batch;
    if (batch.empty())
      self->send(self, flush_atom::value);
    batch.push_back(std::move(op));
  }

  template <class T, class F>
  caf::result<T> write(F fn) const {
    auto answer = self->template make_response_promise<T>();
    auto out = std::make_shared<std::variant<T, caf::error>>(caf::error{});
    enqueue({[fn = std::move(fn), out](Db& db) {
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

  // Reads join the batch too: they see every write handed over before them.
  template <class T, class F>
  caf::result<T> read(F fn) const {
    return write<T>(std::move(fn));
  }

  template <class F>
  void tell(F fn, std::function<void(bool)> after = {}) const {
    enqueue({[fn = std::move(fn)](Db& db) {
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
};

// What a worker was handed is carried out before it stops (its pool stopping stops it), so a message
// sent without waiting for its answer is not lost on shutdown.
template <class Pointer>
void flush_on_exit(Pointer self) {
  self->set_exit_handler([self](caf::exit_msg& msg) {
    flush(self);
    self->quit(msg.reason);
  });
}

// Starts a worker's core: its own session (connected at its first transaction) and its Db.
template <class Db, class... Args>
void start_core(worker_core<Db>& core, const std::string& url, const session_limits& limits, caf::actor pool,
                Args&&... db_args) {
  core.db_session = std::make_unique<session>(url, limits);
  core.db = std::make_unique<Db>(std::forward<Args>(db_args)...);
  core.pool = std::move(pool);
}

} // namespace troupe::io::pg
