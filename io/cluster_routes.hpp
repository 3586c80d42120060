// A cluster node's views (CJ-17): GET /v1/cluster lists the nodes (service token), and
// GET /v1/cluster/health answers 200 while this node works, 503 while it is fenced or leaving, so a
// load balancer sends requests elsewhere.
#pragma once

#include "actors/cluster_membership.hpp"
#include "actors/node_store.hpp"
#include "io/router.hpp"
#include "protocol/config.hpp"

#include <caf/actor_system.hpp>

#include <memory>

namespace troupe::io {

void add_cluster_routes(router& routes, caf::actor_system& sys, node_store_actor nodes,
                        std::shared_ptr<const node_status> status, const protocol::config& config);

} // namespace troupe::io
