#include "actors/job_waiters.hpp"

#include "actors/errors.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <list>
#include <memory>
#include <set>
#include <vector>

namespace troupe {

namespace {

constexpr auto store_timeout = std::chrono::seconds(30);

caf::timespan seconds(double s) {
  return std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(s));
}

struct waiter {
  uint64_t id = 0;
  job_claim_request claim;
  caf::typed_response_promise<job_claim> reply;
};

// Waiters with equal filters find the same jobs: once one of them found none, a pass skips the rest.
std::string filter_of(const job_claim_request& c) {
  std::string key;
  for (auto& t : c.types)
    key += t + '\n';
  key += '\0';
  for (auto& t : c.tenants)
    key += t + '\n';
  return key;
}

bool wants(const job_claim_request& c, const std::string& type) {
  return type.empty() || c.types.empty() || std::find(c.types.begin(), c.types.end(), type) != c.types.end();
}

struct waiters_state {
  static inline const char* name = "job_waiters";
  job_store_actor store;
  job_waiter_settings settings;
  std::list<waiter> queue; // first come, first served
  std::string after_tenant; // the tenant the last claim served last (CJ-19)
  bool passing = false;     // a pass over the queue is claiming
  std::string again;        // a wake-up came during the pass: the type to pass for next ("" any)
  bool again_pending = false;
  int64_t arriving = 0;     // leases that may wait, claiming for the first time: they count as waiters
};

using pointer = job_waiters_actor::stateful_pointer<waiters_state>;

// The claim as this node makes it: its turn among tenants, the fair share and the caps.
job_claim_request as_claimed(pointer self, job_claim_request c) {
  c.after_tenant = self->state.after_tenant;
  c.fair_share = self->state.settings.fair_share;
  c.caps = self->state.settings.caps;
  return c;
}

void remember_turn(pointer self, const job_claim& got) {
  if (!got.jobs.empty())
    self->state.after_tenant = got.jobs.back().tenant_key;
}

void pass(pointer self, std::string type);

// One pass: the waiters queued when it began, in order, and the filters found dry so far.
struct pass_state {
  std::string type;
  std::vector<uint64_t> order;
  std::size_t next = 0;
  std::set<std::string> dry;
};

std::list<waiter>::iterator find_waiter(pointer self, uint64_t id) {
  auto& q = self->state.queue;
  return std::find_if(q.begin(), q.end(), [id](const waiter& w) { return w.id == id; });
}

// Claims for the pass's next waiter that still waits and may find something, one claim at a time.
void claim_next(pointer self, std::shared_ptr<pass_state> p) {
  auto& st = self->state;
  auto it = st.queue.end();
  while (p->next < p->order.size() && it == st.queue.end()) {
    it = find_waiter(self, p->order[p->next++]);
    if (it != st.queue.end() && (!wants(it->claim, p->type) || p->dry.count(filter_of(it->claim))))
      it = st.queue.end();
  }
  if (it == st.queue.end()) {
    st.passing = false;
    if (st.again_pending) {
      st.again_pending = false;
      pass(self, st.again);
    }
    return;
  }
  auto id = it->id;
  auto filter = filter_of(it->claim);
  self->request(st.store, store_timeout, job_lease_atom::value, as_claimed(self, it->claim))
    .then(
      [=](job_claim& got) {
        if (got.jobs.empty()) {
          p->dry.insert(filter);
          return claim_next(self, p);
        }
        remember_turn(self, got);
        auto w = find_waiter(self, id);
        if (w != self->state.queue.end()) {
          w->reply.deliver(std::move(got));
          self->state.queue.erase(w);
        } else {
          // The waiter left while its claim ran: the jobs go back, uncharged.
          job_release r;
          for (auto& j : got.jobs)
            r.leases.emplace_back(j.id, j.lease_token);
          caf::anon_send(self->state.store, job_release_atom::value, std::move(r));
        }
        claim_next(self, p);
      },
      [=](caf::error&) { claim_next(self, p); });
}

void pass(pointer self, std::string type) {
  auto& st = self->state;
  if (st.queue.empty())
    return;
  if (st.passing) {
    // One pass at a time; the next one covers every type asked for meanwhile.
    st.again = st.again_pending && st.again != type ? std::string() : type;
    st.again_pending = true;
    return;
  }
  st.passing = true;
  auto p = std::make_shared<pass_state>();
  p->type = std::move(type);
  for (auto& w : st.queue)
    p->order.push_back(w.id);
  claim_next(self, std::move(p));
}

job_waiters_actor::behavior_type waiters_behavior(pointer self, job_store_actor store, job_waiter_settings settings) {
  self->state.store = std::move(store);
  self->state.settings = std::move(settings);
  auto& s = self->state.settings;
  self->delayed_send(self, seconds(s.poll_seconds), tick_atom::value);
  if (s.sweep_interval_seconds > 0)
    self->delayed_send(self, seconds(s.sweep_interval_seconds), job_sweep_atom::value);
  return {
    [=](job_lease_atom, job_wait& w) -> caf::result<job_claim> {
      auto& st = self->state;
      bool may_wait = w.wait_seconds > 0;
      if (may_wait && static_cast<int64_t>(st.queue.size()) + st.arriving >= st.settings.max_waiters)
        return make_error(errc::rate_limited, "Too many lease requests are waiting on this node; retry shortly");
      st.arriving += may_wait ? 1 : 0;
      auto rp = self->make_response_promise<job_claim>();
      self->request(st.store, store_timeout, job_lease_atom::value, as_claimed(self, w.claim))
        .then(
          [=](job_claim& got) mutable {
            self->state.arriving -= may_wait ? 1 : 0;
            remember_turn(self, got);
            if (!got.jobs.empty() || w.wait_seconds <= 0) {
              rp.deliver(std::move(got));
              return;
            }
            self->state.queue.push_back(waiter{w.waiter, std::move(w.claim), rp});
            self->delayed_send(self, seconds(w.wait_seconds), expire_atom::value, w.waiter);
          },
          [=](caf::error& err) mutable {
            self->state.arriving -= may_wait ? 1 : 0;
            rp.deliver(std::move(err));
          });
      return rp;
    },
    [=](wake_atom, std::string& type) { pass(self, std::move(type)); },
    // The caller left, or its wait ran out: it is answered with nothing.
    [=](leave_atom, uint64_t id) { self->send(self, expire_atom::value, id); },
    [=](expire_atom, uint64_t id) {
      auto w = find_waiter(self, id);
      if (w == self->state.queue.end())
        return;
      w->reply.deliver(job_claim{});
      self->state.queue.erase(w);
    },
    [=](tick_atom) {
      // A job whose run_after or retry time came, or a wake-up another node's notice lost.
      pass(self, "");
      self->delayed_send(self, seconds(self->state.settings.poll_seconds), tick_atom::value);
    },
    [=](job_sweep_atom) {
      auto& s = self->state.settings;
      self->request(self->state.store, store_timeout, job_sweep_atom::value, s.backoff)
        .then([=](int64_t) {}, [=](caf::error&) {});
      self->delayed_send(self, seconds(s.sweep_interval_seconds), job_sweep_atom::value);
    },
  };
}

} // namespace

job_waiters_actor spawn_job_waiters(caf::actor_system& sys, job_store_actor store, job_waiter_settings settings) {
  return sys.spawn(waiters_behavior, std::move(store), std::move(settings));
}

} // namespace troupe
