#include "actors/approval_registry.hpp"

#include "actors/cluster_membership.hpp"
#include "actors/errors.hpp"
#include "protocol/ids.hpp"
#include "protocol/json.hpp"
#include "protocol/timestamp.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <set>
#include <unordered_map>

namespace troupe {

namespace {

using protocol::approval_record;
using promise = caf::typed_response_promise<approval_record>;

struct pending_approval {
  approval_record record;
  std::vector<promise> waiters;
};

struct approval_registry_state {
  static inline const char* name = "approval_registry";
  store_actor store;
  approval_options options;
  std::unordered_map<std::string, pending_approval> pending;
  // Settled but not yet stored: a retried call of the same run waits for the store's answer here, since
  // a read of the store could still see the approval pending.
  std::unordered_map<std::string, pending_approval> settling;
};

using registry_pointer = approval_registry_actor::stateful_pointer<approval_registry_state>;

std::string canonical_args(const std::string& args) {
  auto doc = protocol::json::parse(args);
  return doc ? protocol::json::canonical(*doc) : args;
}

bool same_call(const approval_record& a, const approval_record& b) {
  return a.run_id == b.run_id && a.tool_name == b.tool_name && canonical_args(a.tool_args) == canonical_args(b.tool_args);
}

std::chrono::milliseconds until(const std::string& iso) {
  auto t = protocol::parse_iso_timestamp(iso);
  if (!t)
    return std::chrono::milliseconds(0);
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*t - std::chrono::system_clock::now());
  return std::max(left, std::chrono::milliseconds(0)) + std::chrono::milliseconds(1);
}

void arm(registry_pointer self, const approval_record& r) {
  self->delayed_send(self, until(r.expires_at), expire_atom::value, r.request_id);
}

// Answers the waiters of an approval that another node settled, with what the store holds.
void deliver_stored(registry_pointer self, const std::string& id, std::vector<promise> waiters) {
  self->request(self->state.store, caf::infinite, get_approval_atom::value, id)
    .then(
      [=](approval_record& stored) mutable {
        for (auto& w : waiters)
          w.deliver(stored);
      },
      [=](caf::error& err) mutable {
        for (auto& w : waiters)
          w.deliver(err);
      });
}

// CJ-26: an approval resolved here whose run waits on another node; every node hears of it through
// troupe_approval, and the run's node over CAF too, once.
void wake_holder(registry_pointer self, const approval_record& r) {
  if (auto& notifier = self->state.options.notifier)
    caf::anon_send(notifier, notify_atom::value, std::string(approval_channel), r.request_id, r.request_id);
  auto& peers = self->state.options.peers;
  if (!peers)
    return;
  auto id = r.request_id;
  self->request(self->state.store, caf::infinite, get_run_atom::value, r.run_id)
    .then(
      [=](run_record& run) {
        auto node = node_of_worker(run.worker_id);
        if (run.status != "running" || node.empty())
          return;
        self->request(peers, caf::infinite, resolve_atom::value, node, approval_resolution{id})
          .then([](resolve_ack&) {},
                [=](caf::error& err) {
                  spdlog::info("approvals: node {} did not hear of {} ({}); it reads it at its next poll", node, id,
                               message_of(err));
                });
      },
      [](caf::error&) {});
}

// A waited approval's state in the store: once resolved (on another node), its waiters are answered.
void refresh(registry_pointer self, const std::string& id) {
  self->request(self->state.store, caf::infinite, get_approval_atom::value, id)
    .then(
      [=](approval_record& stored) {
        auto& pending = self->state.pending;
        auto it = pending.find(id);
        if (stored.status == "pending" || it == pending.end())
          return;
        auto waiters = std::move(it->second.waiters);
        pending.erase(it);
        for (auto& w : waiters)
          w.deliver(stored);
      },
      [](caf::error&) {});
}

// Moves a pending approval to its final state: stored first, then every waiter is answered. The
// store takes it only while it is pending there; when another node settled it first, the waiters get
// that node's outcome and the requester AS-48's not found.
void settle(registry_pointer self, const std::string& id, const std::string& status, std::string reason,
            std::optional<promise> requester = std::nullopt) {
  auto it = self->state.pending.find(id);
  auto before = it->second.record;
  auto& entry = self->state.settling[id] = std::move(it->second);
  self->state.pending.erase(it);
  auto& r = entry.record;
  r.status = status;
  r.approved = status == "approved";
  r.resolved_at = protocol::iso_now();
  r.resolution_reason = std::move(reason);
  bool waited_here = !entry.waiters.empty();
  self->request(self->state.store, caf::infinite, settle_approval_atom::value, r)
    .then(
      [self, id, requester, waited_here](approval_record& stored) mutable {
        auto waiters = std::move(self->state.settling[id].waiters);
        self->state.settling.erase(id);
        for (auto& w : waiters)
          w.deliver(stored);
        if (requester) {
          requester->deliver(stored);
          if (!waited_here)
            wake_holder(self, stored);
        }
      },
      [self, id, before, requester, status](caf::error& err) mutable {
        if (requester)
          requester->deliver(err);
        auto waiters = std::move(self->state.settling[id].waiters);
        self->state.settling.erase(id);
        if (code_of(err) == errc::not_found) {
          deliver_stored(self, id, std::move(waiters));
          return;
        }
        // A transition the store did not keep did not happen (AS-81): the approval is pending again,
        // its waiters wait on, and only a resolver hears why. An expiry is tried again a moment later.
        spdlog::error("approvals: {} could not be stored {}: {}", before.request_id, status, message_of(err));
        self->state.pending.emplace(before.request_id, pending_approval{before, std::move(waiters)});
        if (status == "expired")
          self->delayed_send(self, std::chrono::seconds(1), expire_atom::value, before.request_id);
      });
}

// CJ-26: a resolution of an approval this node does not hold (another node's run waits on it, or
// it was opened after this node started): settled in the store, then its node is told.
caf::result<approval_record> resolve_elsewhere(registry_pointer self, const std::string& id, bool approve,
                                               const std::string& reason) {
  approval_record r;
  r.request_id = id;
  r.status = approve ? "approved" : "denied";
  r.approved = approve;
  r.resolved_at = protocol::iso_now();
  r.resolution_reason = reason;
  auto rp = self->make_response_promise<approval_record>();
  self->request(self->state.store, caf::infinite, settle_approval_atom::value, r)
    .then(
      [=](approval_record& stored) mutable {
        rp.deliver(stored);
        wake_holder(self, stored);
      },
      [=](caf::error& err) mutable { rp.deliver(err); });
  return rp;
}

// Denies every pending approval of a run that ended (AS-81).
void deny_pending_of(registry_pointer self, const std::string& run_id, const std::string& reason) {
  std::vector<std::string> ids;
  for (auto& [id, p] : self->state.pending)
    if (p.record.run_id == run_id)
      ids.push_back(id);
  for (auto& id : ids)
    settle(self, id, "denied", reason);
}

// Pending approvals of the previous process: expired ones settle, the others wait their remaining time,
// and those of a run that is over (it ended or was failed by recovery while no process could deny
// them) are denied, so nobody approves a call no run will make.
void restore_pending(registry_pointer self) {
  auto store = self->state.store;
  protocol::approval_query pending_query;
  pending_query.filters["status"] = "pending";
  pending_query.limit = 0;
  self->request(store, caf::infinite, list_approvals_atom::value, pending_query)
    .await(
      [=](approval_list& list) {
        auto now = protocol::iso_now();
        for (auto& r : list.page) {
          auto id = r.request_id;
          bool lapsed = r.expires_at <= now;
          self->state.pending.emplace(id, pending_approval{r, {}});
          if (lapsed)
            settle(self, id, "expired", "approval_timeout");
          else
            arm(self, r);
        }
        if (!list.page.empty())
          spdlog::info("approvals: {} pending approvals restored", list.page.size());
        std::set<std::string> runs;
        for (auto& r : list.page)
          runs.insert(r.run_id);
        for (auto& run_id : runs)
          self->request(store, caf::infinite, get_run_atom::value, run_id)
            .await(
              [=](run_record& run) {
                if (protocol::is_terminal(run.status))
                  deny_pending_of(self, run_id, run.status == "cancelled" ? "run_cancelled" : "run_terminated");
              },
              [=](caf::error& err) {
                if (code_of(err) == errc::not_found) // the run is gone from the store
                  deny_pending_of(self, run_id, "run_terminated");
              });
      },
      [](caf::error& err) { spdlog::error("approvals: loading pending approvals failed: {}", message_of(err)); });
}

approval_registry_actor::behavior_type approval_registry_behavior(registry_pointer self, store_actor store,
                                                                 approval_options options) {
  self->state.store = store;
  self->state.options = std::move(options);
  if (self->state.options.poll_seconds > 0)
    self->send(self, tick_atom::value);
  restore_pending(self);
  return {
    [=](open_approval_atom, approval_record& wanted) -> caf::result<approval_record> {
      for (auto& [id, p] : self->state.pending)
        if (same_call(p.record, wanted))
          return p.record;
      for (auto& [id, p] : self->state.settling)
        if (same_call(p.record, wanted)) { // decided; its answer once stored
          auto rp = self->make_response_promise<approval_record>();
          p.waiters.push_back(rp);
          return rp;
        }
      // A resolved approval of an earlier attempt of this run decides the retried call too.
      auto rp = self->make_response_promise<approval_record>();
      protocol::approval_query of_run;
      of_run.filters["run_id"] = wanted.run_id;
      of_run.limit = 0;
      self->request(self->state.store, caf::infinite, list_approvals_atom::value, of_run)
        .then(
          [=](approval_list& list) mutable {
            for (auto& r : list.page)
              if (same_call(r, wanted)) {
                // Pending, it was opened by an attempt on a node that is gone: this node waits on it now.
                if (r.status == "pending" && self->state.pending.emplace(r.request_id, pending_approval{r, {}}).second)
                  arm(self, r);
                rp.deliver(r);
                return;
              }
            auto r = wanted;
            r.request_id = "approval-" + protocol::random_hex(10);
            r.status = "pending";
            r.approved.reset();
            auto now = std::chrono::system_clock::now();
            r.created_at = protocol::iso_timestamp(now);
            r.expires_at = protocol::iso_timestamp(
              now + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                      std::chrono::duration<double>(r.timeout_seconds)));
            self->request(self->state.store, caf::infinite, save_approval_atom::value, r)
              .then(
                [=](approval_record& stored) mutable {
                  self->state.pending.emplace(stored.request_id, pending_approval{stored, {}});
                  arm(self, stored);
                  rp.deliver(stored);
                },
                [=](caf::error& err) mutable { rp.deliver(err); });
          },
          [=](caf::error& err) mutable { rp.deliver(err); });
      return rp;
    },
    [=](await_atom, const std::string& id) -> caf::result<approval_record> {
      if (auto it = self->state.pending.find(id); it != self->state.pending.end()) {
        auto rp = self->make_response_promise<approval_record>();
        it->second.waiters.push_back(rp);
        return rp;
      }
      return self->delegate(self->state.store, get_approval_atom::value, id);
    },
    [=](resolve_atom, const std::string& id, bool approve, const std::string& reason) -> caf::result<approval_record> {
      auto why = reason.empty() ? std::string(approve ? "approved" : "denied") : reason;
      bool in_cluster = self->state.options.poll_seconds > 0;
      if (self->state.pending.count(id) == 0) {
        if (!in_cluster || self->state.settling.count(id) != 0)
          return make_error(errc::not_found, "Approval request not found or already resolved");
        return resolve_elsewhere(self, id, approve, why);
      }
      auto rp = self->make_response_promise<approval_record>();
      settle(self, id, approve ? "approved" : "denied", why, rp);
      return rp;
    },
    [=](run_ended_atom, const std::string& run_id, const std::string& reason) {
      deny_pending_of(self, run_id, reason);
    },
    [=](expire_atom, const std::string& id) {
      auto it = self->state.pending.find(id);
      if (it == self->state.pending.end())
        return;
      if (it->second.record.expires_at > protocol::iso_now()) { // the timer fired early: wait on
        arm(self, it->second.record);
        return;
      }
      settle(self, id, "expired", "approval_timeout");
    },
    // Only an approval a run here waits on is read again: anyone on the database may NOTIFY.
    [=](wake_atom, const std::string& id) {
      if (self->state.pending.count(id) != 0)
        refresh(self, id);
    },
    [=](tick_atom) {
      for (auto& [id, p] : self->state.pending)
        if (!p.waiters.empty())
          refresh(self, id);
      self->delayed_send(self, std::chrono::milliseconds(static_cast<int64_t>(self->state.options.poll_seconds * 1000)),
                         tick_atom::value);
    },
  };
}

} // namespace

approval_registry_actor spawn_approval_registry(caf::actor_system& sys, store_actor store, approval_options options) {
  return sys.spawn(approval_registry_behavior, std::move(store), std::move(options));
}

} // namespace troupe
