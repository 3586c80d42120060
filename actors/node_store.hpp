// The node store port: a cluster's membership as PostgreSQL keeps it (CJ-12, CJ-13, CJ-17). Times are
// the database's clock, never a node's. Only PostgreSQL has one: an embedded store is one node.
#pragma once

#include "actors/atoms.hpp"
#include "protocol/cluster.hpp"

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

using protocol::node_row;

using node_list = std::vector<node_row>;

using node_store_actor = caf::typed_actor<
  // Inserts the node as `alive`, its heartbeat now.
  caf::replies_to<join_atom, node_row>::with<bool>,
  // Sets the node's heartbeat to now while it is alive or draining; answers its state, or "" when
  // no such row holds (it was declared dead).
  caf::replies_to<heartbeat_atom, std::string>::with<std::string>,
  // Declares dead every live node whose heartbeat is older than the given seconds and expires its
  // leases at once in the same transaction, so its runs are claimable now (CJ-13); answers their ids.
  caf::replies_to<declare_dead_atom, double>::with<std::vector<std::string>>,
  // Declares this node dead, whatever its heartbeat (the process that ran it is gone), likewise.
  caf::replies_to<declare_dead_atom, std::string>::with<std::vector<std::string>>,
  // Every node not long gone, oldest first, with the leases each holds.
  caf::replies_to<list_nodes_atom>::with<node_list>,
  // The database's cluster id (CJ-2), which the nodes' handshake proves (CJ-23).
  caf::replies_to<cluster_id_atom>::with<std::string>,
  // Moves the node to `draining` or `left`; false when its row is no longer live.
  caf::replies_to<node_state_atom, std::string, std::string>::with<bool>,
  // Expires the leases of every run the node holds, once it stopped their attempts (it fenced itself,
  // or it leaves), so the next recovery sweep of any node takes them; answers how many.
  caf::replies_to<fence_atom, std::string>::with<int64_t>>;

} // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::protocol::node_row)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::node_list)
