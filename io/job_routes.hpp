// The jobs API (cluster-and-jobs.md §5, CJ-30 to CJ-41): enqueue, lease with long poll, heartbeat,
// complete, fail, cancel, retry and the reads, each a thin adapter onto the job store and the node's
// job waiters. The service token spans tenants; a caller identified per auth.mode is confined to its
// own (AS-84).
#pragma once

#include "actors/job_store.hpp"
#include "actors/job_waiters.hpp"
#include "actors/run_registry.hpp"
#include "actors/wakeups.hpp"
#include "io/router.hpp"
#include "protocol/config.hpp"

#include <caf/actor_system.hpp>

namespace troupe::io {

struct job_routes_context {
  job_store_actor store;
  job_waiters_actor waiters;
  run_registry_actor registry; // starts the follow-up runs completions create (CJ-40)
  notifier_actor notifier;     // tells the other nodes of new jobs and runs; none on one node
};

void add_job_routes(router& routes, caf::actor_system& sys, job_routes_context jobs, const protocol::config& config);

} // namespace troupe::io
