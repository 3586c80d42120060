// CJ-27's sending side: a run held on this node, followed by a stream on another node. The feed
// subscribes to the run's attempt here like a local stream and sends its subscriber each committed
// event as its SSE frame, one credit each; at zero credit it drops what comes, buffering nothing, and
// the subscriber reads the gap from the store. It ends with the run, with the attempt here, or with
// the subscriber (or its connection).
#pragma once

#include "actors/cluster_messages.hpp"
#include "actors/run_registry.hpp"

#include <caf/actor_system.hpp>

#include <string>

namespace troupe {

// The feed answers `(subscribe_atom)` once with its feed_ack: itself while an attempt here feeds the
// run, else none (and it stops).
caf::actor spawn_run_feed(caf::actor_system& sys, run_registry_actor registry, feed_request request);

} // namespace troupe
