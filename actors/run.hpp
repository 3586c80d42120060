// The run actor: one per run; it owns the agent loop, the history and the event sequence.
#pragma once

#include "actors/agent_loop.hpp"
#include "actors/atoms.hpp"
#include "actors/messages.hpp"
#include "actors/run_environment.hpp"

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <memory>
#include <vector>

namespace troupe {

using run_actor = caf::typed_actor<
  caf::reacts_to<start_atom>,
  // Stops the run at once: the model request and the tool call in flight are cancelled, an `error`
  // "Run cancelled" event ends it (AS-52). A terminal run ignores it.
  caf::reacts_to<cancel_atom>,
  // Adds a subscriber of the run's events; answered once it takes effect (AS-74).
  caf::replies_to<subscribe_atom, caf::actor>::with<bool>,
  // Answered while the run is responsive: the lease keeper renews its lease only then (AS-82).
  caf::replies_to<ping_atom>::with<bool>,
  // The run's lease was taken over: it stops at once and writes nothing more (AS-82).
  caf::reacts_to<fenced_atom>>::extend_with<loop_actor>;

// The registry's side of a background attempt's concurrency slot (AS-53): an attempt that waits on
// an approval gives its slot back, so waiting runs never stall the others, and asks for a slot again
// (answered once it holds one) before it continues. Both name the attempt's run id.
using run_slots_actor = caf::typed_actor<caf::reacts_to<release_slot_atom, std::string>,
                                         caf::replies_to<acquire_slot_atom, std::string>::with<bool>>;

// Spawns a run attempt. Each event is stored (fenced by the attempt's lease epoch) and then sent as
// (event_atom, agent_event) to every subscriber; a terminal run then sends (run_end_atom, run_result).
// An attempt that is re-queued for a retry, or fenced, just stops: its subscribers stay with the run.
// It waits for start_atom. `slots` (invalid: the attempt holds no slot) is asked around approval waits.
run_actor spawn_run(caf::actor_system& sys, std::shared_ptr<const run_environment> env, run_spec spec,
                    std::vector<caf::actor> subscribers, run_slots_actor slots = {});

} // namespace troupe
