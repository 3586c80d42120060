// How a PostgreSQL store worker (io/pg_pool.hpp) carries out what it was handed: the messages are
// gathered while they arrive and carried out together in one transaction (a group commit), a savepoint
// each when there are several, retried as CJ-5 says; then each is answered and the pool told. A
// worker's state holds a `worker_core` named `core`; each store's operations (a `Db` over
// pg::connection) reach it through an `engine`. Included by the PostgreSQL adapter only.
#pragma once

#include "actors/errors.hpp"
#include "actors/metrics.hpp"
#include "io/group_commit.hpp"
#include "io/pg_connection.hpp"
#include "io/pg_pool.hpp"
#include "io/pg_session.hpp"

#include <caf/all.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

namespace troupe::io::pg {

// One message's work in a batch: `run` carries it out (true: keep what it wrote), `reply` answers it
// once the batch's transaction ended (`failed`: why the whole transaction did not commit; `refused`:
// an SQL error of this message alone).
struct pending_op {
  std::function<bool()> run;
  std::function<void(const caf::error* failed, const caf::error* refused)> reply;
  std::optional<caf::error> refused;
};

struct worker_core {
  std::unique_ptr<session> db_session;
  caf::actor pool;
  pool_settings settings;
  std::vector<pending_op> batch;
  std::vector<connection*> stores; // each store's operations; attached to every transaction
  std::chrono::steady_clock::time_point clock_read{}; // when the database's clock was last read
};

// CJ-20: the stores keep time by the database's clock. Its offset from this process's clock is read
// again every second, in a transaction already under way, so a step of either clock (or a node whose
// clock is simply wrong) shifts no lease for longer than that.
inline void read_clock_when_due(worker_core& core, pqxx::work& tx) {
  using namespace std::chrono;
  auto due = steady_clock::now();
  if (due - core.clock_read < seconds(1))
    return;
  auto before = system_clock::now();
  auto db_seconds = tx.exec1("SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8")[0].as<double>();
  auto after = system_clock::now();
  auto db_time = system_clock::time_point(duration_cast<system_clock::duration>(duration<double>(db_seconds)));
  for (auto c : core.stores)
    c->set_clock_offset(db_time - (before + (after - before) / 2));
  core.clock_read = due;
}

// Carries out one op of a batch. An SQL error of the op alone (a constraint, a bad value) refuses
// that op and, inside a savepoint, leaves the rest of the batch; what may succeed on another try
// (CJ-5) or a lost connection fails the whole transaction, which the session retries.
inline bool carry_out(pending_op& op) {
  op.refused.reset();
  try {
    return op.run();
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
  auto started = std::chrono::steady_clock::now();
  // Several messages run without savepoints first, since a savepoint costs two round trips each;
  // should one be refused (an error answer, or an SQL error of its own) that transaction is rolled
  // back and the batch runs again with a savepoint each, so the refusal leaves nothing of its own and
  // the rest stays.
  bool refused = false;
  auto run_batch = [&](bool savepoints) {
    return core.db_session->transact([&](pqxx::work& tx) {
      struct attachment {
        std::vector<connection*>& stores;
        explicit attachment(std::vector<connection*>& s, pqxx::work& tx) : stores(s) {
          for (auto c : stores)
            c->attach(&tx);
        }
        ~attachment() {
          for (auto c : stores)
            c->attach(nullptr);
        }
      } attached(core.stores, tx);
      read_clock_when_due(core, tx);
      if (ops.size() == 1)
        return carry_out(ops[0]);
      if (!savepoints) {
        for (auto& op : ops) {
          if (!carry_out(op)) {
            refused = true;
            return false; // rolled back: the batch runs again with savepoints
          }
        }
        return true;
      }
      for (auto& op : ops) {
        pqxx::subtransaction savepoint(tx, "op");
        if (carry_out(op))
          savepoint.commit();
        else
          savepoint.abort();
      }
      return true;
    });
  };
  auto failed = run_batch(false);
  if (!failed && refused)
    failed = run_batch(true);
  if (auto& metrics = core.settings.metrics)
    metrics->store_transaction(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
                               ops.size(), core.db_session->last_tries());
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
  Db* db; // owned by the worker's state, attached by flush()

  void enqueue(pending_op op) const {
    auto& batch = self->state.core.batch;
    if (batch.empty())
      self->send(self, flush_atom::value);
    batch.push_back(std::move(op));
  }

  template <class T, class F>
  caf::result<T> write(F fn) const {
    auto answer = self->template make_response_promise<T>();
    auto out = std::make_shared<std::variant<T, caf::error>>(caf::error{});
    enqueue({[fn = std::move(fn), out, db = db] {
               *out = fn(*db);
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
    enqueue({[fn = std::move(fn), db = db] {
               fn(*db);
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

// Warns of the transactions open on the database longer than the pool allows: they hold back vacuum
// (CJ-11). Often not troupe's own: its sessions' timeouts end theirs sooner.
inline void warn_of_long_transactions(worker_core& core) {
  auto found = long_transactions(*core.db_session, core.settings.long_transaction_seconds);
  if (auto list = std::get_if<std::vector<open_transaction>>(&found))
    for (auto& t : *list)
      spdlog::warn("store: a transaction on the database has been open {:.0f} s (pid {}, application '{}', {}); "
                   "it holds back vacuum",
                   t.age_seconds, t.pid, t.application, t.state);
}

// What a worker was handed is carried out before it stops (its pool stopping stops it), so a message
// sent without waiting for its answer is not lost on shutdown.
template <class Pointer>
void flush_on_exit(Pointer self) {
  self->set_exit_handler([self](caf::exit_msg& msg) {
    flush(self);
    self->quit(msg.reason);
  });
}


} // namespace troupe::io::pg
