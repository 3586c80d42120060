// The model port's in-process adapter: the `scripted` model, answering on its own timer thread so a
// turn's delay_ms never blocks an actor.
#pragma once

#include "actors/model_port.hpp"
#include "protocol/scripted_model.hpp"

#include <memory>

namespace troupe::io {

class scripted_model_port : public model_port {
public:
  explicit scripted_model_port(protocol::script_book book);
  ~scripted_model_port() override;

  std::shared_ptr<model_round> open(const protocol::responses::round_request& round,
                                    events_handler events) override;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe::io
