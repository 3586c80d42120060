// Background responses no live run of this node carries (RS-55, RS-6 across nodes): those a stopped
// process or a dead node left unfinished fail, and a stream of one another node runs follows the store.
#pragma once

#include "actors/cluster_messages.hpp"
#include "actors/response_run.hpp"
#include "actors/response_store.hpp"

#include <caf/actor_system.hpp>
#include <caf/timestamp.hpp>

#include <functional>
#include <string>

namespace troupe {

// RS-55: the queued or in-progress responses `abandoned` picks (at start, those the last stop left; in
// a cluster, those of nodes no longer alive, CJ-16) fail with `message`, their streams ended with a
// terminal event. Blocks until they are stored.
void fail_unfinished_responses(caf::actor_system& sys, response_store_actor store,
                               const std::function<bool(const response_row&)>& abandoned, const std::string& message);

// The stored events of a response's log, as a stream sends them.
std::vector<protocol::responses::stream_event> stream_events(std::vector<response_event>& stored);

// RS-6 through a node that does not run the response (CJ-27): sends `relay` what the store holds after
// `after`, then every `every` what was stored since, and the response's end once it is finished. With
// `peers`, the node the row names as running it feeds the relay live meanwhile, with credit (the
// relay gets `(feed_atom, feed_events)` then), and the store tail waits until that feed ends. Stops
// when the relay does.
void spawn_response_tail(caf::actor_system& sys, response_store_actor store, std::string id, response_owner owner,
                         int64_t after, caf::actor relay, caf::timespan every, cluster_peers_actor peers = {});

} // namespace troupe
