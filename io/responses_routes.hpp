// The Responses gateway's HTTP surface (responses.md §1): responses, their replays, compaction,
// conversations and models, each a thin adapter onto the response runs and the response store.
#pragma once

#include "actors/response_run.hpp"
#include "io/model_catalog.hpp"
#include "io/router.hpp"
#include "protocol/config.hpp"

#include <caf/actor_system.hpp>

#include <memory>

namespace troupe::io {

// `models` routes and lists the model names (RS-2, RS-13).
void add_responses_routes(router& routes, caf::actor_system& sys, std::shared_ptr<const response_environment> env,
                          std::shared_ptr<live_responses> live, std::shared_ptr<const model_catalog> models,
                          const protocol::config& config);

// RS-55: every stored response still queued or in_progress failed, its terminal event appended.
// Runs once at startup, before the listener opens.
void fail_unfinished_responses(caf::actor_system& sys, response_store_actor store);

} // namespace troupe::io
