// One PSKA digest job carried through (agent-service.md §11): leased at PSKA, its lease kept by
// heartbeats (AS-86, CJ-44), its batches paged (AS-67), one troupe run per batch started through
// troupe's public API and judged from every event (AS-69, AS-72, AS-87, CJ-45), and the job
// completed or failed at PSKA, or left alone once its lease is lost. Everything goes through the web
// port: the worker uses only PSKA's HTTP API and troupe's public one (AS-66).
#pragma once

#include "actors/web_port.hpp"
#include "protocol/pska_digest.hpp"

#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <string>

namespace troupe {

using settle_atom = caf::atom_constant<caf::atom("settle")>;

// pska_digest_worker.* as one job needs it.
struct digest_job_settings {
  std::string pska_url;
  std::string troupe_url;
  std::string pska_service_token;
  std::string troupe_service_token;
  std::string worker_id;
  int64_t lease_seconds = 300;
  int64_t batch_limit = 1;
  double run_timeout_seconds = 900;
  double run_poll_seconds = 2;
  double request_timeout_seconds = 30; // pska_timeout_seconds, for both sides
};

// How a job ended for this worker.
struct digest_job_outcome {
  enum class kind {
    completed,  // every batch passed; PSKA was told `complete`
    failed,     // a batch or a step failed; PSKA was told `fail` (retryable)
    lease_lost, // the lease went elsewhere: PSKA was told nothing (AS-86)
    not_leased, // another worker holds the job (a 409 on lease)
  };
  kind what = kind::failed;
  std::string job_id;
  std::string message; // the failure, or the complete body sent
  int64_t batch_count = 0;
};

using digest_job_actor = caf::typed_actor<
  // Carries the job through once; answers when it has ended.
  caf::replies_to<start_atom>::with<digest_job_outcome>,
  // The job is given up (the worker drains, CJ-46; its troupe job is gone, CJ-43): the batch's run is
  // cancelled and the job fails retryably with this error, unless its lease is lost.
  caf::reacts_to<cancel_atom, std::string>,
  // Internal: the lease's heartbeat, the run's poll.
  caf::reacts_to<tick_atom>, caf::reacts_to<timeout_atom>>;

digest_job_actor spawn_digest_job(caf::actor_system& sys, digest_job_settings settings, protocol::pska::tenant who,
                                  protocol::pska::job job, web_port_actor web);

} // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::digest_job_outcome)
