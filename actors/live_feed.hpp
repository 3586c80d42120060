// CJ-27's sending side: a run or a background response live on this node, followed by a stream on
// another node. A feed subscribes here like a local stream and sends its subscriber each committed
// event as its SSE frame, one credit each; at zero credit it drops what comes, buffering nothing, and
// the subscriber reads the gap from the store. It ends with the run or response, with the attempt
// here, or with the subscriber (or its connection).
#pragma once

#include "actors/cluster_messages.hpp"
#include "actors/response_registry.hpp"
#include "actors/run_registry.hpp"

#include <caf/actor_system.hpp>

namespace troupe {

// A feed answers `(subscribe_atom)` once with its feed_ack: itself while this node feeds the stream,
// else none (and it stops).
caf::actor spawn_run_feed(caf::actor_system& sys, run_registry_actor registry, feed_request request);

// A background response's feed sends what its run delivered after `request.after` first.
caf::actor spawn_response_feed(caf::actor_system& sys, response_registry_actor registry, feed_request request);

} // namespace troupe
