#include "actors/cluster_membership.hpp"

#include "actors/errors.hpp"
#include "protocol/ids.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace troupe {

namespace {

using steady = std::chrono::steady_clock;

struct membership_state {
  static inline const char* name = "cluster_membership";
  node_store_actor nodes;
  run_registry_actor registry;
  std::shared_ptr<node_status> status;
  membership_options options;
  steady::time_point last_ok; // the send time of the last heartbeat that got through
  bool beating = false;       // a heartbeat (or a rejoin) is on its way
  bool fenced = false;
  bool rejoining = false;     // the row was declared dead: the next beat joins under a new id
  bool leaving = false;
  bool draining = false;      // what its status says once it works again
};

using membership_pointer = cluster_membership_actor::stateful_pointer<membership_state>;

steady::duration seconds(double s) {
  return std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(s));
}

std::chrono::milliseconds millis(double s) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::max(0.0, s) * 1000.0) + 1);
}

node_status::state working_state(const membership_state& st) {
  return st.draining ? node_status::state::draining : node_status::state::alive;
}

// Fencing never waits on the database: it is decided here, on this node's clock alone (CJ-14).
void look_at_deadline(membership_pointer self) {
  auto& st = self->state;
  auto allowed = seconds(st.options.node_expiry_seconds - st.options.fence_margin_seconds);
  if (st.fenced || st.leaving || steady::now() - st.last_ok < allowed)
    return;
  st.fenced = true;
  spdlog::error("cluster: no heartbeat of node {} got through for {:.2f} s; it stops its work until one does",
                st.options.node.node_id, std::chrono::duration<double>(steady::now() - st.last_ok).count());
  st.status->set(st.options.node.node_id, node_status::state::fenced);
  self->send(st.registry, fence_atom::value);
}

// After a heartbeat got through: work again if fenced (what was fenced goes back to the queue), then
// declare the silent nodes dead and sweep up their work.
void heartbeat_landed(membership_pointer self, steady::time_point sent) {
  auto& st = self->state;
  st.last_ok = std::max(st.last_ok, sent);
  auto timeout = millis(st.options.node_expiry_seconds);
  if (st.fenced) {
    st.fenced = false;
    auto id = st.options.node.node_id;
    spdlog::warn("cluster: node {} reaches the database again; its fenced runs go back to the queue", id);
    self->request(st.nodes, timeout, fence_atom::value, id)
      .then(
        [=](int64_t released) {
          if (released > 0)
            spdlog::info("cluster: {} runs of node {} are ready for any node", released, id);
          self->send(self->state.registry, unfence_atom::value, worker_of(id));
          self->send(self->state.registry, recover_atom::value);
          self->state.status->set(id, working_state(self->state));
        },
        [=](caf::error& err) {
          spdlog::error("cluster: releasing node {}'s runs failed: {}", id, message_of(err));
          self->state.fenced = true; // the next heartbeat tries again
        });
  }
  self->request(st.nodes, timeout, declare_dead_atom::value, st.options.node_expiry_seconds)
    .then(
      [=](std::vector<std::string>& dead) {
        if (dead.empty())
          return;
        for (auto& id : dead)
          spdlog::warn("cluster: node {} was silent for {} s: declared dead, its runs are ready for any node", id,
                       self->state.options.node_expiry_seconds);
        self->send(self->state.registry, recover_atom::value);
        if (self->state.options.on_declared_dead)
          self->state.options.on_declared_dead(dead);
      },
      [](caf::error& err) { spdlog::error("cluster: declaring silent nodes dead failed: {}", message_of(err)); });
}

// The row was declared dead while this node was cut off: it joins again under a fresh id (CJ-14).
void rejoin(membership_pointer self) {
  auto& st = self->state;
  auto row = st.options.node;
  row.node_id = new_node_id();
  auto sent = steady::now();
  st.beating = true;
  self->request(st.nodes, millis(st.options.node_expiry_seconds), join_atom::value, row)
    .then(
      [=](bool) {
        auto& st = self->state;
        st.beating = false;
        st.rejoining = false;
        spdlog::warn("cluster: node {} rejoined as {}", st.options.node.node_id, row.node_id);
        if (st.options.metrics)
          st.options.metrics->rejoined();
        st.options.node = row;
        st.last_ok = sent;
        st.fenced = false;
        st.status->set(row.node_id, working_state(st));
        self->send(st.registry, unfence_atom::value, worker_of(row.node_id));
        if (st.options.remember_id)
          st.options.remember_id(row.node_id);
      },
      [=](caf::error& err) {
        self->state.beating = false;
        spdlog::error("cluster: rejoining failed: {}", message_of(err));
      });
}

void beat(membership_pointer self) {
  auto& st = self->state;
  if (st.beating || st.leaving)
    return;
  if (st.rejoining) {
    rejoin(self);
    return;
  }
  auto sent = steady::now();
  st.beating = true;
  auto id = st.options.node.node_id;
  self->request(st.nodes, millis(st.options.node_expiry_seconds), heartbeat_atom::value, id)
    .then(
      [=](std::string& state) {
        auto& st = self->state;
        st.beating = false;
        if (!state.empty()) {
          heartbeat_landed(self, sent);
          return;
        }
        spdlog::error("cluster: node_declared_dead: node {} was declared dead by the others; it rejoins", id);
        if (!st.fenced) {
          st.fenced = true;
          self->send(st.registry, fence_atom::value);
        }
        st.status->set(id, node_status::state::fenced);
        st.rejoining = true;
        rejoin(self);
      },
      [=](caf::error& err) {
        self->state.beating = false;
        spdlog::warn("cluster: heartbeat of node {} failed: {}", id, message_of(err));
      });
}

cluster_membership_actor::behavior_type membership_behavior(membership_pointer self, node_store_actor nodes,
                                                            run_registry_actor registry,
                                                            std::shared_ptr<node_status> status,
                                                            membership_options options) {
  auto& st = self->state;
  st.nodes = std::move(nodes);
  st.registry = std::move(registry);
  st.status = std::move(status);
  st.options = std::move(options);
  st.last_ok = st.options.joined_at;
  st.status->set(st.options.node.node_id, node_status::state::alive);
  // The deadline is looked at often enough to fence within a quarter of the margin.
  auto look_every = millis(std::min(st.options.heartbeat_seconds, st.options.fence_margin_seconds) / 4);
  self->send(self, heartbeat_atom::value);
  self->send(self, fence_atom::value);
  return {
    [=](heartbeat_atom) {
      self->delayed_send(self, millis(self->state.options.heartbeat_seconds), heartbeat_atom::value);
      beat(self);
    },
    [=](fence_atom) {
      self->delayed_send(self, look_every, fence_atom::value);
      look_at_deadline(self);
    },
    [=](node_state_atom, std::string& state) -> caf::result<bool> {
      auto& st = self->state;
      auto id = st.options.node.node_id;
      auto timeout = millis(st.options.node_expiry_seconds);
      if (state == "draining") {
        st.draining = true;
        st.status->set(id, node_status::state::draining);
        return self->delegate(st.nodes, node_state_atom::value, id, state);
      }
      st.leaving = true;
      auto rp = self->make_response_promise<bool>();
      self->request(st.nodes, timeout, fence_atom::value, id)
        .then(
          [=](int64_t released) mutable {
            if (released > 0)
              spdlog::info("cluster: node {} leaves {} runs to the others", id, released);
            self->request(self->state.nodes, timeout, node_state_atom::value, id, state)
              .then([=](bool moved) mutable { rp.deliver(moved); }, [=](caf::error& err) mutable { rp.deliver(err); });
            self->state.status->set(id, node_status::state::left);
          },
          [=](caf::error& err) mutable { rp.deliver(err); });
      return rp;
    },
  };
}

} // namespace

const char* to_string(node_status::state s) {
  switch (s) {
    case node_status::state::alive:
      return "alive";
    case node_status::state::fenced:
      return "fenced";
    case node_status::state::draining:
      return "draining";
    case node_status::state::left:
      return "left";
  }
  return "alive";
}

std::string new_node_id() {
  return "node-" + protocol::random_hex(16);
}

std::string worker_of(const std::string& node_id) {
  return "worker-" + node_id.substr(std::min<std::size_t>(node_id.size(), 5));
}

std::string node_of_worker(const std::string& worker_id) {
  constexpr std::string_view prefix = "worker-";
  if (worker_id.size() <= prefix.size() || worker_id.compare(0, prefix.size(), prefix) != 0)
    return "";
  return "node-" + worker_id.substr(prefix.size());
}

cluster_membership_actor spawn_cluster_membership(caf::actor_system& sys, node_store_actor nodes,
                                                  run_registry_actor registry, std::shared_ptr<node_status> status,
                                                  membership_options options) {
  return sys.spawn(membership_behavior, std::move(nodes), std::move(registry), std::move(status), std::move(options));
}

} // namespace troupe
