// The PSKA digest worker's driver (CJ-42, CJ-43): every poll_seconds it asks PSKA for each tenant's
// ready digest jobs and fills its free slots from them, tenants taking turns, at most max_per_tenant
// jobs of one tenant and max_concurrent in all; each job is a digest_job actor of its own. Its jobs
// reach the web through it, so it keeps PSKA's and troupe's breakers and admits no job while either
// is open or paused by a Retry-After (CJ-46).
#pragma once

#include "actors/pska_digest_job.hpp"

#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <vector>

namespace troupe {

struct pska_worker_settings {
  digest_job_settings job;
  std::vector<protocol::pska::tenant> tenants;
  double poll_seconds = 5;
  int64_t max_concurrent = 8;
  int64_t max_per_tenant = 2;
  double drain_grace_seconds = 30;
  // CJ-43, source "troupe": long-poll troupe's pska.digest jobs instead of PSKA's list, and settle
  // each troupe job as its PSKA job was settled.
  bool from_troupe = false;
  int64_t breaker_failures = 5;
};

// What the worker has done so far.
struct pska_worker_stats {
  int64_t running = 0;
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t lease_lost = 0;
};

using pska_worker_actor = caf::typed_actor<
  caf::replies_to<status_atom>::with<pska_worker_stats>,
  // The jobs' web port: each request goes on to the real one, its outcome feeds the breaker of its
  // side (CJ-46).
  caf::replies_to<web_atom, web_request>::with<web_response>,
  // CJ-46: admission stops; jobs unfinished after drain_grace_seconds are cancelled and fail
  // retryably. Answers once no job is left.
  caf::replies_to<drain_atom>::with<pska_worker_stats>,
  caf::reacts_to<timeout_atom>,
  // Internal (source "troupe"): the troupe jobs' leases renewed.
  caf::reacts_to<renew_atom>,
  // Internal: the poll, and a job's end.
  caf::reacts_to<tick_atom>, caf::reacts_to<run_end_atom, digest_job_outcome, int64_t /*tenant index*/>>;

pska_worker_actor spawn_pska_worker(caf::actor_system& sys, pska_worker_settings settings, web_port_actor web);

} // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::pska_worker_stats)
