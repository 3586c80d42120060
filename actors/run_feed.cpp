#include "actors/run_feed.hpp"

#include "actors/messages.hpp"
#include "protocol/agent_event.hpp"

#include <caf/all.hpp>

#include <algorithm>

namespace troupe {

namespace {

struct feed_state {
  static inline const char* name = "run_feed";
  run_registry_actor registry;
  feed_request request; // its credit is what may still be sent
};

using feed_pointer = caf::stateful_actor<feed_state>*;

void finish(feed_pointer self, bool run_ended) {
  self->send(self->state.request.subscriber, feed_atom::value, feed_end{run_ended});
  self->quit();
}

// The state goes in as arguments: CAF 0.17 spawning a function without any trips UBSan.
caf::behavior run_feed(feed_pointer self, run_registry_actor registry, feed_request request) {
  auto& st = self->state;
  st.registry = std::move(registry);
  st.request = std::move(request);
  st.request.credit = std::clamp<int64_t>(st.request.credit, 0, max_feed_credit);
  self->monitor(st.request.subscriber); // a stream gone, or its node's connection: nothing to feed
  self->set_down_handler([=](caf::down_msg&) { self->quit(); });
  return {
    [=](subscribe_atom) -> caf::result<feed_ack> {
      auto rp = self->make_response_promise<feed_ack>();
      auto me = caf::actor_cast<caf::actor>(self);
      self->request(self->state.registry, std::chrono::seconds(5), subscribe_atom::value, self->state.request.id, me)
        .then(
          [=](bool live_here) mutable {
            rp.deliver(feed_ack{live_here ? me : caf::actor{}});
            if (!live_here)
              self->quit();
          },
          [=](caf::error& err) mutable {
            rp.deliver(std::move(err));
            self->quit();
          });
      return rp;
    },
    [=](event_atom, const protocol::agent_event& e) {
      auto& st = self->state;
      if (st.request.credit <= 0)
        return; // dropped: the subscriber reads it from the store
      --st.request.credit;
      self->send(st.request.subscriber, feed_atom::value, feed_events{{e.sequence}, {protocol::to_sse_frame(e)}});
    },
    [=](credit_atom, int64_t more) {
      auto& credit = self->state.request.credit;
      credit = std::clamp<int64_t>(credit + std::max<int64_t>(more, 0), 0, max_feed_credit);
    },
    [=](run_end_atom, const run_result&) { finish(self, true); },
    [=](attempt_gone_atom) { finish(self, false); },
  };
}

} // namespace

caf::actor spawn_run_feed(caf::actor_system& sys, run_registry_actor registry, feed_request request) {
  return sys.spawn(run_feed, std::move(registry), std::move(request));
}

} // namespace troupe
