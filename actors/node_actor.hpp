// The node actor (CJ-22 to CJ-25): what other nodes of the cluster reach of this one. It runs the
// serving side of the HMAC handshake through a handshake_gate, keyed by the peer's CAF node, and
// serves welcomed peers only: a cancel stops the attempt this node holds, a resolution wakes the run
// waiting here on an approval resolved elsewhere, a forwarded workspace command goes to the log it
// names (which carries it out while this node owns it), a feed request relays a run's live events
// to a stream on the asking node (actors/run_feed.hpp), a ping answers the node id.
// Publishing it on a socket is the edge's work (io/cluster_peers.hpp).
#pragma once

#include "actors/approval_registry.hpp"
#include "actors/cluster_membership.hpp"
#include "actors/response_registry.hpp"
#include "actors/cluster_messages.hpp"
#include "actors/node_store.hpp"
#include "actors/run_registry.hpp"
#include "actors/workspace_log.hpp"

#include <caf/actor_system.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace troupe {

struct node_actor_options {
  std::string cluster_id;
  std::string secret;
  std::optional<std::string> secret_previous;
  std::shared_ptr<node_status> status;     // this node's id now (it changes on a rejoin)
  double request_timeout_seconds = 2;      // a read of `nodes`, a cancel on this node
  std::chrono::milliseconds nodes_fresh{500}; // a hello reads `nodes` at most this often
  // CJ-27: where a feed of a background response live here subscribes (invalid: none is fed).
  response_registry_actor responses;
  // CJ-29: the logs forwarded commands go to, and what reading one needs (invalid: refused).
  workspaces_actor workspaces;
  std::shared_ptr<const protocol::reflexr::event_registry> workspace_types;
  int workspace_max_depth = 8;
};

node_actor spawn_node_actor(caf::actor_system& sys, node_store_actor nodes, run_registry_actor registry,
                            approval_registry_actor approvals, node_actor_options options);

} // namespace troupe
