// The Responses executor's model port when model.upstreams or model.models route by model name
// (responses.md Appendix A): each round goes to the adapter the model catalog routes its model to.
#pragma once

#include "actors/model_port.hpp"
#include "io/model_catalog.hpp"

#include <memory>
#include <vector>

namespace troupe::io {

class routing_model_port : public model_port {
public:
  // `ports` in routing order: model.upstreams[] entries, then the default upstream.
  routing_model_port(std::vector<std::shared_ptr<model_port>> ports,
                     std::shared_ptr<const model_catalog> catalog);
  ~routing_model_port() override;

  routing_model_port(const routing_model_port&) = delete;
  routing_model_port& operator=(const routing_model_port&) = delete;

  std::shared_ptr<model_round> open(const protocol::responses::round_request& round,
                                    events_handler events) override;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe::io
