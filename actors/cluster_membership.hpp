// A cluster node's membership (CJ-12 to CJ-14): it heartbeats its row in `nodes`, declares dead the
// nodes whose heartbeat is older than node_expiry_seconds (their leases expire at once and the run
// registry sweeps them up), and fences itself on its own monotonic clock when its heartbeats stop
// getting through: `node_expiry_seconds - fence_margin_seconds` after the send time of its last
// successful heartbeat it stops every attempt and claims nothing, before any other node may declare
// it dead. Its next successful heartbeat lets it work again; one that finds its row dead makes it
// rejoin under a fresh node id.
#pragma once

#include "actors/atoms.hpp"
#include "actors/metrics.hpp"
#include "actors/node_store.hpp"
#include "actors/run_registry.hpp"

#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace troupe {

// What the edge reads of its node (GET /v1/cluster/health, /ready); written by the membership actor.
class node_status {
public:
  enum class state { alive, fenced, draining, left };

  std::string node_id() const {
    std::lock_guard<std::mutex> hold(mutex_);
    return node_id_;
  }
  state current() const {
    std::lock_guard<std::mutex> hold(mutex_);
    return state_;
  }
  void set(std::string node_id, state s) {
    std::lock_guard<std::mutex> hold(mutex_);
    node_id_ = std::move(node_id);
    state_ = s;
  }

private:
  mutable std::mutex mutex_;
  std::string node_id_;
  state state_ = state::alive;
};

const char* to_string(node_status::state s);

struct membership_options {
  node_row node; // as joined: node_id, name, endpoint, version
  std::chrono::steady_clock::time_point joined_at; // when the join was sent: its heartbeat's send time
  double heartbeat_seconds = 2;
  double node_expiry_seconds = 10;
  double fence_margin_seconds = 2;
  // Where the edge keeps the node's id (the data dir's node_id file, whose node the next process on
  // that data dir declares dead at start); told the new id after each rejoin.
  std::function<void(const std::string&)> remember_id;
  std::shared_ptr<node_metrics> metrics; // counts rejoins; may be null
  // Told the nodes this one declared dead (each is declared by one node only), after their runs were
  // released: what else they left unfinished is settled there (CJ-16).
  std::function<void(const std::vector<std::string>&)> on_declared_dead;
};

using cluster_membership_actor = caf::typed_actor<
  caf::reacts_to<heartbeat_atom>, // every heartbeat_seconds
  caf::reacts_to<fence_atom>,     // the fence deadline is looked at
  // CJ-15: `draining` (the node takes no new work; its row and health say so), or `left` (its
  // attempts were stopped and handed back: what it still holds has its lease expired, and its row
  // says `left`).
  caf::replies_to<node_state_atom, std::string>::with<bool>>;

// `node` was joined just before (its first heartbeat counts from then).
cluster_membership_actor spawn_cluster_membership(caf::actor_system& sys, node_store_actor nodes,
                                                  run_registry_actor registry, std::shared_ptr<node_status> status,
                                                  membership_options options);

// node-<16 hex digits>, fresh per call (CJ-12).
std::string new_node_id();

// The worker id node-<hex> claims runs as: worker-<hex> (AS-54).
std::string worker_of(const std::string& node_id);

// The node a worker id belongs to (node-<hex> for worker-<hex>); "" for one that is no node's.
std::string node_of_worker(const std::string& worker_id);

} // namespace troupe
