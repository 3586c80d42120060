// What the nodes of a cluster say to each other over CAF remoting (CJ-22 to CJ-25): the node actor's
// interface, the local port through which this node's actors reach another node, and the plain
// structs both carry, each with the `inspect` CAF serializes it by. Everything here crosses the wire,
// so every type is registered by add_cluster_message_types, on both ends.
#pragma once

#include "actors/atoms.hpp"
#include "protocol/cluster_handshake.hpp"

#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>

namespace troupe {

using auth_atom = caf::atom_constant<caf::atom("auth")>;

// CJ-25: stop the attempt of `id` that holds it at `lease_epoch` on the node asked.
struct cancel_request {
  std::string kind = "run";
  std::string id;
  int64_t lease_epoch = 0;
};

// `stopped`: the attempt ended and its end is stored; `not_here`: the node holds no attempt of it at
// that epoch, so the asking node ends it through the store.
struct cancel_ack {
  std::string outcome;
};

// CJ-26: the approval was resolved on another node; the node whose run waits on it reads it again.
struct approval_resolution {
  std::string request_id;
};

struct resolve_ack {};

struct pong {
  std::string node_id;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cancel_request& x) {
  return f(caf::meta::type_name("troupe.cancel_request"), x.kind, x.id, x.lease_epoch);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cancel_ack& x) {
  return f(caf::meta::type_name("troupe.cancel_ack"), x.outcome);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, approval_resolution& x) {
  return f(caf::meta::type_name("troupe.approval_resolution"), x.request_id);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, resolve_ack&) {
  return f(caf::meta::type_name("troupe.resolve_ack"));
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pong& x) {
  return f(caf::meta::type_name("troupe.pong"), x.node_id);
}

// Published on cluster.host:cluster.port. Until a peer is welcomed, everything but hello and auth is
// refused (errc::unauthorized, kind `cluster_unauthenticated`) and acts on nothing (CJ-24).
using node_actor = caf::typed_actor<
  caf::replies_to<hello_atom, protocol::cluster_hello>::with<protocol::cluster_challenge>,
  caf::replies_to<auth_atom, protocol::cluster_proof>::with<protocol::cluster_welcome>,
  caf::replies_to<cancel_atom, cancel_request>::with<cancel_ack>,
  caf::replies_to<resolve_atom, approval_resolution>::with<resolve_ack>,
  caf::replies_to<ping_atom>::with<pong>>;

// This node's way to another node's actor, by node id: it finds the node's endpoint in `nodes`,
// connects, runs the handshake and forwards; any failure or a silence past
// cluster.request_timeout_seconds answers an error, and the caller takes its store fallback. It
// serves this node's actors only. A message for this node itself is answered at once (its actors
// already know).
using cluster_peers_actor =
  caf::typed_actor<caf::replies_to<cancel_atom, std::string, cancel_request>::with<cancel_ack>,
                   caf::replies_to<resolve_atom, std::string, approval_resolution>::with<resolve_ack>>;

// Registers every type above, the handshake's and troupe's error payload (`problem`), so that they
// travel between nodes.
void add_cluster_message_types(caf::actor_system_config& cfg);

} // namespace troupe

namespace troupe::protocol {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_hello& x) {
  return f(caf::meta::type_name("troupe.cluster_hello"), x.protocol, x.cluster_id, x.node_id, x.nonce);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_challenge& x) {
  return f(caf::meta::type_name("troupe.cluster_challenge"), x.node_id, x.nonce, x.proof);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_proof& x) {
  return f(caf::meta::type_name("troupe.cluster_proof"), x.proof);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_welcome&) {
  return f(caf::meta::type_name("troupe.cluster_welcome"));
}

} // namespace troupe::protocol
