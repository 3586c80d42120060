#include "io/responses_sse.hpp"

#include "actors/cluster_messages.hpp"
#include "actors/response_run.hpp"
#include "io/stream_pacing.hpp"
#include "protocol/sse.hpp"

#include <caf/all.hpp>

#include <optional>

namespace troupe::io {

namespace {

namespace rs = protocol::responses;

// The SSE frames of the events after sequence `last`, which moves to the last one written: the
// frames of a batch leave in one write.
std::string frames_after(const std::vector<rs::stream_event>& events, int64_t& last) {
  std::string frames;
  for (auto& e : events) {
    if (e.sequence <= last)
      continue;
    last = e.sequence;
    frames += protocol::sse_frame(std::nullopt, e.type, e.json);
  }
  return frames;
}

// Writes a running background response's events to a client that resumed its stream (RS-6). The
// run never waits on it (RS-55); a client too slow for service.max_stream_buffer_bytes is dropped.
// The stream opens once the registry says the run lives (start_atom), or with the first event.
struct relay_state {
  static inline const char* name = "responses_relay";
  std::shared_ptr<http_exchange> ex;
  std::shared_ptr<event_stream> stream;
  int64_t last = -1; // sequences already written (the backlog and live events may overlap)

  event_stream& open() {
    if (!stream)
      stream = ex->open_event_stream({}); // Cache-Control: no-cache on every event stream (RS-35)
    return *stream;
  }
};

caf::behavior sse_relay(caf::stateful_actor<relay_state>* self, std::shared_ptr<http_exchange> ex, int64_t after) {
  self->state.ex = std::move(ex);
  self->state.last = after;
  return {
    [=](start_atom) { self->state.open(); },
    [=](event_atom, std::vector<rs::stream_event>& events) {
      auto& st = self->state;
      auto frames = frames_after(events, st.last);
      if (!frames.empty() && !st.open().send(std::move(frames)))
        self->quit();
    },
    // CJ-27: the node that runs it feeds its frames live, through the store tail here.
    [=](feed_atom, feed_events& batch) {
      auto& st = self->state;
      std::string frames;
      for (std::size_t i = 0; i < batch.sequences.size() && i < batch.frames.size(); ++i)
        if (batch.sequences[i] > st.last) {
          st.last = batch.sequences[i];
          frames += batch.frames[i];
        }
      if (!frames.empty() && !st.open().send(std::move(frames)))
        self->quit();
    },
    [=](run_end_atom, const response_end&) {
      self->state.open().finish();
      self->quit();
    },
  };
}

// A streaming client as the run's sink: its queue holds `limit` events (RS-39).
class sse_sink : public event_sink {
public:
  sse_sink(std::shared_ptr<event_stream> stream, int64_t limit) : pacing_(stream_pacing::over(std::move(stream), limit)) {}

  bool send(const std::vector<rs::stream_event>& events) override {
    return pacing_->stream().send(frames_after(events, last_), static_cast<int64_t>(events.size()));
  }
  bool backlogged() const override { return pacing_->behind(); }
  void on_drained(std::function<void()> drained) override { pacing_->on_drained(std::move(drained)); }
  void finish() override { pacing_->stream().finish(); }

private:
  std::shared_ptr<stream_pacing> pacing_;
  int64_t last_ = -1;
};

std::shared_ptr<event_stream> open_stream(http_exchange& ex) {
  return ex.open_event_stream({}); // the server sets Cache-Control: no-cache on every event stream (RS-35)
}

} // namespace

std::shared_ptr<event_sink> open_response_sink(http_exchange& ex, int64_t queue_events) {
  return std::make_shared<sse_sink>(open_stream(ex), queue_events);
}

caf::actor spawn_response_relay(caf::actor_system& sys, std::shared_ptr<http_exchange> ex, int64_t after) {
  return sys.spawn(sse_relay, std::move(ex), after);
}

void write_response_events(http_exchange& ex, const std::vector<protocol::responses::stream_event>& events) {
  auto stream = open_stream(ex);
  for (auto& e : events)
    if (!stream->send(protocol::sse_frame(std::nullopt, e.type, e.json)))
      break;
  stream->finish();
}

} // namespace troupe::io
