// The model port: how the agent loop reaches a model, whatever adapter serves it.
#pragma once

#include "actors/cancel_handle.hpp"
#include "protocol/chat_types.hpp"

#include <functional>
#include <memory>

namespace troupe {

class model_port {
public:
  using completion = std::function<void(protocol::model_outcome)>;

  virtual ~model_port() = default;

  // Starts one inference, retries included. `done` runs exactly once on any thread, also after
  // cancel() (then with `cancelled` set). Must not call `done` before returning.
  virtual std::shared_ptr<cancel_handle> infer(protocol::model_request request, completion done) = 0;
};

} // namespace troupe
