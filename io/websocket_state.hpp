// The life of a WebSocket connection as named states and one pure transition function, so that what
// the session may do in each state is read from a table (tests/io/test_websocket_state.cpp) rather than
// from a set of flags. No Beast here.
#pragma once

namespace troupe::io::ws {

enum class phase {
  handshake,            // answering the upgrade request; frames sent meanwhile wait
  handshake_then_close, // the route closed during the handshake: once it is done, queued frames, then the close
  open,                 // messages flow both ways
  draining,             // the route closed: reading has stopped, queued frames go out before the close frame
  close_sent,           // the close frame is on its way; Beast reads up to the peer's close, then tears down
  ended,                // the connection is gone, whatever ended it
};

enum class event {
  handshake_done,
  close_asked,    // the route's close() reached the connection
  outbox_drained, // nothing queued is left to write before a close frame
  finished,       // the close completed, a read or write failed, or the server stopped the connection
};

constexpr phase next(phase p, event e) {
  if (p == phase::ended || e == event::finished)
    return phase::ended;
  switch (e) {
  case event::handshake_done:
    return p == phase::handshake ? phase::open : p == phase::handshake_then_close ? phase::draining : p;
  case event::close_asked:
    return p == phase::handshake ? phase::handshake_then_close : p == phase::open ? phase::draining : p;
  case event::outbox_drained:
    return p == phase::draining ? phase::close_sent : p;
  case event::finished:
    break;
  }
  return phase::ended;
}

// Messages are read only while open: once the route closes, what the client still sends is dropped.
constexpr bool reads(phase p) {
  return p == phase::open;
}

// Frames are written once the handshake is done, until the close frame.
constexpr bool writes(phase p) {
  return p == phase::open || p == phase::draining;
}

// A frame the route sends is queued until the close frame has gone.
constexpr bool queues(phase p) {
  return p != phase::close_sent && p != phase::ended;
}

} // namespace troupe::io::ws
