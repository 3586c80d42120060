// The agent service's HTTP surface (spec/agent-service.md): health, readiness, tools and
// POST /v1/chat/completions, each a thin adapter from request to actor message and back.
#pragma once

#include "actors/cluster_membership.hpp"
#include "actors/run_registry.hpp"
#include "actors/store.hpp"
#include "actors/tool_router.hpp"
#include "io/exec_sandbox.hpp"
#include "io/router.hpp"
#include "protocol/config.hpp"

#include <caf/actor_system.hpp>

#include <string>
#include <vector>

namespace troupe::io {

struct agent_service_info {
  protocol::config config;
  std::shared_ptr<const tool_router> tools; // built-ins, then MCP
  store_actor store;                        // counts rate-limit windows (AS-92); may be invalid
  std::string version;
  std::shared_ptr<const exec_sandbox> sandbox; // what /ready reports of exec; may be null (none)
  std::shared_ptr<const node_status> node;     // a cluster node's state (CJ-15); null on an embedded store
};

void add_agent_routes(router& routes, caf::actor_system& sys, run_registry_actor registry,
                      agent_service_info info);

} // namespace troupe::io
