#include "actors/cluster_messages.hpp"

#include "actors/errors.hpp"

#include <caf/actor_system_config.hpp>

namespace troupe {

void add_cluster_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<protocol::cluster_hello>("troupe.cluster_hello");
  cfg.add_message_type<protocol::cluster_challenge>("troupe.cluster_challenge");
  cfg.add_message_type<protocol::cluster_proof>("troupe.cluster_proof");
  cfg.add_message_type<protocol::cluster_welcome>("troupe.cluster_welcome");
  cfg.add_message_type<cancel_request>("troupe.cancel_request");
  cfg.add_message_type<cancel_ack>("troupe.cancel_ack");
  cfg.add_message_type<approval_resolution>("troupe.approval_resolution");
  cfg.add_message_type<resolve_ack>("troupe.resolve_ack");
  cfg.add_message_type<pong>("troupe.pong");
  cfg.add_message_type<problem>("troupe.problem"); // the context of every troupe error a node answers
}

} // namespace troupe
