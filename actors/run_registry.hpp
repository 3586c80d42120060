// The run registry: one per node; it spawns run actors, knows the live ones and cancels them.
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

using run_registry_actor = caf::typed_actor<
  // Spawns and starts a run whose events go to the subscriber; errc::conflict when its id is live
  // (AS-10: "Run already exists").
  caf::replies_to<spawn_run_atom, run_spec, caf::actor>::with<run_actor>,
  // Cancels a live run; errc::not_found when there is none.
  caf::replies_to<cancel_atom, std::string>::with<bool>,
  // Cancels every live run (shutdown after the grace period).
  caf::reacts_to<cancel_all_atom>,
  // The number of live runs.
  caf::replies_to<count_atom>::with<uint64_t>>;

run_registry_actor spawn_run_registry(caf::actor_system& sys, std::shared_ptr<const run_environment> env);

} // namespace troupe
