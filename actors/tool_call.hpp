// The tool_call actor: one per call the agent loop runs; executes it through its tool port, bounded
// by a timeout (DESIGN.md's actor table: the policy decision and the approval wait are the dialect's
// gate, before the call is spawned).
#pragma once

#include "actors/atoms.hpp"
#include "actors/messages.hpp"
#include "actors/tool_port.hpp"

#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <memory>

namespace troupe {

struct call_result {
  tool_outcome outcome; // a refused call: the refusal
  double duration_ms = 0;
  bool timed_out = false;
  bool refused = false; // the dialect's gate did not let it run
};

using tool_call_actor = caf::typed_actor<
  caf::reacts_to<cancel_atom>,                   // stop the call; no result is sent
  caf::reacts_to<tool_done_atom, tool_outcome>,  // from the port
  caf::reacts_to<timeout_atom>>;

// Starts `call` at once and answers `reply_to` with (tool_result_atom, key, call_result) exactly
// once unless cancelled; `timeout_seconds` > 0 bounds it. It monitors `reply_to`: when the run goes
// down, the call is cancelled with it.
tool_call_actor spawn_tool_call(caf::actor_system& sys, caf::actor reply_to, uint64_t key,
                                std::shared_ptr<tool_port> port, tool_invocation call, double timeout_seconds);

} // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::call_result)
