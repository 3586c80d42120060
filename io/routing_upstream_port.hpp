// The Responses executor's upstream port when model.upstreams or model.models route by model name
// (responses.md Appendix A): each round goes to the adapter the model catalog routes its model to.
#pragma once

#include "actors/upstream_port.hpp"
#include "io/model_catalog.hpp"

#include <memory>
#include <vector>

namespace troupe::io {

class routing_upstream_port : public upstream_port {
public:
  // `ports` in routing order: model.upstreams[] entries, then the default upstream.
  routing_upstream_port(std::vector<std::shared_ptr<upstream_port>> ports,
                        std::shared_ptr<const model_catalog> catalog);
  ~routing_upstream_port() override;

  routing_upstream_port(const routing_upstream_port&) = delete;
  routing_upstream_port& operator=(const routing_upstream_port&) = delete;

  std::shared_ptr<upstream_round> open(const protocol::responses::round_request& round,
                                       events_handler events) override;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace troupe::io
