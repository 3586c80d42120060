#include "actors/response_recovery.hpp"

#include "actors/atoms.hpp"
#include "actors/errors.hpp"
#include "protocol/json.hpp"
#include "protocol/responses_replay.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <chrono>

namespace troupe {

namespace rs = protocol::responses;

namespace {

constexpr auto store_timeout = std::chrono::seconds(30);
using tail_atom = caf::atom_constant<caf::atom("tail")>;

struct tail_state {
  static inline const char* name = "response_tail";
  response_store_actor store;
  std::string id;
  response_owner owner;
  int64_t after = -1;
  caf::actor relay;
  caf::timespan every{};
  cluster_peers_actor peers; // invalid: the store alone
  // The feed of the node that runs the response, while it relays; batches after a gap wait for the
  // store read that fills it.
  caf::actor feed;
  bool feed_asked = false;
  feed_credit credit;
  bool filling = false;
  std::vector<feed_events> held;
};

using tail_pointer = caf::stateful_actor<tail_state>*;

void ask_feed(tail_pointer self, const std::string& node_id);

// Sends the relay what the store held past the cursor, and moves the cursor.
void send_stored(tail_pointer self, std::vector<response_event>& stored) {
  auto& st = self->state;
  auto events = stream_events(stored);
  if (events.empty())
    return;
  st.after = events.back().sequence;
  caf::anon_send(st.relay, event_atom::value, std::move(events));
}

// Reads the row, then the events after the cursor: a row read finished means the log read after it is
// whole (the terminal events commit with the row).
void look(tail_pointer self) {
  auto& st = self->state;
  self->request(st.store, store_timeout, get_response_atom::value, st.id, st.owner)
    .then(
      [=](response_row& row) {
        auto& st = self->state;
        bool finished = !rs::in_flight(row.status);
        if (!finished)
          ask_feed(self, row.node_id);
        self->request(st.store, store_timeout, response_events_atom::value, st.id, st.after)
          .then(
            [=](std::vector<response_event>& stored) {
              auto& st = self->state;
              send_stored(self, stored);
              if (finished) {
                caf::anon_send(st.relay, run_end_atom::value, response_end{});
                return self->quit();
              }
              self->delayed_send(self, st.every, tail_atom::value);
            },
            [=](caf::error&) { self->delayed_send(self, self->state.every, tail_atom::value); });
      },
      [=](caf::error& err) {
        spdlog::warn("responses: following {} from the store: {}", self->state.id, message_of(err));
        caf::anon_send(self->state.relay, run_end_atom::value, response_end{});
        self->quit();
      });
}

// Asks the node that runs the response for its feed, once at a time (CJ-27).
void ask_feed(tail_pointer self, const std::string& node_id) {
  auto& st = self->state;
  if (!st.peers || st.feed || st.feed_asked || node_id.empty())
    return;
  st.feed_asked = true;
  feed_request req{st.id, feed_credit::grant, caf::actor_cast<caf::actor>(self), "response", st.after};
  self->request(st.peers, store_timeout, subscribe_atom::value, node_id, std::move(req))
    .then(
      [=](feed_ack& ack) {
        auto& st = self->state;
        st.feed_asked = false;
        if (!ack.relay)
          return;
        st.feed = std::move(ack.relay);
        st.credit.granted();
        self->monitor(st.feed);
      },
      [=](caf::error&) { self->state.feed_asked = false; }); // the store tail goes on
}

// Passes a feed's events on past the cursor, and gives the credit back once a batch's worth is used.
void pass_on(tail_pointer self, feed_events batch) {
  auto& st = self->state;
  st.credit.received(batch.sequences.size());
  feed_events out;
  for (std::size_t i = 0; i < batch.sequences.size() && i < batch.frames.size(); ++i)
    if (batch.sequences[i] > st.after) {
      st.after = batch.sequences[i];
      out.sequences.push_back(batch.sequences[i]);
      out.frames.push_back(std::move(batch.frames[i]));
    }
  if (!out.sequences.empty())
    caf::anon_send(st.relay, feed_atom::value, std::move(out));
  if (st.feed)
    if (auto used = st.credit.to_return())
      self->send(st.feed, credit_atom::value, used);
}

// A batch after a gap (the feed ran out of credit, or started late): the store fills the gap first,
// and the batches held meanwhile follow.
void fill_gap(tail_pointer self) {
  auto& st = self->state;
  st.filling = true;
  self->request(st.store, store_timeout, response_events_atom::value, st.id, st.after)
    .then(
      [=](std::vector<response_event>& stored) {
        auto& st = self->state;
        send_stored(self, stored);
        st.filling = false;
        for (auto& batch : std::exchange(st.held, {}))
          pass_on(self, std::move(batch));
      },
      [=](caf::error&) {
        auto& st = self->state;
        st.filling = false;
        st.held.clear(); // the store tail reads them
        st.feed = nullptr;
      });
}

caf::behavior response_tail(tail_pointer self, tail_state init) {
  self->state = std::move(init);
  self->monitor(self->state.relay);
  self->set_down_handler([=](caf::down_msg& msg) {
    if (self->state.feed && msg.source == self->state.feed.address())
      self->state.feed = nullptr; // its node or connection went: the store tail takes over
    else if (msg.source == self->state.relay.address())
      self->quit();
  });
  look(self);
  return {
    [=](tail_atom) {
      if (self->state.feed)
        return self->delayed_send(self, self->state.every, tail_atom::value); // the feed relays meanwhile
      look(self);
    },
    [=](feed_atom, feed_events& batch) {
      auto& st = self->state;
      if (batch.sequences.empty())
        return;
      if (st.filling || batch.sequences.front() > st.after + 1) {
        st.held.push_back(std::move(batch));
        if (!st.filling)
          fill_gap(self);
        return;
      }
      pass_on(self, std::move(batch));
    },
    [=](feed_atom, feed_end& end) {
      self->state.feed = nullptr;
      if (end.run_ended)
        look(self); // its end is stored: the last read sends it and the relay's end
    },
  };
}

} // namespace

std::vector<rs::stream_event> stream_events(std::vector<response_event>& stored) {
  std::vector<rs::stream_event> out;
  for (auto& e : stored) {
    auto doc = protocol::json::parse(e.json);
    auto type = doc ? protocol::json::get_string(*doc, "type") : std::string();
    out.push_back({std::move(type), std::move(e.json), e.sequence});
  }
  return out;
}

void spawn_response_tail(caf::actor_system& sys, response_store_actor store, std::string id, response_owner owner,
                         int64_t after, caf::actor relay, caf::timespan every, cluster_peers_actor peers) {
  tail_state init;
  init.store = std::move(store);
  init.id = std::move(id);
  init.owner = std::move(owner);
  init.after = after;
  init.relay = std::move(relay);
  init.every = every;
  init.peers = std::move(peers);
  sys.spawn(response_tail, std::move(init));
}

void fail_unfinished_responses(caf::actor_system& sys, response_store_actor store,
                               const std::function<bool(const response_row&)>& abandoned, const std::string& message) {
  caf::scoped_actor self{sys};
  std::vector<response_row> rows;
  self->request(store, store_timeout, unfinished_atom::value)
    .receive(
      [&](std::vector<response_row>& r) {
        for (auto& row : r)
          if (abandoned(row))
            rows.push_back(std::move(row));
      },
      [&](caf::error& err) { spdlog::error("responses: cannot read unfinished responses: {}", message_of(err)); });
  auto error = protocol::json::object([&](protocol::json::writer& w) {
    w.Key("code");
    w.String("server_error");
    w.Key("message");
    w.String(message.c_str(), static_cast<rapidjson::SizeType>(message.size()));
  });
  for (auto& row : rows) {
    std::vector<std::string> logged;
    self->request(store, store_timeout, response_events_atom::value, row.id, int64_t{-1})
      .receive(
        [&](std::vector<response_event>& events) {
          for (auto& e : events)
            logged.push_back(std::move(e.json));
        },
        [&](caf::error&) {});
    response_commit c;
    for (auto& e : rs::failed_ending(logged, row.snapshot, error, row.snapshot))
      c.events.push_back({e.sequence, std::move(e.json)});
    row.status = rs::response_status::failed;
    c.response = row;
    self->request(store, store_timeout, save_response_atom::value, std::move(c))
      .receive([](int64_t) {}, [&](caf::error& err) {
        spdlog::error("responses: cannot fail {}: {}", row.id, message_of(err));
      });
  }
  if (!rows.empty())
    spdlog::warn("responses: {} unfinished response(s) failed: {}", rows.size(), message);
}

} // namespace troupe
