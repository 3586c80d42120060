#include "actors/node_actor.hpp"

#include "actors/errors.hpp"
#include "actors/live_feed.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <unordered_map>
#include <variant>

namespace troupe {

namespace {

using steady = std::chrono::steady_clock;

struct node_actor_state {
  static inline const char* name = "node_actor";
  node_store_actor nodes;
  run_registry_actor registry;
  approval_registry_actor approvals;
  node_actor_options options;
  std::unique_ptr<protocol::handshake_gate> gate;
  std::string gate_node; // the node id the gate answers as
  node_list known;       // `nodes` as last read, for hellos
  std::optional<steady::time_point> known_at;
  std::unordered_map<caf::actor_addr, std::string> welcomed; // a welcomed peer's actor, and its peer key
};

using node_pointer = node_actor::stateful_pointer<node_actor_state>;

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0) + 1);
}

// A peer is its CAF node: every actor of a welcomed process may ask. A message without a sender has
// no peer, and the gate refuses the empty key.
std::string peer_of(node_pointer self) {
  auto& sender = self->current_sender();
  return sender ? caf::to_string(sender->node()) : std::string();
}

// The gate of the node this process is now: after a rejoin it is a new node, and its peers prove
// themselves again.
protocol::handshake_gate& gate(node_pointer self) {
  auto& st = self->state;
  auto id = st.options.status->node_id();
  if (!st.gate || st.gate_node != id) {
    st.gate = std::make_unique<protocol::handshake_gate>(id, st.options.secret, st.options.secret_previous);
    st.gate_node = id;
    st.welcomed.clear();
  }
  return *st.gate;
}

caf::error refusal_error(const protocol::handshake_refusal& r) {
  return make_error(problem{errc::unauthorized, r.message, {}, protocol::to_string(r.code)});
}

// CJ-24: a request of a peer that is not welcomed acts on nothing.
std::optional<caf::error> unwelcomed(node_pointer self) {
  if (gate(self).welcomed(peer_of(self)))
    return std::nullopt;
  return refusal_error(protocol::unauthenticated_refusal());
}

bool alive_or_draining(const node_list& nodes, const std::string& node_id) {
  for (auto& n : nodes)
    if (n.node_id == node_id)
      return n.state == "alive" || n.state == "draining";
  return false;
}

void answer_hello(node_pointer self, caf::typed_response_promise<protocol::cluster_challenge>& rp,
                  const std::string& peer, const protocol::cluster_hello& hello) {
  auto& st = self->state;
  auto r = gate(self).on_hello(peer, hello, st.options.cluster_id, alive_or_draining(st.known, hello.node_id),
                               steady::now());
  if (auto* challenge = std::get_if<protocol::cluster_challenge>(&r))
    rp.deliver(std::move(*challenge));
  else
    rp.deliver(refusal_error(std::get<protocol::handshake_refusal>(r)));
}

// The frame is read again as a client's would be; the asking node's forward timeout bounds the wait.
caf::result<workspace_answer> carry_out_forward(node_pointer self, const workspace_forward& forward) {
  auto& opts = self->state.options;
  if (!opts.workspaces)
    return make_error(problem{errc::conflict, "this node serves no workspaces", {}, not_owner});
  auto command = command_of(forward, opts.workspace_types, opts.workspace_max_depth);
  if (auto why = std::get_if<std::string>(&command))
    return make_error(errc::bad_request, *why);
  auto rp = self->make_response_promise<workspace_answer>();
  self->request(opts.workspaces, std::chrono::seconds(60), forward_atom::value,
                std::get<workspace_command>(std::move(command)))
    .then([=](workspace_outcome& o) mutable { rp.deliver(answer_of(o)); },
          [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

// The state goes in as arguments: CAF 0.17 spawning a function without any trips UBSan.
node_actor::behavior_type node_behavior(node_pointer self, node_store_actor nodes, run_registry_actor registry,
                                        approval_registry_actor approvals, node_actor_options options) {
  auto& st = self->state;
  st.nodes = std::move(nodes);
  st.registry = std::move(registry);
  st.approvals = std::move(approvals);
  st.options = std::move(options);
  // A welcomed peer whose connection went: its welcome goes with it (its mute, if any, stays).
  self->set_down_handler([=](caf::down_msg& msg) {
    auto& st = self->state;
    auto it = st.welcomed.find(msg.source);
    if (it == st.welcomed.end())
      return;
    if (st.gate)
      st.gate->forget(it->second);
    st.welcomed.erase(it);
  });
  return {
    // CJ-23 step 2. `nodes` is read at most every nodes_fresh, and the mailbox waits for that read,
    // so a flood of hellos costs one read per interval.
    [=](hello_atom, protocol::cluster_hello& hello) -> caf::result<protocol::cluster_challenge> {
      auto& st = self->state;
      auto peer = peer_of(self);
      auto rp = self->make_response_promise<protocol::cluster_challenge>();
      auto now = steady::now();
      if (gate(self).muted(peer, now) || (st.known_at && now - *st.known_at < st.options.nodes_fresh)) {
        answer_hello(self, rp, peer, hello);
        return rp;
      }
      self->request(st.nodes, millis(st.options.request_timeout_seconds), list_nodes_atom::value)
        .await(
          [=](node_list& list) mutable {
            self->state.known = std::move(list);
            self->state.known_at = steady::now();
            answer_hello(self, rp, peer, hello);
          },
          [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
    // CJ-23 step 4: the peer's CAF node is welcomed until its connection goes.
    [=](auth_atom, protocol::cluster_proof& proof) -> caf::result<protocol::cluster_welcome> {
      auto peer = peer_of(self);
      auto r = gate(self).on_auth(peer, proof, steady::now());
      if (auto* refusal = std::get_if<protocol::handshake_refusal>(&r)) {
        spdlog::warn("cluster: a peer's proof was refused: {}", refusal->message);
        return refusal_error(*refusal);
      }
      auto sender = caf::actor_cast<caf::actor>(self->current_sender());
      if (self->state.welcomed.emplace(sender.address(), peer).second)
        self->monitor(sender);
      return protocol::cluster_welcome{};
    },
    // CJ-25: stop this node's attempt of the run; the asking node answers its client from the store.
    [=](cancel_atom, cancel_request& req) -> caf::result<cancel_ack> {
      if (auto refused = unwelcomed(self))
        return std::move(*refused);
      if (req.kind != "run")
        return make_error(errc::bad_request, "cancel_request.kind: expected \"run\"");
      auto rp = self->make_response_promise<cancel_ack>();
      self
        ->request(self->state.registry, millis(self->state.options.request_timeout_seconds), cancel_atom::value,
                  req.id, req.lease_epoch)
        .then([=](run_record&) mutable { rp.deliver(cancel_ack{"stopped"}); },
              [=](caf::error& err) mutable {
                if (code_of(err) == errc::not_found)
                  rp.deliver(cancel_ack{"not_here"});
                else
                  rp.deliver(std::move(err));
              });
      return rp;
    },
    // CJ-26: an approval was resolved on the asking node; the run waiting on it here hears of it now.
    [=](resolve_atom, approval_resolution& resolution) -> caf::result<resolve_ack> {
      if (auto refused = unwelcomed(self))
        return std::move(*refused);
      self->send(self->state.approvals, wake_atom::value, std::move(resolution.request_id));
      return resolve_ack{};
    },
    // CJ-29: a command for a log this node owns (the log refuses it as `not_owner` otherwise).
    [=](forward_atom, workspace_forward& forward) -> caf::result<workspace_answer> {
      if (auto refused = unwelcomed(self))
        return std::move(*refused);
      return carry_out_forward(self, forward);
    },
    // CJ-27: a stream on the asking node follows a run or a background response; a feed here relays
    // its events to it, while it lives here.
    [=](subscribe_atom, feed_request& req) -> caf::result<feed_ack> {
      if (auto refused = unwelcomed(self))
        return std::move(*refused);
      if (req.id.empty() || !req.subscriber || (req.kind != "run" && req.kind != "response"))
        return make_error(errc::bad_request, "feed_request: an id, a subscriber and kind run or response are required");
      auto& st = self->state;
      if (req.kind == "response" && !st.options.responses)
        return feed_ack{};
      auto feed = req.kind == "run" ? spawn_run_feed(self->system(), st.registry, std::move(req))
                                    : spawn_response_feed(self->system(), st.options.responses, std::move(req));
      auto rp = self->make_response_promise<feed_ack>();
      self->request(feed, millis(self->state.options.request_timeout_seconds), subscribe_atom::value)
        .then([=](feed_ack& ack) mutable { rp.deliver(std::move(ack)); },
              [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
    [=](ping_atom) -> caf::result<pong> {
      if (auto refused = unwelcomed(self))
        return std::move(*refused);
      return pong{self->state.options.status->node_id()};
    },
  };
}

} // namespace

node_actor spawn_node_actor(caf::actor_system& sys, node_store_actor nodes, run_registry_actor registry,
                            approval_registry_actor approvals, node_actor_options options) {
  return sys.spawn(node_behavior, std::move(nodes), std::move(registry), std::move(approvals), std::move(options));
}

} // namespace troupe
