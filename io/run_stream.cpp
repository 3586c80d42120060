#include "io/run_stream.hpp"

#include "actors/cluster_membership.hpp"
#include "io/agent_http.hpp"
#include "io/route_ask.hpp"
#include "io/stream_pacing.hpp"
#include "protocol/agent_event.hpp"
#include "protocol/runs.hpp"
#include "protocol/sse.hpp"

#include <caf/all.hpp>

#include <optional>

namespace troupe::io {

stream_step next_step(stream_phase at, stream_input in) {
  using p = stream_phase;
  using i = stream_input;
  using a = stream_action;
  switch (at) {
    case p::subscribing:
      if (in == i::subscribed || in == i::run_ended)
        return {p::reading, a::read};
      break;
    case p::following:
      if (in == i::live_next)
        return {p::following, a::send};
      if (in == i::live_behind) // a gap or a full client: the store has the rest
        return {p::lagging, a::wait};
      if (in == i::run_ended) // its end is stored: a page shows the terminal status
        return {p::reading, a::read};
      if (in == i::tail_due) // the store has what an attempt elsewhere wrote meanwhile
        return {p::reading, a::read};
      break;
    case p::reading:
    case p::rereading:
      switch (in) {
        case i::live_next:
        case i::live_behind:
        case i::live_seen:
        case i::run_ended: // the page on its way may predate it
          return {p::rereading, a::none};
        case i::page_partial:
          return {at, a::read};
        case i::page_full: // the rest waits in the store until the client drains
          return {p::lagging, a::wait};
        case i::page_caught_up:
          return at == p::rereading ? stream_step{p::reading, a::read} : stream_step{p::following, a::none};
        case i::page_final:
          return {p::done, a::finish};
        default:
          break;
      }
      break;
    case p::lagging:
      if (in == i::room)
        return {p::reading, a::read};
      break;
    case p::done:
      break;
  }
  return {at, a::none};
}

namespace {

using disconnect_atom = caf::atom_constant<caf::atom("gone")>;
using drained_atom = caf::atom_constant<caf::atom("drained")>;
using tail_atom = caf::atom_constant<caf::atom("tail")>;

constexpr int64_t replay_page = 500;

struct run_stream_state {
  static inline const char* name = "run_stream";
  std::shared_ptr<http_exchange> exchange;
  std::shared_ptr<stream_pacing> pacing; // once the stream is open
  store_actor store;
  std::string run_id;
  int64_t last_sent = -1;
  stream_phase phase = stream_phase::subscribing;
  bool fed = false;    // an attempt on this node sends the stream its events
  caf::timespan tail{}; // how often an unfed stream reads the store; zero: never
  // CJ-27: a feed from the node that holds the run, while it relays (invalid: none).
  cluster_peers_actor peers; // invalid on one node, or without remoting
  caf::actor feed;
  bool feed_asked = false;
  feed_credit credit;
};

using stream_pointer = caf::stateful_actor<run_stream_state>*;

void read_page(stream_pointer self);
void follow_elsewhere(stream_pointer self, const run_record& run);
void return_credit(stream_pointer self);

// False when the client is gone (the stream then stops).
bool send_event(stream_pointer self, std::string frame, int64_t sequence) {
  auto& st = self->state;
  if (!st.pacing->stream().send(std::move(frame))) {
    self->quit();
    return false;
  }
  st.last_sent = sequence;
  return true;
}

// `live` is the event a live input carries: its sequence and SSE frame.
struct live_event {
  int64_t sequence;
  const std::string& frame;
};

void apply(stream_pointer self, stream_input in, const live_event* live = nullptr) {
  auto& st = self->state;
  auto step = next_step(st.phase, in);
  st.phase = step.next;
  switch (step.action) {
    case stream_action::none:
      break;
    case stream_action::send:
      send_event(self, live->frame, live->sequence);
      break;
    case stream_action::read:
      read_page(self);
      break;
    case stream_action::wait:
      if (!st.pacing->behind()) // a gap, with room: nothing to wait for
        apply(self, stream_input::room);
      break;
    case stream_action::finish:
      st.pacing->stream().send(protocol::sse_done_frame());
      st.pacing->stream().finish();
      self->quit();
      break;
  }
}

void open_stream(stream_pointer self, const run_record& run) {
  auto& st = self->state;
  auto stream = st.exchange->open_event_stream({{"X-FastReAct-Run-ID", run.run_id},
                                               {"X-FastReAct-Session-ID", run.session_id},
                                               {"X-FastReAct-Event-Schema", protocol::agent_event_schema}});
  st.pacing = stream_pacing::over(std::move(stream));
  st.pacing->on_drained([me = caf::actor_cast<caf::actor>(self)] { caf::anon_send(me, drained_atom::value); });
}

// Sends what the page holds after the cursor, as far as the client has room, and says how far it
// got; nothing when the client is gone.
std::optional<stream_input> send_page(stream_pointer self, run_events_page& page) {
  auto& st = self->state;
  for (auto& e : page.events) {
    if (e.sequence <= st.last_sent)
      continue;
    if (st.pacing->behind())
      return stream_input::page_full;
    if (!send_event(self, protocol::sse_frame(e.sequence, e.type, e.json), e.sequence))
      return std::nullopt;
  }
  if (st.last_sent + 1 < page.run.event_count)
    return st.pacing->behind() ? stream_input::page_full : stream_input::page_partial;
  return protocol::is_terminal(page.run.status) ? stream_input::page_final : stream_input::page_caught_up;
}

void read_page(stream_pointer self) {
  auto& st = self->state;
  self->request(st.store, ask_timeout, events_atom::value, st.run_id, st.last_sent, replay_page)
    .then(
      [=](run_events_page& page) {
        if (!self->state.pacing)
          open_stream(self, page.run);
        if (auto in = send_page(self, page)) {
          apply(self, *in);
          follow_elsewhere(self, page.run);
          return_credit(self);
        }
      },
      [=](caf::error& err) {
        auto& st = self->state;
        if (!st.pacing)
          st.exchange->respond(error_response(err));
        else
          st.pacing->stream().finish();
        self->quit();
      });
}

// Live events go out only while the stream follows and the client has room; anything else, the
// store has.
stream_input live_input(stream_pointer self, int64_t sequence) {
  auto& st = self->state;
  if (sequence <= st.last_sent || !st.pacing)
    return stream_input::live_seen;
  if (sequence != st.last_sent + 1)
    return stream_input::live_behind;
  // Only a stream that would send it asks about the client (asking arms the drain notice).
  if (st.phase == stream_phase::following && st.pacing->behind())
    return stream_input::live_behind;
  return stream_input::live_next;
}

// An unfed stream that follows has read everything stored so far; it reads again every `tail`.
void tail(stream_pointer self) {
  auto& st = self->state;
  if (!st.fed && !st.feed && st.phase == stream_phase::following)
    apply(self, stream_input::tail_due);
}

// CJ-27: a stream that follows and keeps up gives the feed back what it used, in batches; one behind
// returns nothing, so the feed runs dry and stops while the stream catches up from the store.
void return_credit(stream_pointer self) {
  auto& st = self->state;
  if (!st.feed || st.phase != stream_phase::following || st.pacing->behind())
    return;
  if (auto used = st.credit.to_return())
    self->send(st.feed, credit_atom::value, used);
}

// A run another node holds, as the stored run says: that node is asked to feed the stream (CJ-27);
// until it does, or when it cannot, the stream tails the store.
void follow_elsewhere(stream_pointer self, const run_record& run) {
  auto& st = self->state;
  if (!st.peers || st.fed || st.feed || st.feed_asked || st.phase == stream_phase::done || run.status != "running")
    return;
  auto node_id = node_of_worker(run.worker_id);
  if (node_id.empty())
    return;
  st.feed_asked = true;
  auto me = caf::actor_cast<caf::actor>(self);
  self->request(st.peers, ask_timeout, subscribe_atom::value, node_id, feed_request{st.run_id, feed_credit::grant, me})
    .then(
      [=](feed_ack& ack) {
        auto& st = self->state;
        st.feed_asked = false;
        if (!ack.relay || st.phase == stream_phase::done)
          return;
        st.feed = std::move(ack.relay);
        st.credit.granted();
        self->monitor(st.feed);
      },
      [=](caf::error&) { self->state.feed_asked = false; }); // the tail goes on
}

void feed_gone(stream_pointer self) {
  self->state.feed = nullptr;
  tail(self);
}

caf::behavior run_stream(stream_pointer self, std::shared_ptr<http_exchange> exchange, run_registry_actor registry,
                         store_actor store, std::string run_id, int64_t cursor, caf::timespan tail_every,
                         cluster_peers_actor peers) {
  auto& st = self->state;
  st.exchange = exchange;
  st.tail = tail_every;
  st.peers = std::move(peers);
  self->set_down_handler([=](caf::down_msg& msg) {
    if (self->state.feed && msg.source == self->state.feed.address())
      feed_gone(self);
  });
  st.store = std::move(store);
  st.run_id = run_id;
  st.last_sent = cursor;
  caf::actor me = caf::actor_cast<caf::actor>(self);
  exchange->on_disconnect([me] { caf::anon_send(me, disconnect_atom::value); });
  self->request(registry, ask_timeout, subscribe_atom::value, run_id, me)
    .then([=](bool live_here) {
            self->state.fed = live_here;
            apply(self, stream_input::subscribed);
            if (self->state.tail.count() > 0)
              self->delayed_send(self, self->state.tail, tail_atom::value);
          },
          [=](caf::error& err) {
            // The run ended between the registry's lookup and the subscription: its end is stored,
            // where the stream reads it.
            if (err == caf::sec::request_receiver_down)
              return apply(self, stream_input::subscribed);
            self->state.exchange->respond(error_response(err));
            self->quit();
          });
  return {
    [=](event_atom, protocol::agent_event& e) {
      self->state.fed = true;
      auto in = live_input(self, e.sequence);
      if (in != stream_input::live_next)
        return apply(self, in);
      auto frame = protocol::to_sse_frame(e);
      live_event live{e.sequence, frame};
      apply(self, in, &live);
    },
    [=](feed_atom, feed_events& batch) {
      auto& st = self->state;
      auto n = std::min(batch.sequences.size(), batch.frames.size());
      st.credit.received(n);
      for (std::size_t i = 0; i < n && st.phase != stream_phase::done; ++i) {
        live_event live{batch.sequences[i], batch.frames[i]};
        apply(self, live_input(self, live.sequence), &live);
      }
      if (st.phase != stream_phase::done)
        return_credit(self);
    },
    [=](feed_atom, feed_end& end) {
      if (end.run_ended)
        return apply(self, stream_input::run_ended);
      feed_gone(self);
    },
    // The attempt here stopped short of the run's end (re-queued, fenced, handed back): the next one
    // may run anywhere.
    [=](attempt_gone_atom) {
      self->state.fed = false;
      tail(self);
    },
    [=](tail_atom) {
      tail(self);
      self->delayed_send(self, self->state.tail, tail_atom::value);
    },
    [=](run_end_atom, run_result&) { apply(self, stream_input::run_ended); },
    [=](drained_atom) { apply(self, stream_input::room); },
    [=](disconnect_atom) { self->quit(); },
  };
}

} // namespace

void spawn_run_stream(caf::actor_system& sys, std::shared_ptr<http_exchange> ex, run_registry_actor registry,
                      store_actor store, std::string run_id, int64_t cursor, caf::timespan tail,
                      cluster_peers_actor peers) {
  sys.spawn(run_stream, std::move(ex), std::move(registry), std::move(store), std::move(run_id), cursor, tail,
            std::move(peers));
}

} // namespace troupe::io
