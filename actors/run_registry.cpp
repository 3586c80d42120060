#include "actors/run_registry.hpp"

#include "actors/cluster_membership.hpp"
#include "actors/errors.hpp"
#include "actors/lease_keeper.hpp"
#include "protocol/ids.hpp"
#include "protocol/redaction.hpp"
#include "protocol/timestamp.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace troupe {

namespace {

using steady = std::chrono::steady_clock;

struct live_attempt {
  run_actor run;
  bool background = false;
  bool holds_slot = false; // counted in background_live; not while it waits on an approval
  int64_t lease_epoch = 0;
};

// An attempt asking for its slot back after an approval wait (AS-53).
struct slot_request {
  caf::actor_addr attempt;
  caf::typed_response_promise<bool> promise;
};

struct run_registry_state {
  static inline const char* name = "run_registry";
  std::shared_ptr<const run_environment> env;
  scheduler_options options;
  lease_keeper_actor keeper;
  std::unordered_map<std::string, live_attempt> live;
  std::unordered_map<caf::actor_addr, std::string> attempt_of;
  std::unordered_set<std::string> reserved; // chat ids whose begin is being stored
  int background_live = 0; // attempts holding a slot
  std::deque<slot_request> slot_requests; // served before any queued run is claimed
  // Subscribers per run id, across attempts; they leave when they stop.
  std::unordered_map<std::string, std::vector<caf::actor>> watchers;
  std::unordered_map<caf::actor_addr, std::string> watching;
  std::unordered_map<std::string, std::vector<caf::typed_response_promise<run_record>>> cancels;
  bool claiming = false;
  int claim_reserved = 0; // slots the claim in flight may fill
  bool claim_again = false;
  std::string last_tenant; // the tenant this node's last claim served last: the next starts after it
  bool stopping = false; // shutdown: nothing new starts
  bool fenced = false;   // the node fenced itself (CJ-14): nothing starts until it may work again
  std::optional<steady::time_point> wake_at; // a delayed queued run becomes ready
};

using registry_pointer = run_registry_actor::stateful_pointer<run_registry_state>;

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::max(0.0, seconds) * 1000.0) + 1);
}

run_record record_of(const run_spec& spec) {
  run_record r;
  r.run_id = spec.run_id;
  r.run_kind = spec.run_kind;
  r.session_id = spec.request.session_id;
  r.tenant_key = spec.tenant_key;
  r.user_key = spec.user_key;
  // AS-85: secrets never reach the run record or its trace, messages included. Every attempt of a
  // background run starts from this stored request (AS-53), so its model sees them masked too.
  r.metadata = protocol::redact_record_json(spec.request.metadata);
  r.generation_options = protocol::generation_options_json(spec.request);
  r.max_attempts = spec.max_attempts;
  r.priority = spec.request.priority;
  r.request = protocol::redact_record_json(spec.request_body);
  r.policy_snapshot_hash = spec.policy_snapshot_hash;
  return r;
}

// The attempt a claimed record starts; nullopt when its stored request no longer parses.
std::optional<run_spec> spec_of(const run_record& r) {
  auto parsed = protocol::parse_chat_request(r.request);
  auto request = std::get_if<protocol::chat_request>(&parsed);
  if (!request)
    return std::nullopt;
  run_spec spec;
  spec.run_id = r.run_id;
  spec.run_kind = r.run_kind;
  spec.tenant_key = r.tenant_key;
  spec.user_key = r.user_key;
  spec.request = std::move(*request);
  spec.request.session_id = r.session_id; // a body without one got a fresh id at submit time
  spec.request_body = r.request;
  spec.attempt = r.attempts;
  spec.max_attempts = r.max_attempts;
  spec.handoffs = r.handoffs;
  spec.first_sequence = r.event_count;
  spec.lease_epoch = r.lease_epoch;
  spec.policy_snapshot_hash = r.policy_snapshot_hash;
  return spec;
}

// From acceptance to the start of the first attempt.
std::optional<double> waited_ms(const run_record& r) {
  auto created = protocol::parse_iso_timestamp(r.created_at);
  auto started = protocol::parse_iso_timestamp(r.started_at);
  if (!created || !started)
    return std::nullopt;
  return std::chrono::duration<double, std::milli>(*started - *created).count();
}

run_actor launch(registry_pointer self, run_spec spec, caf::actor extra) {
  auto& st = self->state;
  auto id = spec.run_id;
  if (auto old = st.live.find(id); old != st.live.end()) {
    // A lapsed attempt that is still alive (wedged) gives way to the new one.
    self->send_exit(old->second.run, caf::exit_reason::kill);
    st.attempt_of.erase(old->second.run.address());
    if (old->second.holds_slot)
      --st.background_live;
    st.live.erase(old);
  }
  auto subscribers = st.watchers[id];
  if (extra)
    subscribers.push_back(std::move(extra));
  bool background = spec.run_kind != "chat";
  auto epoch = spec.lease_epoch;
  auto slots = background ? caf::actor_cast<run_slots_actor>(self) : run_slots_actor{};
  auto run = spawn_run(self->system(), st.env, std::move(spec), std::move(subscribers), std::move(slots));
  self->monitor(run);
  st.attempt_of.emplace(run.address(), id);
  st.live.emplace(id, live_attempt{run, background, background, epoch});
  if (background)
    ++st.background_live;
  if (st.keeper)
    self->send(st.keeper, track_atom::value, id, epoch, run);
  self->send(run, start_atom::value);
  return run;
}

void wake_in(registry_pointer self, double seconds) {
  auto at = steady::now() + millis(seconds);
  auto& wake = self->state.wake_at;
  if (wake && *wake <= at)
    return;
  wake = at;
  self->delayed_send(self, millis(seconds), schedule_atom::value);
}

// The live attempt of `run_id` when it sent the current message, else nullptr (a stale attempt's
// message changes nothing).
live_attempt* sending_attempt(registry_pointer self, const std::string& run_id) {
  auto it = self->state.live.find(run_id);
  if (it == self->state.live.end()
      || it->second.run.address() != caf::actor_cast<caf::actor_addr>(self->current_sender()))
    return nullptr;
  return &it->second;
}

bool slot_free(const run_registry_state& st) {
  auto limit = st.options.run_concurrency;
  return limit == 0 || st.background_live + st.claim_reserved < limit;
}

// Attempts back from an approval wait get free slots first: they were running before any queued run.
void grant_slots(registry_pointer self) {
  auto& st = self->state;
  while (!st.slot_requests.empty() && slot_free(st)) {
    auto request = std::move(st.slot_requests.front());
    st.slot_requests.pop_front();
    auto id = st.attempt_of.find(request.attempt);
    if (id == st.attempt_of.end())
      continue; // it ended meanwhile
    auto& attempt = st.live.at(id->second);
    attempt.holds_slot = true;
    ++st.background_live;
    request.promise.deliver(true);
  }
}

void schedule(registry_pointer self) {
  auto& st = self->state;
  grant_slots(self);
  if (!st.env->store || st.stopping || st.fenced)
    return;
  if (st.claiming) {
    st.claim_again = true;
    return;
  }
  auto limit = st.options.run_concurrency;
  auto n = st.options.claim_batch;
  if (limit != 0)
    n = std::min(n, static_cast<uint32_t>(std::max(0, limit - st.background_live)));
  if (n == 0)
    return;
  st.claiming = true;
  st.claim_reserved = limit == 0 ? 0 : static_cast<int>(n);
  st.claim_again = false;
  claim_request want{st.options.worker_id, st.options.run_lease_seconds, n, st.last_tenant,
                     st.options.tenant_max_running};
  self->request(st.env->store, caf::infinite, claim_atom::value, std::move(want))
    .then(
      [=](run_claim& claim) {
        auto& st = self->state;
        st.claiming = false;
        st.claim_reserved = 0;
        if (!claim.runs.empty())
          st.last_tenant = claim.runs.back().tenant_key; // the runs come in the order they were dealt
        if (st.stopping || st.fenced)
          return; // claimed during shutdown or a fence: still `running`, so recovery takes them
        for (auto& r : claim.runs) {
          if (auto waited = waited_ms(r); waited && r.attempts == 1)
            st.env->metrics->run_started(*waited);
          if (auto spec = spec_of(r)) {
            launch(self, std::move(*spec), nullptr);
            continue;
          }
          spdlog::error("run {}: its stored request cannot be read; failing it", r.run_id);
          run_transition t;
          t.run_id = r.run_id;
          t.lease_epoch = r.lease_epoch;
          t.status = "failed";
          t.error = "Stored request could not be read";
          t.trace.trace_type = "background_run";
          caf::anon_send(st.env->store, transition_atom::value, std::move(t));
        }
        if (claim.next_ready_seconds >= 0)
          wake_in(self, claim.next_ready_seconds);
        if (claim.runs.size() == n || st.claim_again)
          schedule(self);
        else
          grant_slots(self); // what the claim left free
      },
      [=](caf::error& err) {
        self->state.claiming = false;
        self->state.claim_reserved = 0;
        grant_slots(self);
        spdlog::error("scheduler: claiming queued runs failed: {}", message_of(err));
      });
}

// Tells the subscribers of a run that ended without a live attempt (a queued run cancelled).
void announce_end(registry_pointer self, const run_record& r) {
  auto it = self->state.watchers.find(r.run_id);
  if (it == self->state.watchers.end())
    return;
  run_result result{r.run_id, r.session_id, r.status, "", r.error, r.duration_ms.value_or(0), r.event_count, {}};
  for (auto& w : it->second)
    caf::anon_send(w, run_end_atom::value, result);
}

// Cancels a run no live attempt holds and answers every waiting promise.
void cancel_stored(registry_pointer self, const std::string& run_id,
                   std::vector<caf::typed_response_promise<run_record>> promises) {
  self->request(self->state.env->store, caf::infinite, cancel_atom::value, run_id, protocol::cancelled_end())
    .then(
      [=](run_record& r) mutable {
        if (r.status == "cancelled")
          announce_end(self, r);
        for (auto& p : promises)
          p.deliver(r);
      },
      [=](caf::error& err) mutable {
        for (auto& p : promises)
          p.deliver(err);
      });
}

// Cancels this node's attempt of a run; answered once the attempt ended and its end is stored.
caf::result<run_record> cancel_live(registry_pointer self, const std::string& run_id, const live_attempt& attempt) {
  auto rp = self->make_response_promise<run_record>();
  self->state.cancels[run_id].push_back(rp);
  self->send(attempt.run, cancel_atom::value);
  return rp;
}

// CJ-25: a run no attempt of this node holds. Held by another node, it is stopped there and read
// back from the store; that node's silence, refusal or `not_here` ends it through the store instead,
// which fences the holder out (it stops at its next write).
void cancel_elsewhere(registry_pointer self, const std::string& run_id, caf::typed_response_promise<run_record> rp) {
  auto& st = self->state;
  self->request(st.env->store, caf::infinite, get_run_atom::value, run_id)
    .then(
      [=](run_record& r) mutable {
        auto& st = self->state;
        auto holder = node_of_worker(r.worker_id);
        if (r.status != "running" || holder.empty() || r.worker_id == st.options.worker_id) {
          cancel_stored(self, run_id, {rp});
          return;
        }
        cancel_request ask{"run", run_id, r.lease_epoch};
        self->request(st.env->peers, caf::infinite, cancel_atom::value, holder, std::move(ask))
          .then(
            [=](cancel_ack& ack) mutable {
              if (ack.outcome != "stopped") {
                cancel_stored(self, run_id, {rp});
                return;
              }
              self->request(self->state.env->store, caf::infinite, get_run_atom::value, run_id)
                .then(
                  [=](run_record& ended) mutable {
                    announce_end(self, ended);
                    rp.deliver(ended);
                  },
                  [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
            },
            [=](caf::error& err) mutable {
              spdlog::info("cluster: node {} did not stop run {} ({}); ending it through the store", holder, run_id,
                           message_of(err));
              cancel_stored(self, run_id, {rp});
            });
      },
      [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
}

void attempt_ended(registry_pointer self, const caf::actor_addr& addr) {
  auto& st = self->state;
  auto it = st.attempt_of.find(addr);
  auto id = it->second;
  st.attempt_of.erase(it);
  auto live = st.live.find(id);
  if (live != st.live.end() && live->second.run.address() == addr) {
    if (live->second.holds_slot)
      --st.background_live;
    st.live.erase(live);
  }
  // Ended or not, the run's watchers hear the attempt is gone after anything it sent them; one stopped
  // short of the run's end (re-queued, fenced, handed back) leaves them to the store until an
  // attempt here feeds them again.
  if (auto w = st.watchers.find(id); w != st.watchers.end())
    for (auto& watcher : w->second)
      caf::anon_send(watcher, attempt_gone_atom::value);
  auto& waiting = st.slot_requests;
  waiting.erase(std::remove_if(waiting.begin(), waiting.end(),
                               [&](const slot_request& r) { return r.attempt == addr; }),
                waiting.end());
  // A cancel that waited for the attempt is finished by the store: a run the attempt re-queued is
  // cancelled there, a terminal one is returned unchanged.
  if (auto c = st.cancels.find(id); c != st.cancels.end()) {
    auto promises = std::move(c->second);
    st.cancels.erase(c);
    if (st.env->store) {
      cancel_stored(self, id, std::move(promises));
    } else { // nothing is stored: the attempt that just ended was the whole run
      run_record r;
      r.run_id = id;
      r.status = "cancelled";
      for (auto& p : promises)
        p.deliver(r);
    }
  }
  schedule(self);
}

// CJ-15: a draining node hands back at once the background runs that wait on a person: their attempts
// stop here and the store re-queues them uncharged, for another node to wait on the same approval
// (a retried attempt adopts it).
void hand_back_waiting(registry_pointer self) {
  auto& st = self->state;
  if (!st.env->store)
    return;
  auto end = protocol::handed_back_end(node_of_worker(st.options.worker_id));
  for (auto& [id, attempt] : st.live) {
    if (!attempt.background || attempt.holds_slot)
      continue;
    self->send_exit(attempt.run, caf::exit_reason::user_shutdown);
    self->request(st.env->store, caf::infinite, handback_atom::value, id, attempt.lease_epoch, end,
                  st.options.max_handoffs)
      .then(
        [=, run_id = id](bool moved) {
          if (!moved)
            return;
          spdlog::info("cluster: run {} waits on a person: handed back at once", run_id);
          announce_runs(self->state.env->notifier); // committed: the other nodes may claim (CJ-10)
        },
        [run_id = id](caf::error& err) {
          spdlog::error("cluster: handing back run {} failed: {}", run_id, message_of(err));
        });
  }
}

void watcher_left(registry_pointer self, const caf::actor_addr& addr) {
  auto& st = self->state;
  auto it = st.watching.find(addr);
  if (it == st.watching.end())
    return;
  auto w = st.watchers.find(it->second);
  if (w != st.watchers.end()) {
    auto& list = w->second;
    list.erase(std::remove_if(list.begin(), list.end(), [&](const caf::actor& a) { return a.address() == addr; }),
               list.end());
    if (list.empty())
      st.watchers.erase(w);
  }
  st.watching.erase(it);
}

caf::error fenced_refusal() {
  return make_error(errc::unavailable, "This node lost contact with the database and stopped its work; retry");
}

// A chat run's attempt: begun in the store (AS-10), then launched. The id is reserved while the store
// begins the attempt, so a concurrent request for it is refused.
caf::result<run_actor> spawn_run(registry_pointer self, run_spec spec, caf::actor subscriber) {
  auto& st = self->state;
  if (st.fenced)
    return fenced_refusal();
  if (st.live.count(spec.run_id) != 0 || st.reserved.count(spec.run_id) != 0)
    return make_error(errc::conflict, "Run already exists");
  if (!st.env->store)
    return launch(self, std::move(spec), std::move(subscriber));
  st.reserved.insert(spec.run_id);
  auto rp = self->make_response_promise<run_actor>();
  auto id = spec.run_id;
  self->request(st.env->store, caf::infinite, begin_chat_atom::value, record_of(spec), st.options.worker_id,
                st.options.run_lease_seconds)
    .then(
      [=](run_record& r) mutable {
        self->state.reserved.erase(id);
        spec.attempt = r.attempts;
        spec.first_sequence = r.event_count;
        spec.lease_epoch = r.lease_epoch;
        rp.deliver(launch(self, std::move(spec), std::move(subscriber)));
      },
      [=](caf::error& err) mutable {
        self->state.reserved.erase(id);
        rp.deliver(err);
      });
  return rp;
}

// A background run: stored `queued` (the answer means durable), then claimed by the scheduler.
caf::result<run_record> submit(registry_pointer self, run_spec spec) {
  auto& st = self->state;
  if (st.fenced)
    return fenced_refusal();
  if (!st.env->store)
    return make_error(errc::unavailable, "Durable run store not available");
  spec.max_attempts = st.options.run_max_attempts;
  auto rp = self->make_response_promise<run_record>();
  self->request(st.env->store, caf::infinite, create_run_atom::value, record_of(spec))
    .then(
      [=](run_record& r) mutable {
        rp.deliver(std::move(r));
        // A node with room claims its own submission at once; only a full one wakes the others
        // (CJ-10), who would otherwise race it for the run.
        if (!slot_free(self->state))
          announce_runs(self->state.env->notifier);
        schedule(self);
      },
      [=](caf::error& err) mutable { rp.deliver(err); });
  return rp;
}

// A recovery sweep (AS-83): lapsed leases re-queued, failed or completed, and those runs' ends announced,
// since no attempt will announce them.
void sweep_lapsed_leases(registry_pointer self) {
  auto& st = self->state;
  if (!st.env->store || st.stopping)
    return;
  self->request(st.env->store, caf::infinite, recover_atom::value, false, protocol::lapsed_lease_ends())
    .then(
      [=](recovery_report& r) {
        auto& env = self->state.env;
        for (auto& id : r.ended_run_ids) {
          if (env->approvals) // AS-81: a run that is gone can no longer be approved
            self->send(env->approvals, run_ended_atom::value, id, std::string("run_terminated"));
          // The streams following the run are told, and read the error event recovery stored (AS-74).
          self->request(env->store, caf::infinite, get_run_atom::value, id)
            .then([=](run_record& ended) { announce_end(self, ended); },
                  [=](caf::error& err) { spdlog::error("recovery: run {}: {}", id, message_of(err)); });
        }
        env->metrics->runs_recovered(r.requeued, r.failed);
        if (r.requeued + r.failed + r.completed > 0)
          spdlog::warn("recovery: {} runs with a lapsed lease re-queued, {} failed, {} completed", r.requeued,
                       r.failed, r.completed);
        if (r.requeued > 0)
          announce_runs(self->state.env->notifier); // committed: the other nodes may claim (CJ-10)
        schedule(self);
      },
      [](caf::error& err) { spdlog::error("recovery: sweep failed: {}", message_of(err)); });
}

// The node fenced itself: its attempts stop where they are, writing nothing more (CJ-14).
void fence(registry_pointer self) {
  auto& st = self->state;
  st.fenced = true;
  for (auto& [id, attempt] : st.live)
    self->send(attempt.run, fenced_atom::value);
}

run_registry_actor::behavior_type run_registry_behavior(registry_pointer self,
                                                        std::shared_ptr<const run_environment> env,
                                                        scheduler_options options) {
  auto& st = self->state;
  st.env = std::move(env);
  st.options = std::move(options);
  if (st.env->store)
    st.keeper = spawn_lease_keeper(self->system(), st.env->store, st.options.run_lease_seconds, st.env->metrics);
  self->set_down_handler([=](caf::down_msg& msg) {
    if (self->state.attempt_of.count(msg.source) != 0)
      attempt_ended(self, msg.source);
    else
      watcher_left(self, msg.source);
  });
  self->set_exit_handler([=](caf::exit_msg& msg) {
    if (self->state.keeper)
      self->send_exit(self->state.keeper, msg.reason);
    self->quit(msg.reason);
  });
  return {
    [=](spawn_run_atom, run_spec& spec, caf::actor& subscriber) {
      return spawn_run(self, std::move(spec), std::move(subscriber));
    },
    [=](submit_atom, run_spec& spec) { return submit(self, std::move(spec)); },
    [=](subscribe_atom, std::string& run_id, caf::actor& subscriber) -> caf::result<bool> {
      auto& st = self->state;
      self->monitor(subscriber);
      st.watching.emplace(subscriber.address(), run_id);
      st.watchers[run_id].push_back(subscriber);
      if (auto it = st.live.find(run_id); it != st.live.end())
        return self->delegate(it->second.run, subscribe_atom::value, std::move(subscriber));
      return false;
    },
    [=](cancel_atom, std::string& run_id) -> caf::result<run_record> {
      auto& st = self->state;
      if (auto it = st.live.find(run_id); it != st.live.end())
        return cancel_live(self, run_id, it->second);
      if (!st.env->store)
        return make_error(errc::not_found, "Run not found");
      auto rp = self->make_response_promise<run_record>();
      if (st.env->peers)
        cancel_elsewhere(self, run_id, rp);
      else
        cancel_stored(self, run_id, {rp});
      return rp;
    },
    [=](cancel_atom, std::string& run_id, int64_t lease_epoch) -> caf::result<run_record> {
      auto& st = self->state;
      auto it = st.live.find(run_id);
      if (it == st.live.end() || it->second.lease_epoch != lease_epoch)
        return make_error(errc::not_found,
                          "No attempt of run " + run_id + " at lease epoch " + std::to_string(lease_epoch) + " here");
      return cancel_live(self, run_id, it->second);
    },
    [=](cancel_all_atom) {
      self->state.stopping = true;
      for (auto& [id, attempt] : self->state.live) {
        if (attempt.background)
          self->send_exit(attempt.run, caf::exit_reason::user_shutdown);
        else
          self->send(attempt.run, cancel_atom::value);
      }
    },
    [=](schedule_atom) {
      auto& wake = self->state.wake_at;
      if (wake && *wake <= steady::now())
        wake.reset();
      schedule(self);
    },
    [=](tick_atom) {
      if (!self->state.env->store || self->state.stopping)
        return;
      self->delayed_send(self, millis(self->state.options.run_recovery_interval_seconds), tick_atom::value);
      sweep_lapsed_leases(self);
    },
    [=](recover_atom) { sweep_lapsed_leases(self); },
    [=](drain_atom) {
      if (!self->state.stopping)
        hand_back_waiting(self);
      self->state.stopping = true;
      return static_cast<uint64_t>(self->state.background_live);
    },
    [=](fence_atom) { fence(self); },
    [=](unfence_atom, std::string& worker_id) {
      auto& st = self->state;
      st.options.worker_id = std::move(worker_id);
      st.fenced = false;
      schedule(self);
    },
    [=](count_atom) { return static_cast<uint64_t>(self->state.live.size()); },
    [=](release_slot_atom, const std::string& run_id) {
      auto attempt = sending_attempt(self, run_id);
      if (!attempt || !attempt->holds_slot)
        return;
      attempt->holds_slot = false;
      --self->state.background_live;
      schedule(self);
    },
    [=](acquire_slot_atom, const std::string& run_id) -> caf::result<bool> {
      auto attempt = sending_attempt(self, run_id);
      if (!attempt || attempt->holds_slot)
        return true; // nothing to count: an attempt the registry no longer tracks, or one holding its slot
      auto rp = self->make_response_promise<bool>();
      self->state.slot_requests.push_back({attempt->run.address(), rp});
      grant_slots(self);
      return rp;
    },
  };
}

} // namespace

std::string new_worker_id() {
  return "worker-" + protocol::random_hex(12);
}

run_registry_actor spawn_run_registry(caf::actor_system& sys, std::shared_ptr<const run_environment> env,
                                      scheduler_options options) {
  if (options.worker_id.empty())
    options.worker_id = new_worker_id();
  return sys.spawn(run_registry_behavior, std::move(env), std::move(options));
}

} // namespace troupe
