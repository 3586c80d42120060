// CAF remoting between the nodes of a cluster (CJ-22 to CJ-24): the middleman's settings, the node
// actor published on cluster.host:cluster.port, and the cluster_peers actor that connects to other
// nodes' actors and proves this node to them.
//
// CAF 0.17 authenticates no peer, so troupe does, by the handshake (protocol/cluster_handshake.hpp);
// CAF's other doors stay shut: no actor type is spawnable remotely, no automatic connections, no
// named actors, and an actor becomes reachable only once its handle went to a peer. The cluster_peers
// actor's handle goes to every node it connects to, before that node proved itself, so it serves
// this process's actors only. CAF 0.17 has no node_down_msg: a connection that drops kills the
// proxies of its actors, and a monitor of the proxy says so.
#pragma once

#include "actors/cluster_membership.hpp"
#include "actors/cluster_messages.hpp"
#include "actors/node_store.hpp"
#include "protocol/config.hpp"

#include <caf/fwd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>

namespace troupe::io {

// Loads CAF's middleman with the cluster's settings (heartbeats every second, a silent connection
// closed after cluster.peer_timeout_seconds, no automatic connections) and the message types, and
// with cluster.tls CAF's OpenSSL module, after loading its files once (CAF would only find a bad one
// at the first connection). Called on the config before the actor system exists; the secret never
// enters CAF's config. Answers why the TLS files cannot serve, naming the key.
std::optional<std::string> configure_remoting(caf::actor_system_config& cfg, const protocol::cluster_config& cluster);

// Publishes the node actor on host:port (port 0: a free one), over mutual TLS when the system has
// CAF's OpenSSL module; answers the port, or why not.
std::variant<uint16_t, std::string> publish_node_actor(caf::actor_system& sys, const node_actor& node,
                                                       const std::string& host, uint16_t port);

// Whether peers reach `host` only from a loopback or private network (CJ-24): without cluster.tls the
// handshake neither encrypts nor signs, so a public interface deserves a warning.
bool is_private_host(const std::string& host);

struct cluster_peers_options {
  std::string cluster_id;
  std::string secret;
  std::optional<std::string> secret_previous;
  std::shared_ptr<node_status> status; // this node's id now, which a hello names
  double request_timeout_seconds = 2;
  double forward_timeout_seconds = 5; // a workspace command forwarded to its log's owner (CJ-29)
};

cluster_peers_actor spawn_cluster_peers(caf::actor_system& sys, node_store_actor nodes, cluster_peers_options options);

} // namespace troupe::io
