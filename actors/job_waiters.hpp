// CJ-33: a node's long polls for jobs. A lease that finds nothing waits here, first come first
// served, until a local enqueue or a troupe_jobs notice wakes it, a poll tick passes or its deadline
// does; then it claims once more. The actor also keeps the claims' turn among tenants (CJ-19) and
// fails expired leases every jobs.sweep_interval_seconds (CJ-37).
#pragma once

#include "actors/job_store.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>

namespace troupe {

using leave_atom = caf::atom_constant<caf::atom("leave")>;

// One lease request: the claim, how long it may wait, and the id its caller leaves with.
struct job_wait {
  job_claim_request claim;
  double wait_seconds = 0;
  uint64_t waiter = 0;
};

struct job_waiter_settings {
  int64_t max_waiters = 10000;
  double poll_seconds = 1;
  double sweep_interval_seconds = 1; // 0: no sweep
  job_backoff backoff;
  bool fair_share = true;
  std::map<std::string, int64_t> caps; // jobs.types.<type>.max_leased_per_tenant
};

using job_waiters_actor = caf::typed_actor<
  // The claimed jobs, maybe none once the wait ran out; rate_limited past max_waiters.
  caf::replies_to<job_lease_atom, job_wait>::with<job_claim>,
  // Jobs of `type` ("" any) may be ready: waiters claim again.
  caf::reacts_to<wake_atom, std::string>,
  // The caller went away: its wait ends unanswered.
  caf::reacts_to<leave_atom, uint64_t>,
  // Internal: a poll tick, a waiter's deadline, the sweep.
  caf::reacts_to<tick_atom>, caf::reacts_to<expire_atom, uint64_t>, caf::reacts_to<job_sweep_atom>>;

job_waiters_actor spawn_job_waiters(caf::actor_system& sys, job_store_actor store, job_waiter_settings settings);

} // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::job_wait)
