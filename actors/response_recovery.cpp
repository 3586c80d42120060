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
};

using tail_pointer = caf::stateful_actor<tail_state>*;

// Reads the row, then the events after the cursor: a row read finished means the log read after it is
// whole (the terminal events commit with the row).
void look(tail_pointer self) {
  auto& st = self->state;
  self->request(st.store, store_timeout, get_response_atom::value, st.id, st.owner)
    .then(
      [=](response_row& row) {
        auto& st = self->state;
        bool finished = !rs::in_flight(row.status);
        self->request(st.store, store_timeout, response_events_atom::value, st.id, st.after)
          .then(
            [=](std::vector<response_event>& stored) {
              auto& st = self->state;
              auto events = stream_events(stored);
              if (!events.empty()) {
                st.after = events.back().sequence;
                caf::anon_send(st.relay, event_atom::value, std::move(events));
              }
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

caf::behavior response_tail(tail_pointer self, tail_state init) {
  self->state = std::move(init);
  self->monitor(self->state.relay);
  self->set_down_handler([=](caf::down_msg&) { self->quit(); });
  look(self);
  return {[=](tail_atom) { look(self); }};
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
                         int64_t after, caf::actor relay, caf::timespan every) {
  sys.spawn(response_tail, tail_state{std::move(store), std::move(id), std::move(owner), after, std::move(relay), every});
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
