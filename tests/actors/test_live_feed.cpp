// CJ-27's feeds against fake registries: a feed relays the events of the run or response live here
// to its subscriber (a stream on another node) one credit each, drops what comes at zero credit,
// takes credit back, and ends with the run, the response or the attempt.
#include "actors/errors.hpp"
#include "actors/live_feed.hpp"
#include "protocol/agent_event.hpp"
#include "protocol/sse.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

using namespace troupe;
using namespace std::chrono_literals;

namespace {

// Holds run `held` here; any other run has no attempt here. (A function actor takes an argument:
// CAF 0.17 spawning one without any trips UBSan.)
caf::behavior fake_registry(caf::event_based_actor*, std::string held) {
  return {[=](subscribe_atom, const std::string& run_id, const caf::actor&) { return run_id == held; }};
}

// Runs response `running` here.
caf::behavior fake_responses(caf::event_based_actor*, std::string running) {
  return {[=](subscribe_atom, const std::string& id, int64_t, const caf::actor&) { return id == running; }};
}

protocol::agent_event event(int64_t sequence) {
  protocol::agent_event e;
  e.type = "content";
  e.sequence = sequence;
  e.run_id = "r1";
  e.content = "part " + std::to_string(sequence);
  return e;
}

struct fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  caf::actor registry = sys.spawn(fake_registry, std::string("r1"));

  ~fixture() { self->send_exit(registry, caf::exit_reason::user_shutdown); }

  // A feed of `run_id` for this test, with `credit`; answers its relay (none: nothing feeds it here).
  caf::actor subscribe(const std::string& run_id, int64_t credit) {
    auto feed = spawn_run_feed(sys, caf::actor_cast<run_registry_actor>(registry),
                               feed_request{run_id, credit, caf::actor_cast<caf::actor>(self)});
    caf::actor relay;
    self->request(feed, 5s, subscribe_atom::value)
      .receive([&](feed_ack& ack) { relay = ack.relay; }, [](caf::error& err) { FAIL(message_of(err)); });
    return relay;
  }

  // The sequences of the batches that reach the test within `wait`.
  std::vector<int64_t> received(std::chrono::milliseconds wait = 300ms) {
    std::vector<int64_t> out;
    bool more = true;
    while (more)
      self->receive(
        [&](feed_atom, const feed_events& batch) {
          REQUIRE(batch.sequences.size() == batch.frames.size());
          for (std::size_t i = 0; i < batch.sequences.size(); ++i) {
            CHECK(batch.frames[i] == protocol::to_sse_frame(event(batch.sequences[i])));
            out.push_back(batch.sequences[i]);
          }
        },
        caf::after(wait) >> [&] { more = false; });
    return out;
  }

  bool ended(bool run_ended) {
    bool got = false;
    self->receive([&](feed_atom, const feed_end& end) { got = end.run_ended == run_ended; },
                  caf::after(5s) >> [] {});
    return got;
  }
};

} // namespace

TEST_CASE_METHOD(fixture, "a feed relays the attempt's events as their frames, one credit each, drops what comes at "
                          "zero credit and goes on once credit comes back (CJ-27)",
                 "[cluster][live_feed]") {
  auto relay = subscribe("r1", 3);
  REQUIRE(relay);
  for (int64_t i = 0; i < 5; ++i)
    self->send(relay, event_atom::value, event(i));
  CHECK(received() == std::vector<int64_t>{0, 1, 2}); // 3 and 4 dropped: the stream reads them stored
  self->send(relay, credit_atom::value, int64_t{2});
  for (int64_t i = 5; i < 8; ++i)
    self->send(relay, event_atom::value, event(i));
  CHECK(received() == std::vector<int64_t>{5, 6});
  self->send(relay, credit_atom::value, int64_t{-100}); // no credit is taken away, nor grows past the cap
  self->send(relay, credit_atom::value, max_feed_credit * 10);
  self->send(relay, event_atom::value, event(8));
  CHECK(received() == std::vector<int64_t>{8});
  self->send(relay, run_end_atom::value, run_result{});
  CHECK(ended(true));
}

TEST_CASE_METHOD(fixture, "a feed ends when the attempt here stops short of the run's end, and none starts for a run "
                          "no attempt here holds (CJ-27)",
                 "[cluster][live_feed]") {
  auto relay = subscribe("r1", 256);
  REQUIRE(relay);
  self->send(relay, attempt_gone_atom::value);
  CHECK(ended(false));
  CHECK_FALSE(subscribe("r2", 256));
}

TEST_CASE_METHOD(fixture, "a response's feed relays what its run delivers as SSE frames, as far as the credit goes, "
                          "and ends with the response (CJ-27, RS-6)",
                 "[cluster][live_feed]") {
  auto responses = sys.spawn(fake_responses, std::string("resp_1"));
  auto feed = spawn_response_feed(sys, caf::actor_cast<response_registry_actor>(responses),
                                  feed_request{"resp_1", 2, caf::actor_cast<caf::actor>(self), "response", 4});
  caf::actor relay;
  self->request(feed, 5s, subscribe_atom::value)
    .receive([&](feed_ack& ack) { relay = ack.relay; }, [](caf::error& err) { FAIL(message_of(err)); });
  REQUIRE(relay);
  std::vector<protocol::responses::stream_event> events{
    {"response.output_text.delta", R"({"type":"response.output_text.delta","sequence_number":5})", 5},
    {"response.output_text.delta", R"({"type":"response.output_text.delta","sequence_number":6})", 6},
    {"response.output_text.delta", R"({"type":"response.output_text.delta","sequence_number":7})", 7}};
  self->send(relay, event_atom::value, events);
  feed_events got;
  self->receive([&](feed_atom, feed_events& batch) { got = std::move(batch); }, caf::after(5s) >> [] {});
  CHECK(got.sequences == std::vector<int64_t>{5, 6}); // the third is past the credit: the store has it
  REQUIRE(got.frames.size() == 2);
  CHECK(got.frames[0] == protocol::sse_frame(std::nullopt, events[0].type, events[0].json));
  self->send(relay, run_end_atom::value, response_end{});
  CHECK(ended(true));
  self->send_exit(responses, caf::exit_reason::user_shutdown);
}

TEST_CASE("a subscriber gives a feed's credit back in batches of 64 once used, never more than it granted (CJ-27)",
          "[cluster][live_feed]") {
  feed_credit credit;
  credit.granted();
  credit.received(63);
  CHECK(credit.to_return() == 0);
  credit.received(1);
  CHECK(credit.to_return() == 64);
  CHECK(credit.to_return() == 0);
  credit.received(256); // all of it used, while the stream was behind
  CHECK(credit.to_return() == feed_credit::grant);
}
