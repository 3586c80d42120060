// The agent service's durable-run surface (AS-49..AS-55, AS-59, AS-74): background runs, their events and
// resumable streams, cancellation and traces, each a thin adapter onto the registry and the store.
#pragma once

#include "actors/cluster_messages.hpp"
#include "actors/metrics.hpp"
#include "actors/run_registry.hpp"
#include "actors/store.hpp"
#include "io/router.hpp"
#include "protocol/config.hpp"

#include <caf/actor_system.hpp>

#include <memory>

namespace troupe::io {

// `store` may be invalid: the routes then answer 503 (AS-49). Also GET /v1/metrics (AS-59) and
// GET /metrics (Prometheus text).
// `peers`, on a node with remoting, lets a run stream follow a run another node holds live (CJ-27).
void add_run_routes(router& routes, caf::actor_system& sys, run_registry_actor registry, store_actor store,
                    std::shared_ptr<node_metrics> metrics, const protocol::config& config,
                    cluster_peers_actor peers = {});

} // namespace troupe::io
