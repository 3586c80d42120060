// The Responses gateway's HTTP surface (responses.md §1): responses, their replays, compaction,
// conversations and models, each parse → ask (the response registry or the store) → render.
#pragma once

#include "actors/response_registry.hpp"
#include "io/model_catalog.hpp"
#include "io/router.hpp"
#include "protocol/config.hpp"

#include <caf/actor_system.hpp>

#include <memory>

namespace troupe::io {

// `models` routes and lists the model names (RS-2, RS-13). Every request reaches the registry or,
// for conversations and listings that no run touches, the store.
void add_responses_routes(router& routes, caf::actor_system& sys, response_registry_actor registry,
                          response_store_actor store, std::shared_ptr<const model_catalog> models,
                          const protocol::config& config);

// The registry's settings from the configuration; request-declared MCP servers are reached over
// streamable HTTP.
response_registry_options registry_options(const protocol::config& config);

} // namespace troupe::io
