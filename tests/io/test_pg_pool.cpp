// The PostgreSQL pool's dispatch (io/pg_pool.hpp), with workers that hold what they are handed until
// the test lets them answer: how many transactions run at once, and when a held message takes another
// connection. No database is needed: a worker here stands for one connection.
#include "io/pg_pool.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <set>
#include <string>
#include <vector>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

using got_atom = caf::atom_constant<caf::atom("got")>;
using answer_atom = caf::atom_constant<caf::atom("answer")>;

struct held_state {
  std::vector<caf::response_promise> held;
};

// A connection: reports each message it is handed to `observer` as (got, worker index, n) and answers
// them all once told `answer`, then tells its pool, as a real worker does after its commit.
caf::behavior held_worker(caf::stateful_actor<held_state>* self, caf::actor pool, caf::actor observer, int index) {
  return {
    [=](int n) -> caf::result<int> {
      self->send(observer, got_atom::value, index, n);
      self->state.held.push_back(self->make_response_promise());
      return caf::delegated<int>{};
    },
    [=](answer_atom) {
      auto held = std::move(self->state.held);
      self->state.held.clear();
      for (auto& p : held)
        p.deliver(index);
      self->send(pool, io::pg::worker_idle_atom::value, self->address(), static_cast<uint64_t>(held.size()));
    },
  };
}

struct pool_fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::vector<caf::actor> workers;
  caf::actor pool;

  pool_fixture(std::size_t size, std::size_t active, double spill_after_seconds) {
    io::pg::pool_settings settings;
    settings.size = size;
    settings.active = active;
    settings.spill_after_seconds = spill_after_seconds;
    pool = io::pg::spawn_pool(
      sys, settings, [](const caf::message& m) { return std::to_string(m.get_as<int>(0)); },
      [this](const caf::actor& p) {
        auto w = sys.spawn(held_worker, p, caf::actor{self}, static_cast<int>(workers.size()));
        workers.push_back(w);
        return w;
      });
  }

  ~pool_fixture() { self->send_exit(pool, caf::exit_reason::user_shutdown); }

  // The next (worker, n) a worker reports; fails the test if none comes within 10 s.
  std::pair<int, int> next_got() {
    std::pair<int, int> out{-1, -1};
    self->receive([&](got_atom, int worker, int n) { out = {worker, n}; },
                  caf::after(10s) >> [] { FAIL("no worker was handed a message within 10 s"); });
    return out;
  }
};

} // namespace

TEST_CASE("a pool runs no more transactions at once than it is allowed and hands the rest to the next idle "
          "connection in one batch (CJ-4)",
          "[pg_pool]") {
  pool_fixture f{4, 2, 1000};
  for (int n = 1; n <= 6; ++n)
    f.self->send(f.pool, n);
  // Two workers report on their own: in either order.
  std::set<std::pair<int, int>> started{f.next_got(), f.next_got()};
  CHECK(started == std::set<std::pair<int, int>>{{0, 1}, {1, 2}});
  // Messages 3 to 6 wait for a busy connection; the first to answer carries all four at once.
  f.self->send(f.workers[0], answer_atom::value);
  for (int n = 3; n <= 6; ++n)
    CHECK(f.next_got() == std::make_pair(0, n));
  CHECK(f.workers.size() == 4);
}

TEST_CASE("a message held past spill_after takes another connection, so one slow transaction stalls no one "
          "for longer (CJ-4)",
          "[pg_pool]") {
  pool_fixture f{3, 1, 0.05};
  f.self->send(f.pool, 1);
  CHECK(f.next_got() == std::make_pair(0, 1));
  auto sent = std::chrono::steady_clock::now();
  f.self->send(f.pool, 2); // worker 0 never answers
  CHECK(f.next_got() == std::make_pair(1, 2));
  CHECK(std::chrono::steady_clock::now() - sent >= 50ms);
}

TEST_CASE("with active_transactions 0 a pool allows as many transactions as the machine has cores, at least two",
          "[pg_pool]") {
  pool_fixture f{2, 0, 1000};
  f.self->send(f.pool, 1);
  f.self->send(f.pool, 2);
  std::set<std::pair<int, int>> started{f.next_got(), f.next_got()};
  CHECK(started == std::set<std::pair<int, int>>{{0, 1}, {1, 2}});
}
