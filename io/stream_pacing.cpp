#include "io/stream_pacing.hpp"

namespace troupe::io {

std::shared_ptr<stream_pacing> stream_pacing::over(std::shared_ptr<event_stream> stream, int64_t event_limit) {
  return std::make_shared<stream_pacing>(std::move(stream), event_limit);
}

bool stream_pacing::behind() const {
  // Set before looking, and cleared only by the notice: a write that makes room after this call
  // always finds it set.
  asked_ = true;
  return !has_room();
}

void stream_pacing::on_drained(std::function<void()> drained) {
  std::weak_ptr<stream_pacing> self = weak_from_this();
  stream_->on_events_written([self, drained = std::move(drained)] {
    auto pacing = self.lock();
    if (pacing && pacing->asked_ && pacing->has_room() && pacing->asked_.exchange(false))
      drained();
  });
}

} // namespace troupe::io
