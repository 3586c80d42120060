// GET /v1/runs/{id}/stream (AS-74): the resumable run stream, and the one function that moves it
// between its phases.
#pragma once

#include "actors/cluster_messages.hpp"
#include "actors/run_registry.hpp"
#include "actors/store.hpp"
#include "io/http_types.hpp"

#include <caf/actor_system.hpp>
#include <caf/timestamp.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace troupe::io {

// Where a run stream is: waiting for its subscription, following live events, reading a page of
// stored events (to read again after it when something arrived meanwhile), waiting for its client
// to drain, or done.
enum class stream_phase { subscribing, following, reading, rereading, lagging, done };

// What happens to it.
enum class stream_input {
  subscribed,     // the registry added the stream (or the run had ended already)
  live_next,      // the next live event, and the client has room
  live_behind,    // a live event after a gap, or with the client behind
  live_seen,      // a live event already sent
  run_ended,      // the run announced its end, stored before it was announced
  page_partial,   // a page went out, more is stored, and the client has room
  page_full,      // the client fell behind before the stored events were all sent
  page_caught_up, // the stored events of a running run all went out
  page_final,     // the stored events of a finished run all went out
  room,           // a write made room in the client's buffer
  tail_due,       // no attempt on this node feeds the stream: time to look at the store (CJ-27)
};

// What the stream does on the way: send the live event, read a page from the store, wait for the
// client to drain (at once when it has room already), or send `done` and end.
enum class stream_action { none, send, read, wait, finish };

struct stream_step {
  stream_phase next;
  stream_action action;
};

// Pure, so that its table is tested on its own.
stream_step next_step(stream_phase at, stream_input in);

// Streams `run_id`'s events after `cursor` to `ex`: stored ones first, then live ones, each sequence
// once and in order. A client that falls behind is sent nothing live; once a write made room the
// stream catches up from the store, so a slow client costs no memory here. While no attempt on this
// node feeds it (the run is queued, or held by another node), the stream reads the store every
// `tail` (zero: never, a single node's registry starts every attempt itself). With `peers`, a run the
// store shows running on another node is followed live through that node's feed (CJ-27), with
// credit; the tail stops while the feed relays and starts again once it ends.
void spawn_run_stream(caf::actor_system& sys, std::shared_ptr<http_exchange> ex, run_registry_actor registry,
                      store_actor store, std::string run_id, int64_t cursor, caf::timespan tail,
                      cluster_peers_actor peers = {});

} // namespace troupe::io
