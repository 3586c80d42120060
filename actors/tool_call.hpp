// The tool_call actor: one per call; executes it through the tool port, bounded by a timeout.
#pragma once

#include "actors/atoms.hpp"
#include "actors/messages.hpp"
#include "actors/tool_port.hpp"

#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <memory>

namespace troupe {

using tool_call_actor = caf::typed_actor<
  caf::reacts_to<cancel_atom>,                   // stop the call; no result is sent
  caf::reacts_to<tool_done_atom, tool_outcome>,  // from the port
  caf::reacts_to<timeout_atom>>;

// Starts `call` at once and answers `reply_to` with (tool_result_atom, call_index, outcome,
// duration_ms) exactly once unless cancelled. It monitors `reply_to`: when the run goes down, the
// call is cancelled with it.
tool_call_actor spawn_tool_call(caf::actor_system& sys, caf::actor reply_to, uint64_t call_index,
                                std::shared_ptr<tool_port> port, tool_invocation call,
                                double timeout_seconds);

} // namespace troupe
