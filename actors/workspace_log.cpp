#include "actors/workspace_log.hpp"

#include "actors/cluster_membership.hpp"
#include "actors/errors.hpp"
#include "protocol/cluster.hpp"
#include "protocol/workspace_events.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <deque>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace troupe {

namespace {

using clock = std::chrono::steady_clock;

using workspace_log_actor = caf::typed_actor<
  caf::replies_to<command_atom, workspace_command>::with<workspace_outcome>,
  caf::replies_to<forward_atom, workspace_command>::with<workspace_outcome>,
  caf::replies_to<read_atom, workspace_key, workspace_read>::with<workspace_slice>,
  caf::replies_to<subscribe_atom, workspace_key, caf::actor>::with<int64_t, ring_ptr>,
  caf::reacts_to<idle_atom>,
  caf::reacts_to<appended_atom, int64_t>>;

using outcome_promise = caf::typed_response_promise<workspace_outcome>;

// Where a command stands on its way to the owner (CJ-29).
struct route {
  bool forwarded = false;  // it came from another node: carried out here or refused, never sent on
  bool retried = false;    // it went its way once and came back (refused by the store or the owner)
  std::string unreachable; // a node that did not answer it: no second forward there
  int reads = 0;           // reads of the owner it waited for
};

struct waiting_command {
  workspace_command command;
  outcome_promise rp;
  route way;
};

struct log_state {
  static inline const char* name = "workspace_log";
  workspace_key key;
  workspace_store_actor store;
  workspaces_actor registry;
  workspaces_options options;
  notifier_actor notifier;   // invalid on one node
  std::string subject;       // the notifier's merge key for this log's wake-ups
  std::shared_ptr<envelope_ring> ring;
  std::set<caf::actor> subscribers;
  uint64_t handled = 0; // messages from the registry, for a safe retirement
  int in_flight = 0;    // commands sent to the store and not answered yet
  bool catching_up = false;    // a read of other nodes' appends is on its way
  bool catch_up_again = false; // and another was asked for meanwhile
  clock::time_point last_activity = clock::now();
  // CJ-28: the log's owner as last read (epoch 0: not known), and the commands that wait for a read
  // of it under way, in arrival order.
  workspace_owner owner;
  bool owner_asked = false;
  std::deque<waiting_command> waiting;
};

using log_pointer = workspace_log_actor::stateful_pointer<log_state>;

envelope_ring::entry ring_entry(int64_t seq, const std::string& envelope, const std::string& type) {
  return {seq, std::make_shared<const std::string>(protocol::reflexr::event_frame(envelope)), type};
}

// New envelopes go into the ring, then every subscriber learns the new head and pulls on its own.
void fill_ring(log_pointer self, std::vector<envelope_ring::entry> entries) {
  auto before = self->state.ring->head();
  self->state.ring->append(std::move(entries));
  auto head = self->state.ring->head();
  if (head == before)
    return;
  for (auto& s : self->state.subscribers)
    caf::anon_send(s, wake_atom::value, head);
}

// This node's appends: its subscribers learn of them from the ring, the other nodes' from a
// wake-up sent after the commit (CJ-10).
void publish(log_pointer self, const workspace_outcome& o) {
  if (o.appended.empty())
    return;
  std::vector<envelope_ring::entry> entries;
  entries.reserve(o.appended.size());
  for (std::size_t i = 0; i < o.appended.size(); ++i)
    entries.push_back(ring_entry(o.first_seq + static_cast<int64_t>(i), o.appended[i], o.types[i]));
  fill_ring(self, std::move(entries));
  auto& st = self->state;
  if (st.notifier)
    self->send(st.notifier, notify_atom::value, std::string(workspace_channel), st.subject,
               protocol::workspace_wakeup({st.key.tenant, st.key.workspace, o.first_seq + int64_t(o.appended.size()) - 1}));
}

void catch_up(log_pointer self);

void caught_up(log_pointer self) {
  auto& st = self->state;
  st.catching_up = false;
  if (std::exchange(st.catch_up_again, false))
    catch_up(self);
}

// Other nodes appended: what lies past the ring's head is read from the store once, for every
// subscriber here (at most a ring's worth, the newest; a subscriber further behind reads the store).
void catch_up(log_pointer self) {
  auto& st = self->state;
  if (st.catching_up) {
    st.catch_up_again = true;
    return;
  }
  st.catching_up = true;
  workspace_read r;
  r.after_seq = st.ring->head();
  r.limit = static_cast<int64_t>(st.options.ring_capacity);
  r.from_end = true;
  self->request(st.store, caf::infinite, read_atom::value, st.key, r)
    .then(
      [=](workspace_slice& slice) {
        std::vector<envelope_ring::entry> entries;
        entries.reserve(slice.seqs.size());
        for (std::size_t i = 0; i < slice.seqs.size(); ++i)
          entries.push_back(ring_entry(slice.seqs[i], slice.envelopes[i], slice.types[i]));
        fill_ring(self, std::move(entries));
        caught_up(self);
      },
      [=](caf::error& err) {
        spdlog::warn("workspace {}/{}: other nodes' appends not read ({}); the next wake-up or poll reads them",
                     self->state.key.tenant, self->state.key.workspace, self->system().render(err));
        caught_up(self);
      });
}

// ---- Ownership and forwarding (CJ-28, CJ-29) ----

bool clustered(log_pointer self) {
  return self->state.options.cluster.node != nullptr;
}

std::string me(log_pointer self) {
  return self->state.options.cluster.node->node_id();
}

caf::error unreachable_owner(log_pointer self) {
  return make_error(problem{errc::unavailable,
                            "the node that owns workspace " + self->state.key.workspace + " did not answer; retry",
                            {}, owner_unreachable});
}

void dispatch(log_pointer self, workspace_command c, outcome_promise rp, route way);

// Commands are pipelined: the store carries them out in arrival order, so their answers (and the
// ring) stay in seq order without waiting for one commit before sending the next. A command refused
// because the log changed owner meanwhile goes its way again, once.
void carry_out(log_pointer self, workspace_command c, outcome_promise rp, route way) {
  auto& st = self->state;
  ++st.in_flight;
  auto again = clustered(self) && !way.retried ? std::optional<workspace_command>(c) : std::nullopt;
  self->request(st.store, caf::infinite, command_atom::value, std::move(c))
    .then(
      [=](workspace_outcome& o) mutable {
        --self->state.in_flight;
        publish(self, o);
        rp.deliver(std::move(o));
      },
      [=](caf::error& err) mutable {
        --self->state.in_flight;
        if (again && problem_of(err).kind == ownership_lost) {
          self->state.owner = {};
          way.retried = true;
          return dispatch(self, std::move(*again), rp, std::move(way));
        }
        rp.deliver(std::move(err));
      });
}

void forward(log_pointer self, workspace_command c, outcome_promise rp, route way) {
  auto& st = self->state;
  auto owner = st.owner;
  auto again = std::optional<workspace_command>(c);
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(st.options.cluster.forward_timeout_seconds * 1000));
  self->request(st.options.cluster.peers, timeout, forward_atom::value, owner.node_id, forward_of(c))
    .then([=](workspace_answer& a) mutable { rp.deliver(outcome_of(std::move(a))); },
          [=](caf::error& err) mutable {
            // The owner is read again (taken here when its node is gone), and the command goes its
            // way once more; an owner that did not answer gets no second try.
            auto& st = self->state;
            if (st.owner.node_id == owner.node_id && st.owner.epoch == owner.epoch)
              st.owner = {};
            if (way.retried) {
              rp.deliver(unreachable_owner(self));
              return;
            }
            way.retried = true;
            if (problem_of(err).kind != not_owner)
              way.unreachable = owner.node_id;
            dispatch(self, std::move(*again), rp, std::move(way));
          });
}

void ask_owner(log_pointer self) {
  auto& st = self->state;
  if (std::exchange(st.owner_asked, true))
    return;
  self->request(st.store, caf::infinite, own_atom::value, st.key, me(self))
    .then(
      [=](workspace_owner& owner) {
        auto& st = self->state;
        st.owner_asked = false;
        st.owner = std::move(owner);
        // An owner of epoch 0 (this read lost a race with another node's take) is read again.
        for (auto& w : std::exchange(st.waiting, {}))
          dispatch(self, std::move(w.command), w.rp, std::move(w.way));
      },
      [=](caf::error& err) {
        auto& st = self->state;
        st.owner_asked = false;
        spdlog::warn("workspace {}/{}: its owner cannot be read: {}", st.key.tenant, st.key.workspace,
                     self->system().render(err));
        for (auto& w : std::exchange(st.waiting, {}))
          w.rp.deliver(err);
      });
}

// Where a command goes: carried out here under this node's ownership, forwarded to the owner, or
// held while the owner is read.
void dispatch(log_pointer self, workspace_command c, outcome_promise rp, route way) {
  auto& st = self->state;
  if (!clustered(self))
    return carry_out(self, std::move(c), rp, std::move(way));
  if (st.owner_asked || st.owner.epoch == 0) {
    if (++way.reads > 2) { // no owner could be read: the caller retries
      rp.deliver(unreachable_owner(self));
      return;
    }
    st.waiting.push_back({std::move(c), rp, std::move(way)});
    return ask_owner(self);
  }
  if (st.owner.node_id == me(self)) {
    c.fence = st.owner;
    return carry_out(self, std::move(c), rp, std::move(way));
  }
  if (way.forwarded)
    rp.deliver(
      make_error(problem{errc::conflict, "this node does not own workspace " + st.key.workspace, {}, not_owner}));
  else if (st.owner.node_id == way.unreachable)
    rp.deliver(unreachable_owner(self));
  else
    forward(self, std::move(c), rp, std::move(way));
}

// A log retiring gives its ownership up, so the next command anywhere takes it at once.
void give_up(log_pointer self) {
  auto& st = self->state;
  if (!clustered(self) || st.owner.epoch == 0 || st.owner.node_id != me(self))
    return;
  caf::anon_send(st.store, disown_atom::value, st.key, std::exchange(st.owner, {}));
}

void touch(log_pointer self) {
  ++self->state.handled;
  self->state.last_activity = clock::now();
}

std::chrono::milliseconds idle_period(const workspaces_options& o) {
  return std::chrono::milliseconds(static_cast<int64_t>(o.log_idle_timeout * 1000 / 2) + 1);
}

workspace_log_actor::behavior_type workspace_log(log_pointer self, workspace_key key, workspace_store_actor store,
                                                 workspaces_actor registry, workspaces_options options,
                                                 notifier_actor notifier) {
  auto& st = self->state;
  st.key = key;
  st.store = store;
  st.registry = registry;
  st.options = options;
  st.notifier = std::move(notifier);
  st.subject = protocol::workspace_wakeup({key.tenant, key.workspace, 0});
  // Nothing is served before the head is known: the ring starts there.
  self->request(store, caf::infinite, head_atom::value, key)
    .await([=](int64_t head) { self->state.ring = std::make_shared<envelope_ring>(head, self->state.options.ring_capacity); },
           [=](caf::error& err) {
             spdlog::error("workspace {}/{}: cannot read the log's head: {}", self->state.key.tenant,
                           self->state.key.workspace, self->system().render(err));
             self->quit(err);
           });
  self->set_down_handler([=](caf::down_msg& msg) {
    for (auto it = self->state.subscribers.begin(); it != self->state.subscribers.end(); ++it)
      if (it->address() == msg.source) {
        self->state.subscribers.erase(it);
        break;
      }
  });
  self->delayed_send(self, idle_period(options), idle_atom::value);
  return {
    [=](command_atom, workspace_command& c) -> caf::result<workspace_outcome> {
      touch(self);
      auto rp = self->make_response_promise<workspace_outcome>();
      dispatch(self, std::move(c), rp, route{});
      return rp;
    },
    [=](forward_atom, workspace_command& c) -> caf::result<workspace_outcome> {
      touch(self);
      auto rp = self->make_response_promise<workspace_outcome>();
      route way;
      way.forwarded = true;
      dispatch(self, std::move(c), rp, std::move(way));
      return rp;
    },
    [=](read_atom a, workspace_key& k, workspace_read& r) {
      touch(self);
      return self->delegate(self->state.store, a, std::move(k), std::move(r));
    },
    [=](subscribe_atom, const workspace_key&, caf::actor& subscriber) -> caf::result<int64_t, ring_ptr> {
      touch(self);
      self->monitor(subscriber);
      self->state.subscribers.insert(subscriber);
      return caf::result<int64_t, ring_ptr>(self->state.ring->head(), ring_ptr(self->state.ring));
    },
    [=](idle_atom) {
      auto& s = self->state;
      auto quiet = clock::now() - s.last_activity >= std::chrono::duration<double>(s.options.log_idle_timeout);
      if (quiet && s.subscribers.empty() && s.in_flight == 0) {
        give_up(self);
        self->send(s.registry, idle_atom::value, s.key, s.handled);
      }
      self->delayed_send(self, idle_period(s.options), idle_atom::value);
    },
    [=](appended_atom, int64_t head) {
      // Counted for a safe retirement, but not activity: a log nobody here uses still retires.
      ++self->state.handled;
      if (head == 0 || head > self->state.ring->head())
        catch_up(self);
    },
  };
}

struct registry_state {
  static inline const char* name = "workspaces";
  struct log_entry {
    workspace_log_actor log;
    uint64_t sent = 0;
  };
  std::map<workspace_key, log_entry> logs;
  workspace_store_actor store;
  workspaces_options options;
  notifier_actor notifier;
};

using registry_pointer = workspaces_actor::stateful_pointer<registry_state>;

workspace_log_actor& log_for(registry_pointer self, const workspace_key& key) {
  auto& logs = self->state.logs;
  auto it = logs.find(key);
  if (it == logs.end()) {
    auto log = self->spawn(workspace_log, key, self->state.store, workspaces_actor(self), self->state.options,
                           self->state.notifier);
    self->monitor(log);
    it = logs.emplace(key, registry_state::log_entry{log, 0}).first;
  }
  ++it->second.sent;
  return it->second.log;
}

workspaces_actor::behavior_type workspaces(registry_pointer self, workspace_store_actor store,
                                           workspaces_options options, notifier_actor notifier) {
  self->state.store = std::move(store);
  self->state.options = options;
  self->state.notifier = std::move(notifier);
  // The logs go with the registry (a shutdown stops them all); a log that stops alone is forgotten.
  self->set_exit_handler([=](caf::exit_msg& msg) {
    for (auto& [key, entry] : self->state.logs)
      self->send_exit(entry.log, msg.reason);
    self->quit(msg.reason);
  });
  self->set_down_handler([=](caf::down_msg& msg) {
    auto& logs = self->state.logs;
    for (auto it = logs.begin(); it != logs.end(); ++it)
      if (it->second.log.address() == msg.source) {
        if (msg.reason && msg.reason != caf::exit_reason::user_shutdown)
          spdlog::warn("workspace {}/{}: log stopped: {}", it->first.tenant, it->first.workspace,
                       self->system().render(msg.reason));
        logs.erase(it);
        break;
      }
  });
  return {
    [=](command_atom a, workspace_command& c) { return self->delegate(log_for(self, c.key), a, std::move(c)); },
    [=](forward_atom a, workspace_command& c) { return self->delegate(log_for(self, c.key), a, std::move(c)); },
    [=](read_atom a, workspace_key& k, workspace_read& r) {
      auto& log = log_for(self, k);
      return self->delegate(log, a, std::move(k), std::move(r));
    },
    [=](subscribe_atom a, workspace_key& k, caf::actor& subscriber) {
      auto& log = log_for(self, k);
      return self->delegate(log, a, std::move(k), std::move(subscriber));
    },
    [=](idle_atom, const workspace_key& key, uint64_t handled) {
      // Only a log that has handled everything sent to it may go: nothing is in its mailbox.
      auto it = self->state.logs.find(key);
      if (it == self->state.logs.end() || it->second.sent != handled)
        return;
      self->demonitor(it->second.log->address());
      self->send_exit(it->second.log, caf::exit_reason::user_shutdown);
      self->state.logs.erase(it);
    },
    [=](prune_atom) {
      caf::anon_send(self->state.store, prune_atom::value, self->state.options.command_result_retention);
      self->delayed_send(self, std::chrono::hours(1), prune_atom::value);
    },
    [=](appended_atom, const workspace_key& key, int64_t head) {
      // Only a log that is live here has anyone to tell; one started later reads its head.
      auto it = self->state.logs.find(key);
      if (it == self->state.logs.end())
        return;
      ++it->second.sent;
      self->send(it->second.log, appended_atom::value, head);
    },
    [=](appended_atom) {
      for (auto& [key, entry] : self->state.logs) {
        ++entry.sent;
        self->send(entry.log, appended_atom::value, int64_t{0});
      }
    },
  };
}

} // namespace

workspaces_actor spawn_workspaces(caf::actor_system& sys, workspace_store_actor store, workspaces_options options,
                                  notifier_actor notifier) {
  auto registry = sys.spawn(workspaces, std::move(store), options, std::move(notifier));
  caf::anon_send(registry, prune_atom::value);
  return registry;
}

} // namespace troupe
