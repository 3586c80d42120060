// How an SSE producer waits for a slow client without polling: it asks whether the client is
// behind, and once it was, it is told when a write made room. The Responses sink (RS-39) and the
// run stream (AS-74) both pace themselves this way.
#pragma once

#include "io/http_types.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>

namespace troupe::io {

class stream_pacing : public std::enable_shared_from_this<stream_pacing> {
public:
  // Behind means `event_limit` counted events unwritten, or half the client's byte buffer queued.
  static std::shared_ptr<stream_pacing> over(std::shared_ptr<event_stream> stream,
                                             int64_t event_limit = std::numeric_limits<int64_t>::max());

  event_stream& stream() const { return *stream_; }

  // True while the client is behind. Asking arms the notice: a write that makes room after this call
  // runs the `drained` of on_drained (at worst once more than needed).
  bool behind() const;

  // `drained` runs on an I/O thread, once per behind() asked, when a write left the client room.
  void on_drained(std::function<void()> drained);

  stream_pacing(std::shared_ptr<event_stream> stream, int64_t event_limit)
    : stream_(std::move(stream)), event_limit_(event_limit) {}

private:
  bool has_room() const { return stream_->queued_events() < event_limit_ && !stream_->backlogged(); }

  std::shared_ptr<event_stream> stream_;
  const int64_t event_limit_;
  mutable std::atomic<bool> asked_{false}; // behind() was asked, and nobody was told of room since
};

} // namespace troupe::io
