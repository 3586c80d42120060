// What the nodes of a cluster say to each other over CAF remoting (CJ-22 to CJ-25): the node actor's
// interface, the local port through which this node's actors reach another node, and the plain
// structs both carry, each with the `inspect` CAF serializes it by. Everything here crosses the wire,
// so every type is registered by add_cluster_message_types, on both ends.
#pragma once

#include "actors/atoms.hpp"
#include "protocol/cluster_handshake.hpp"
#include "protocol/errors.hpp"
#include "protocol/workspace_actor.hpp"

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace troupe::protocol::reflexr {
class event_registry;
}

namespace troupe {

struct workspace_command;
struct workspace_outcome;

using auth_atom = caf::atom_constant<caf::atom("auth")>;
using forward_atom = caf::atom_constant<caf::atom("forward")>;
using feed_atom = caf::atom_constant<caf::atom("feed")>;
using credit_atom = caf::atom_constant<caf::atom("credit")>;

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

// CJ-27: a stream on the asking node follows run or background response `id` (`kind` "run" or
// "response"), live on the node asked. `subscriber` gets its committed events there (a response's
// from after `after`), never more than `credit` ahead of the credit it returns.
struct feed_request {
  std::string id;
  int64_t credit = 0;
  caf::actor subscriber;
  std::string kind = "run";
  int64_t after = -1;
};

// `relay`, where the subscriber returns credit; none when no attempt on the node feeds the run.
struct feed_ack {
  caf::actor relay;
};

// What a feed sends its subscriber as `(feed_atom, …)`: committed events as their SSE frames, or
// the feed's end: the run or response ended, or the attempt there stopped short of it (the stream
// then reads the store, where the next attempt writes, wherever it runs).
struct feed_events {
  std::vector<int64_t> sequences;
  std::vector<std::string> frames;
};

struct feed_end {
  bool run_ended = false;
};

// The most credit a subscriber may grant (cluster.stream_credit_events is 256).
inline constexpr int64_t max_feed_credit = 4096;

// The subscriber's side of a feed's credit (CJ-27): it grants 256 and gives back what it used in
// batches of 64, so the feed is never more than 256 events ahead of what the subscriber passed on.
class feed_credit {
public:
  static constexpr int64_t grant = 256;
  static constexpr int64_t batch = 64;

  void granted() { left_ = grant; }
  void received(std::size_t events) { left_ -= static_cast<int64_t>(events); }
  // The credit to give back now, once a batch's worth is used (0: not yet).
  int64_t to_return() {
    if (left_ > grant - batch)
      return 0;
    auto used = grant - left_;
    left_ = grant;
    return used;
  }

private:
  int64_t left_ = 0;
};

// CJ-29: a workspace command for the log the asked node owns, as the asking node's edge addressed
// it (who sent it, when, under which trace) with the command's JSON as it was read.
struct workspace_forward {
  std::string tenant_id;
  std::string workspace_id;
  std::string participant;
  std::string command_id;
  std::string frame; // a `Command` object, or a REST publish body
  bool publish_body = false;
  protocol::workspace_actor actor;
  std::string now;
  std::string traceparent;
};

// What the owner answered: the command's answer byte for byte and the status it stands for (WS-27).
struct workspace_answer {
  std::string body;
  errc code = errc::none;
  bool ok = true;
  int64_t max_seq = 0;
  bool remembered = false;
};

// A refusal of a forwarded command by a node that does not own its log (CJ-29's `not_owner`).
inline constexpr const char* not_owner = "workspace_not_owner";

workspace_forward forward_of(const workspace_command& c);
workspace_answer answer_of(const workspace_outcome& o);
workspace_outcome outcome_of(workspace_answer a);
// The command a forward carries, read again as hostile input (bounded, UTF-8, no repeated members)
// against this node's event types, or why it cannot be.
std::variant<workspace_command, std::string> command_of(const workspace_forward& f,
                                                        std::shared_ptr<const protocol::reflexr::event_registry> types,
                                                        int max_depth);

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
typename Inspector::result_type inspect(Inspector& f, feed_request& x) {
  return f(caf::meta::type_name("troupe.feed_request"), x.id, x.credit, x.subscriber, x.kind, x.after);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, feed_ack& x) {
  return f(caf::meta::type_name("troupe.feed_ack"), x.relay);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, feed_events& x) {
  return f(caf::meta::type_name("troupe.feed_events"), x.sequences, x.frames);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, feed_end& x) {
  return f(caf::meta::type_name("troupe.feed_end"), x.run_ended);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, workspace_forward& x) {
  return f(caf::meta::type_name("troupe.workspace_forward"), x.tenant_id, x.workspace_id, x.participant,
           x.command_id, x.frame, x.publish_body, x.actor, x.now, x.traceparent);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, workspace_answer& x) {
  return f(caf::meta::type_name("troupe.workspace_answer"), x.body, x.code, x.ok, x.max_seq, x.remembered);
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
  caf::replies_to<forward_atom, workspace_forward>::with<workspace_answer>,
  caf::replies_to<subscribe_atom, feed_request>::with<feed_ack>,
  caf::replies_to<ping_atom>::with<pong>>;

// This node's way to another node's actor, by node id: it finds the node's endpoint in `nodes`,
// connects, runs the handshake and forwards; any failure or a silence past
// cluster.request_timeout_seconds answers an error, and the caller takes its store fallback. It
// serves this node's actors only. A message for this node itself is answered at once (its actors
// already know).
// A forward waits up to its own timeout (cluster.forward_timeout_seconds), and a forward to this
// node itself is refused as `not_owner`: the asking log carries its own commands out.
using cluster_peers_actor =
  caf::typed_actor<caf::replies_to<cancel_atom, std::string, cancel_request>::with<cancel_ack>,
                   caf::replies_to<resolve_atom, std::string, approval_resolution>::with<resolve_ack>,
                   caf::replies_to<forward_atom, std::string, workspace_forward>::with<workspace_answer>,
                   caf::replies_to<subscribe_atom, std::string, feed_request>::with<feed_ack>>;

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
typename Inspector::result_type inspect(Inspector& f, workspace_actor& x) {
  return f(caf::meta::type_name("troupe.workspace_actor"), x.kind, x.id, x.name, x.rule, x.run_id, x.client_id,
           x.version);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cluster_welcome&) {
  return f(caf::meta::type_name("troupe.cluster_welcome"));
}

} // namespace troupe::protocol
