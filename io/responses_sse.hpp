// How a response's events reach an HTTP client as server-sent events (RS-35 to RS-39): the run's
// sink for a streaming client, the relay that follows a live run for a resumed stream (RS-6), and
// the replay of a finished one.
#pragma once

#include "actors/event_sink.hpp"
#include "io/http_types.hpp"
#include "protocol/responses_stream.hpp"

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace troupe::io {

// Opens `ex`'s event stream as a run's sink whose queue holds `queue_events` events (RS-39).
std::shared_ptr<event_sink> open_response_sink(http_exchange& ex, int64_t queue_events);

// A relay of a live run's events after sequence `after` to `ex` (subscribe it to the run). It opens
// the stream at start_atom or with the first event, and never holds the run back (RS-55).
caf::actor spawn_response_relay(caf::actor_system& sys, std::shared_ptr<http_exchange> ex, int64_t after);

// Answers `ex` with `events` as one event stream.
void write_response_events(http_exchange& ex, const std::vector<protocol::responses::stream_event>& events);

} // namespace troupe::io
