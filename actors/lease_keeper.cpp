#include "actors/lease_keeper.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <unordered_map>

namespace troupe {

namespace {

struct held_lease {
  std::string run_id;
  int64_t lease_epoch = 0;
  run_actor run;
};

struct lease_keeper_state {
  static inline const char* name = "lease_keeper";
  std::unordered_map<caf::actor_addr, held_lease> leases;
};

lease_keeper_actor::behavior_type lease_keeper_behavior(lease_keeper_actor::stateful_pointer<lease_keeper_state> self,
                                                        store_actor store, double lease_seconds,
                                                        std::shared_ptr<node_metrics> metrics) {
  auto period = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(lease_seconds / 3));
  self->set_down_handler([=](caf::down_msg& msg) { self->state.leases.erase(msg.source); });
  self->delayed_send(self, period, tick_atom::value);
  return {
    [=](track_atom, std::string& run_id, int64_t epoch, run_actor& run) {
      self->monitor(run);
      self->state.leases.emplace(run.address(), held_lease{std::move(run_id), epoch, run});
    },
    [=](tick_atom) {
      self->delayed_send(self, period, tick_atom::value);
      for (auto& [addr, lease] : self->state.leases) {
        // A run that does not answer within the period is wedged: its lease is left to lapse.
        self->request(lease.run, period, ping_atom::value)
          .then(
            [=, lease = lease](bool) {
              self->request(store, caf::infinite, renew_atom::value, lease.run_id, lease.lease_epoch, lease_seconds)
                .then([=](bool) { metrics->lease_renewed(); },
                      [=](caf::error&) {
                        metrics->lease_lost();
                        spdlog::warn("run {}: lease at epoch {} was taken over", lease.run_id, lease.lease_epoch);
                        self->send(lease.run, fenced_atom::value);
                      });
            },
            [run_id = lease.run_id](caf::error&) {
              spdlog::warn("run {}: not answering; its lease is left to lapse", run_id);
            });
      }
    },
  };
}

} // namespace

lease_keeper_actor spawn_lease_keeper(caf::actor_system& sys, store_actor store, double lease_seconds,
                                      std::shared_ptr<node_metrics> metrics) {
  return sys.spawn(lease_keeper_behavior, std::move(store), lease_seconds, std::move(metrics));
}

} // namespace troupe
