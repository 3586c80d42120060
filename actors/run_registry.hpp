// The run registry: one per node. It starts chat runs at once and background runs as capacity allows
// (claiming them from the store under a lease), knows the live attempts, their subscribers, and
// cancels them; a periodic sweep recovers runs whose lease lapsed (AS-53, AS-54, AS-83).
#pragma once

#include "actors/atoms.hpp"
#include "actors/messages.hpp"
#include "actors/run.hpp"
#include "actors/run_environment.hpp"

#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <memory>

namespace troupe {

struct scheduler_options {
  int run_concurrency = 4; // background attempts at once; 0 = unlimited
  int run_max_attempts = 3;
  double run_lease_seconds = 300;
  double run_recovery_interval_seconds = 15;
  uint32_t claim_batch = 8;       // at most this many runs per claim (CJ-18)
  int64_t tenant_max_running = 0; // a tenant's running background runs, cluster-wide; 0: no cap (CJ-19)
  int64_t max_handoffs = 10;      // handbacks a run gets uncharged (cluster.max_handoffs, CJ-16)
  std::string worker_id; // worker-<hex>, fresh per process; node-<hex> claims as worker-<hex>
};

using run_registry_actor = caf::typed_actor<
  // Begins a chat run (a new one, or a terminal chat run reopened, AS-10) and spawns its attempt with
  // the subscriber; errc::conflict ("Run already exists") when its id is live or not reopenable.
  caf::replies_to<spawn_run_atom, run_spec, caf::actor>::with<run_actor>,
  // Stores a background run as `queued` and answers its record once durable (AS-49); errc::conflict
  // for a taken id, errc::unavailable without a store.
  caf::replies_to<submit_atom, run_spec>::with<run_record>,
  // Sends the run's future events and its end to the subscriber from every attempt on this node, and
  // `attempt_gone` when such an attempt stops; answered once that holds, so events stored after the
  // answer are never missed (AS-74). True when an attempt here feeds it now; false when none does (the
  // run is queued, over, or held by another node: the store has its events).
  caf::replies_to<subscribe_atom, std::string, caf::actor>::with<bool>,
  // Cancels a run (AS-52) and answers its record once it is cancelled; a terminal run is unchanged.
  // A run another node holds is stopped there through its node actor when remoting is on (CJ-25),
  // else, or when that node does not answer, ended through the store.
  caf::replies_to<cancel_atom, std::string>::with<run_record>,
  // CJ-25, asked by another node: stops this node's attempt of the run at that lease epoch and
  // answers once its end is stored; errc::not_found when this node holds no such attempt.
  caf::replies_to<cancel_atom, std::string, int64_t>::with<run_record>,
  // Shutdown after the grace period: chat runs are cancelled; background attempts stop where they
  // are and the next start recovers them (AS-83).
  caf::reacts_to<cancel_all_atom>,
  // A draining node (CJ-15): nothing more is claimed or swept; live attempts go on. Answers how many
  // background attempts still work (one waiting on an approval does not: it is handed back at once).
  caf::replies_to<drain_atom>::with<uint64_t>,
  // Claims ready queued runs while there is capacity.
  caf::reacts_to<schedule_atom>,
  // The recovery sweep (every service.run_recovery_interval_seconds).
  caf::reacts_to<tick_atom>,
  // One recovery sweep now: nodes were declared dead, their leases expired (CJ-13).
  caf::reacts_to<recover_atom>,
  // The node fenced itself (CJ-14): every live attempt stops without another write, nothing is
  // claimed, and new runs are refused (errc::unavailable) until unfenced.
  caf::reacts_to<fence_atom>,
  // The node may work again, under this worker id (a fresh node id after a rejoin).
  caf::reacts_to<unfence_atom, std::string>,
  // The number of live attempts.
  caf::replies_to<count_atom>::with<uint64_t>>::extend_with<run_slots_actor>;

run_registry_actor spawn_run_registry(caf::actor_system& sys, std::shared_ptr<const run_environment> env,
                                      scheduler_options options = {});

// worker-<12 hex digits>, fresh per call.
std::string new_worker_id();

} // namespace troupe
