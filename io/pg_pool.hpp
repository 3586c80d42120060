// A store's pool of PostgreSQL connections (CJ-4): one detached worker actor per connection (libpqxx
// blocks), and in front of them one actor that hands the messages of the store's port to idle
// workers, up to `batch` at a time, which a worker carries out in one transaction (a group commit)
// and answers to their callers directly. Messages about one thing (the same run, the same response)
// go to one worker at a time, in the order they came, so a run's pipelined appends commit and are
// answered in order; others run side by side, at most `active` transactions at once: on a machine
// with few cores more concurrent transactions only split the same CPU into smaller commits, while
// messages held for a busy worker's next transaction share its commit. A message held `spill_after`
// takes another worker all the same, so a slow transaction (a lock wait, a long read) does not stall
// the rest. A message that finds no worker free within
// `acquire_timeout_seconds` is answered errc::unavailable ("store_unavailable", 503 with
// Retry-After: 1 at the edge).
#pragma once

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/atom.hpp>
#include <caf/message.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace troupe {
class node_metrics;
}

namespace troupe::io::pg {

// What a worker sends its pool, with its address and how many messages it answered, once they are.
using worker_idle_atom = caf::atom_constant<caf::atom("pgidle")>;
// What the pool sends its first worker every `watch_seconds`: look at the database's health.
using watch_atom = caf::atom_constant<caf::atom("pgwatch")>;

struct pool_settings {
  std::size_t size = 8;                 // cluster.pg.pool_size
  double acquire_timeout_seconds = 5;   // cluster.pg.acquire_timeout_seconds
  std::size_t batch = 64;               // messages handed to a worker at once
  std::size_t active = 0;               // cluster.pg.active_transactions (0: the cores, at least 2)
  double spill_after_seconds = 0.1;     // how long a message waits for a busy worker's next batch
  double watch_seconds = 10;            // how often a worker looks for long transactions (CJ-11)
  double long_transaction_seconds = 60; // what it warns of
  std::shared_ptr<node_metrics> metrics; // told the waits, statements and transactions (may be null)
};

// The thing a message is about ("" = nothing in particular: it may run beside anything).
using key_function = std::function<std::string(const caf::message&)>;
// Spawns one worker that reports to `pool`.
using worker_factory = std::function<caf::actor(const caf::actor& pool)>;

// The pool's front actor; cast it to the store's port. Stopping it stops its workers.
caf::actor spawn_pool(caf::actor_system& sys, pool_settings settings, key_function key_of, worker_factory make);

} // namespace troupe::io::pg
