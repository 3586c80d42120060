// The lease keeper: renews the lease of every live attempt every lease/3 while its run actor still
// answers, so a wedged run lapses and is recovered (AS-82, AS-83); an attempt whose lease was taken
// over is told so and stops.
#pragma once

#include "actors/atoms.hpp"
#include "actors/metrics.hpp"
#include "actors/run.hpp"
#include "actors/store.hpp"

#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <memory>
#include <string>

namespace troupe {

using lease_keeper_actor = caf::typed_actor<
  // Keeps the lease of (run_id, lease_epoch) held by `run` until the run ends.
  caf::reacts_to<track_atom, std::string, int64_t, run_actor>,
  caf::reacts_to<tick_atom>>;

lease_keeper_actor spawn_lease_keeper(caf::actor_system& sys, store_actor store, double lease_seconds,
                                      std::shared_ptr<node_metrics> metrics);

} // namespace troupe
