#include "io/pg_pool.hpp"

#include "actors/errors.hpp"
#include "actors/metrics.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <thread>
#include <unordered_set>
#include <vector>

namespace troupe::io::pg {

namespace {

using clock = std::chrono::steady_clock;
using sweep_atom = caf::atom_constant<caf::atom("pgsweep")>;
using spill_atom = caf::atom_constant<caf::atom("pgspill")>;

struct job {
  std::string key;
  caf::message msg;
  caf::response_promise answer;
  clock::time_point queued;
};

struct pool_state {
  static inline const char* name = "pg_pool";
  pool_settings settings;
  key_function key_of;
  worker_factory make;
  std::vector<caf::actor> workers;
  std::vector<std::size_t> given;               // per worker: messages handed out and not yet answered
  std::vector<std::vector<std::string>> holding; // per worker: the keys of those messages
  std::unordered_set<std::string> busy_keys;
  std::deque<job> jobs;
  bool spill_pending = false; // a spill_atom is on its way
};

using pool_pointer = caf::stateful_actor<pool_state>*;

clock::duration seconds(double s) {
  return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s));
}

clock::duration acquire_timeout(const pool_state& st) {
  return seconds(st.settings.acquire_timeout_seconds);
}

void release(pool_state& st, std::size_t w) {
  for (auto& key : st.holding[w])
    st.busy_keys.erase(key);
  st.holding[w].clear();
  st.given[w] = 0;
}

// Hands each idle worker the oldest jobs, up to a batch, whose keys no other worker holds. Jobs of one
// key may share a batch: the worker carries them out in order. Past `active` busy workers, an idle one
// is handed jobs only once the oldest has waited `spill_after`; until then a spill_atom is on its way.
void dispatch(pool_pointer self) {
  auto& st = self->state;
  auto busy = static_cast<std::size_t>(std::count_if(st.given.begin(), st.given.end(), [](auto n) { return n != 0; }));
  for (std::size_t w = 0; w < st.workers.size() && !st.jobs.empty(); ++w) {
    if (st.given[w] != 0)
      continue;
    if (busy >= st.settings.active) {
      auto spill_at = st.jobs.front().queued + seconds(st.settings.spill_after_seconds);
      auto now = clock::now();
      if (now < spill_at) {
        if (!st.spill_pending) {
          st.spill_pending = true;
          self->delayed_send(self, std::chrono::duration_cast<std::chrono::microseconds>(spill_at - now)
                                     + std::chrono::microseconds(1),
                             spill_atom::value);
        }
        return;
      }
    }
    std::unordered_set<std::string> mine;
    for (auto it = st.jobs.begin(); it != st.jobs.end() && st.given[w] < st.settings.batch;) {
      bool free = it->key.empty() || mine.count(it->key) != 0 || st.busy_keys.count(it->key) == 0;
      if (!free) {
        ++it;
        continue;
      }
      if (!it->key.empty() && mine.insert(it->key).second) {
        st.busy_keys.insert(it->key);
        st.holding[w].push_back(it->key);
      }
      ++st.given[w];
      if (st.settings.metrics)
        st.settings.metrics->store_waited(std::chrono::duration<double>(clock::now() - it->queued).count());
      it->answer.delegate(st.workers[w], std::move(it->msg));
      it = st.jobs.erase(it);
    }
    if (st.given[w] != 0)
      ++busy;
  }
}

// On stop: every job still queued is handed out all the same, to the worker that holds its key (so one
// key's jobs keep their order) or else to the least loaded one, so nothing sent before the stop is
// lost; each worker carries out what it was handed before it stops (pg::flush_on_exit).
void drain(pool_pointer self) {
  auto& st = self->state;
  dispatch(self);
  for (auto& j : st.jobs) {
    std::size_t target = 0;
    for (std::size_t w = 1; w < st.workers.size(); ++w)
      if (st.given[w] < st.given[target])
        target = w;
    if (!j.key.empty()) {
      for (std::size_t w = 0; w < st.workers.size(); ++w)
        if (std::find(st.holding[w].begin(), st.holding[w].end(), j.key) != st.holding[w].end())
          target = w;
      if (st.busy_keys.insert(j.key).second)
        st.holding[target].push_back(j.key);
    }
    ++st.given[target];
    j.answer.delegate(st.workers[target], std::move(j.msg));
  }
  st.jobs.clear();
}

void spawn_worker(pool_pointer self, std::size_t i) {
  auto& st = self->state;
  st.workers[i] = st.make(self);
  release(st, i);
  self->link_to(st.workers[i]);
}

// Answers the jobs that waited longer than the acquire timeout.
void sweep(pool_pointer self) {
  auto& st = self->state;
  auto cutoff = clock::now() - acquire_timeout(st);
  for (auto it = st.jobs.begin(); it != st.jobs.end();) {
    if (it->queued > cutoff) {
      ++it;
      continue;
    }
    if (st.settings.metrics)
      st.settings.metrics->store_wait_timed_out();
    it->answer.deliver(make_error(errc::unavailable, "store_unavailable: no PostgreSQL connection was free within "
                                                       + std::to_string(st.settings.acquire_timeout_seconds) + " s"));
    it = st.jobs.erase(it);
  }
}

caf::behavior pool_behavior(caf::stateful_actor<pool_state>* self, pool_settings settings, key_function key_of,
                            worker_factory make) {
  auto& st = self->state;
  st.settings = settings;
  st.key_of = std::move(key_of);
  st.make = std::move(make);
  st.settings.batch = std::max<std::size_t>(st.settings.batch, 1);
  if (st.settings.active == 0)
    st.settings.active = std::max(2u, std::thread::hardware_concurrency());
  st.workers.resize(std::max<std::size_t>(settings.size, 1));
  st.given.resize(st.workers.size());
  st.holding.resize(st.workers.size());
  for (std::size_t i = 0; i < st.workers.size(); ++i)
    spawn_worker(self, i);
  // A worker that died is replaced; the pool itself stops when told to, and its workers with it.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    auto& st = self->state;
    for (std::size_t i = 0; i < st.workers.size(); ++i) {
      if (st.workers[i].address() != msg.source)
        continue;
      spdlog::error("store: a PostgreSQL worker stopped ({}); starting another", to_string(msg.reason));
      spawn_worker(self, i);
      dispatch(self);
      return;
    }
    drain(self);
    self->quit(msg.reason);
  });
  self->set_default_handler([](caf::scheduled_actor* base, caf::message_view& x) -> caf::result<caf::message> {
    auto self = static_cast<caf::stateful_actor<pool_state>*>(base);
    auto msg = x.move_content_to_message();
    auto key = self->state.key_of(msg);
    self->state.jobs.push_back({std::move(key), std::move(msg), self->make_response_promise(), clock::now()});
    dispatch(self);
    return caf::delegated<caf::message>{};
  });
  auto period = std::chrono::duration_cast<std::chrono::milliseconds>(acquire_timeout(st) / 4)
                + std::chrono::milliseconds(1);
  self->delayed_send(self, period, sweep_atom::value);
  auto watch = std::chrono::duration_cast<std::chrono::milliseconds>(
    std::chrono::duration<double>(std::max(st.settings.watch_seconds, 0.01)));
  self->delayed_send(self, watch, watch_atom::value);
  return {
    [self](worker_idle_atom, const caf::actor_addr& worker, uint64_t answered) {
      auto& st = self->state;
      for (std::size_t i = 0; i < st.workers.size(); ++i) {
        if (st.workers[i].address() != worker)
          continue;
        st.given[i] -= std::min<std::size_t>(st.given[i], answered);
        if (st.given[i] == 0)
          release(st, i);
      }
      dispatch(self);
    },
    [self](spill_atom) {
      self->state.spill_pending = false;
      dispatch(self);
    },
    [self, period](sweep_atom) {
      sweep(self);
      self->delayed_send(self, period, sweep_atom::value);
    },
    [self, watch](watch_atom) {
      self->send(self->state.workers.front(), watch_atom::value);
      self->delayed_send(self, watch, watch_atom::value);
    },
  };
}

} // namespace

caf::actor spawn_pool(caf::actor_system& sys, pool_settings settings, key_function key_of, worker_factory make) {
  return sys.spawn(pool_behavior, settings, std::move(key_of), std::move(make));
}

} // namespace troupe::io::pg
