// POST /v1/responses/compact (RS-52): one actor per request summarizes a history with one model
// round and stores the compacted window as a response of its own.
#pragma once

#include "actors/atoms.hpp"
#include "actors/response_run.hpp"

#include <caf/typed_actor.hpp>

#include <memory>
#include <string>
#include <vector>

namespace troupe {

using response_compaction_actor = caf::typed_actor<
  // The compaction object; it ends the actor.
  caf::replies_to<compact_atom, protocol::responses::request, response_owner>::with<std::string>,
  caf::reacts_to<upstream_atom, uint64_t, std::vector<protocol::responses::upstream_event>>>;

response_compaction_actor spawn_response_compaction(caf::actor_system& sys,
                                                    std::shared_ptr<const response_environment> env);

} // namespace troupe
