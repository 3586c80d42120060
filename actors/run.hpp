// The run actor: one per run; it owns the agent loop, the history and the event sequence.
#pragma once

#include "actors/atoms.hpp"
#include "actors/messages.hpp"
#include "actors/run_environment.hpp"

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <memory>

namespace troupe {

using run_actor = caf::typed_actor<
  caf::reacts_to<start_atom>,
  // Stops the run at once: the model request and the tool call in flight are cancelled, an `error`
  // "Run cancelled" event ends it (AS-52). A terminal run ignores it.
  caf::reacts_to<cancel_atom>,
  caf::reacts_to<model_done_atom, uint64_t, protocol::model_outcome>,
  caf::reacts_to<tool_result_atom, uint64_t, tool_outcome, double>>;

// Spawns a run that sends (event_atom, agent_event) for each event and finally
// (run_end_atom, run_result) to `subscriber` (which may be invalid). It waits for start_atom.
run_actor spawn_run(caf::actor_system& sys, std::shared_ptr<const run_environment> env, run_spec spec,
                    caf::actor subscriber);

} // namespace troupe
