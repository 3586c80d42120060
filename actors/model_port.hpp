// The model port (DESIGN.md): one model round, read as it arrives, in the terms of either upstream
// protocol's reader (responses.md §8), for the agent loop of both surfaces. Adapters live in io/.
#pragma once

#include "actors/cancel_handle.hpp"
#include "protocol/model_round.hpp"

#include <functional>
#include <memory>
#include <vector>

namespace troupe {

// A round in flight. cancel() aborts the upstream request; resume() lets reading go on.
class model_round : public cancel_handle {
public:
  virtual void resume() = 0;
};

class model_port {
public:
  using events_handler = std::function<void(std::vector<protocol::responses::upstream_event>)>;

  virtual ~model_port() = default;

  // Starts one round. `events` runs once per batch, on any thread, never from inside open(); the last
  // batch ends with a finish or a failure event. After each batch reading pauses until resume()
  // (RS-39: a slow client slows the upstream read). Nothing is delivered after cancel().
  virtual std::shared_ptr<model_round> open(const protocol::responses::round_request& round,
                                            events_handler events) = 0;
};

} // namespace troupe
