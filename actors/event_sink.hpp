// Where a response's events go when a client streams them: the edge implements it over its SSE
// stream, so a run writes to its client without another actor in between.
#pragma once

#include "protocol/responses_stream.hpp"

#include <functional>
#include <vector>

namespace troupe {

class event_sink {
public:
  virtual ~event_sink() = default;
  // Queues the events for the client (thread-safe); false once the client is gone.
  virtual bool send(const std::vector<protocol::responses::stream_event>& events) = 0;
  // The client's queue is full (stream.outbound_queue_events, or half its bytes): a foreground run
  // holds back (RS-39) until `drained` is told.
  virtual bool backlogged() const = 0;
  // `drained` runs, on any thread, once a queue that backlogged() found full has room again.
  virtual void on_drained(std::function<void()> drained) = 0;
  // Ends the stream once what is queued is written.
  virtual void finish() = 0;
};

} // namespace troupe
