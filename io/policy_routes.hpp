// The agent service's policy and approval surface (AS-39, AS-40, AS-47, AS-48): GET /v1/policy,
// POST /v1/policy/check, and listing, reading and resolving approvals.
#pragma once

#include "actors/approval_registry.hpp"
#include "actors/store.hpp"
#include "io/router.hpp"
#include "protocol/config.hpp"

#include <caf/actor_system.hpp>

namespace troupe::io {

void add_policy_routes(router& routes, caf::actor_system& sys, approval_registry_actor approvals, store_actor store,
                       const protocol::config& config);

} // namespace troupe::io
