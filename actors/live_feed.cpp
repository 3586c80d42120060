#include "actors/live_feed.hpp"

#include "actors/messages.hpp"
#include "protocol/agent_event.hpp"
#include "protocol/sse.hpp"

#include <caf/all.hpp>

#include <algorithm>

namespace troupe {

namespace {

struct feed_state {
  static inline const char* name = "live_feed";
  feed_request request; // its credit is what may still be sent
};

using feed_pointer = caf::stateful_actor<feed_state>*;

// Sends what the credit covers of the events, in order; the rest is dropped.
void relay(feed_pointer self, feed_events batch) {
  auto& credit = self->state.request.credit;
  auto n = static_cast<std::size_t>(std::clamp<int64_t>(credit, 0, static_cast<int64_t>(batch.sequences.size())));
  if (n == 0)
    return; // the subscriber reads them from the store
  credit -= static_cast<int64_t>(n);
  batch.sequences.resize(n);
  batch.frames.resize(n);
  self->send(self->state.request.subscriber, feed_atom::value, std::move(batch));
}

void finish(feed_pointer self, bool ended) {
  self->send(self->state.request.subscriber, feed_atom::value, feed_end{ended});
  self->quit();
}

// What every feed shares: its subscriber watched, credit coming back, and its subscription, which
// `subscribe(me)` asks for (true: this node feeds the stream).
template <class Subscribe>
caf::message_handler common(feed_pointer self, feed_request request, Subscribe subscribe) {
  auto& st = self->state;
  st.request = std::move(request);
  st.request.credit = std::clamp<int64_t>(st.request.credit, 0, max_feed_credit);
  self->monitor(st.request.subscriber); // a stream gone, or its node's connection: nothing to feed
  self->set_down_handler([=](caf::down_msg&) { self->quit(); });
  return {
    [=](subscribe_atom) -> caf::result<feed_ack> {
      auto rp = self->make_response_promise<feed_ack>();
      auto me = caf::actor_cast<caf::actor>(self);
      subscribe(me).then(
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
    [=](credit_atom, int64_t more) {
      auto& credit = self->state.request.credit;
      credit = std::clamp<int64_t>(credit + std::max<int64_t>(more, 0), 0, max_feed_credit);
    },
  };
}

// The state goes in as arguments: CAF 0.17 spawning a function without any trips UBSan.
caf::behavior run_feed(feed_pointer self, run_registry_actor registry, feed_request request) {
  auto id = request.id;
  auto subscribe = [=](const caf::actor& me) {
    return self->request(registry, std::chrono::seconds(5), subscribe_atom::value, id, me);
  };
  return caf::behavior{common(self, std::move(request), subscribe)
                         .or_else(
                           [=](event_atom, const protocol::agent_event& e) {
                             relay(self, {{e.sequence}, {protocol::to_sse_frame(e)}});
                           },
                           [=](run_end_atom, const run_result&) { finish(self, true); },
                           [=](attempt_gone_atom) { finish(self, false); })};
}

caf::behavior response_feed(feed_pointer self, response_registry_actor registry, feed_request request) {
  auto id = request.id;
  auto after = request.after;
  auto subscribe = [=](const caf::actor& me) {
    return self->request(registry, std::chrono::seconds(5), subscribe_atom::value, id, after, me);
  };
  return caf::behavior{common(self, std::move(request), subscribe)
                         .or_else(
                           [=](event_atom, const std::vector<protocol::responses::stream_event>& events) {
                             feed_events batch;
                             for (auto& e : events) {
                               batch.sequences.push_back(e.sequence);
                               batch.frames.push_back(protocol::sse_frame(std::nullopt, e.type, e.json));
                             }
                             relay(self, std::move(batch));
                           },
                           [=](run_end_atom, const response_end&) { finish(self, true); })};
}

} // namespace

caf::actor spawn_run_feed(caf::actor_system& sys, run_registry_actor registry, feed_request request) {
  return sys.spawn(run_feed, std::move(registry), std::move(request));
}

caf::actor spawn_response_feed(caf::actor_system& sys, response_registry_actor registry, feed_request request) {
  return sys.spawn(response_feed, std::move(registry), std::move(request));
}

} // namespace troupe
