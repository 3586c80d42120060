// The WebSocket session's phases (io/websocket_state.hpp), read from tables: every phase under every
// event, and what the session may do in each phase.
#include "io/websocket_state.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace troupe::io::ws;

namespace {

// Names in the order of the enums, for the failure messages.
std::string name(phase p) {
  static const char* const names[] = {"handshake", "handshake_then_close", "open", "draining", "close_sent", "ended"};
  return names[static_cast<int>(p)];
}

std::string name(event e) {
  static const char* const names[] = {"handshake_done", "close_asked", "outbox_drained", "finished"};
  return names[static_cast<int>(e)];
}

struct transition {
  phase from;
  event on;
  phase to;
};

} // namespace

TEST_CASE("every phase of a WebSocket moves under every event as the table says", "[websocket]") {
  using p = phase;
  using e = event;
  const transition table[] = {
    // The handshake ends open, or straight into draining when the route closed meanwhile (CO-10's
    // 4403 and a refused caller's 4401 are closed before the handshake is written).
    {p::handshake, e::handshake_done, p::open},
    {p::handshake, e::close_asked, p::handshake_then_close},
    {p::handshake, e::outbox_drained, p::handshake},
    {p::handshake, e::finished, p::ended},
    {p::handshake_then_close, e::handshake_done, p::draining},
    {p::handshake_then_close, e::close_asked, p::handshake_then_close},
    {p::handshake_then_close, e::outbox_drained, p::handshake_then_close},
    {p::handshake_then_close, e::finished, p::ended},
    {p::open, e::handshake_done, p::open},
    {p::open, e::close_asked, p::draining},
    {p::open, e::outbox_drained, p::open}, // an empty outbox while open sends no close frame
    {p::open, e::finished, p::ended},
    // The close frame goes only once what was queued before it is written.
    {p::draining, e::handshake_done, p::draining},
    {p::draining, e::close_asked, p::draining},
    {p::draining, e::outbox_drained, p::close_sent},
    {p::draining, e::finished, p::ended},
    {p::close_sent, e::handshake_done, p::close_sent},
    {p::close_sent, e::close_asked, p::close_sent},
    {p::close_sent, e::outbox_drained, p::close_sent},
    {p::close_sent, e::finished, p::ended},
    // Nothing leaves the end: a handshake that completes after a stop finds the connection ended.
    {p::ended, e::handshake_done, p::ended},
    {p::ended, e::close_asked, p::ended},
    {p::ended, e::outbox_drained, p::ended},
    {p::ended, e::finished, p::ended},
  };
  for (const auto& t : table) {
    INFO(name(t.from) << " on " << name(t.on));
    CHECK(name(next(t.from, t.on)) == name(t.to));
  }
}

TEST_CASE("a WebSocket reads only while open, writes from the handshake's end to its close frame, and queues "
          "until the close frame",
          "[websocket]") {
  struct row {
    phase p;
    bool reads, writes, queues;
  };
  const row table[] = {
    {phase::handshake, false, false, true},
    {phase::handshake_then_close, false, false, true},
    {phase::open, true, true, true},
    {phase::draining, false, true, true}, // what the client still sends once the route closed is dropped
    {phase::close_sent, false, false, false},
    {phase::ended, false, false, false},
  };
  for (const auto& r : table) {
    INFO(name(r.p));
    CHECK(reads(r.p) == r.reads);
    CHECK(writes(r.p) == r.writes);
    CHECK(queues(r.p) == r.queues);
  }
}
