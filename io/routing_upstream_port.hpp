// The Responses executor's upstream port when model.upstreams or model.models route by model name
// (responses.md Appendix A): each round goes to the adapter serving its request's model.
#pragma once

#include "actors/upstream_port.hpp"
#include "protocol/config.hpp"

#include <memory>
#include <vector>

namespace troupe::io {

class routing_upstream_port : public upstream_port {
public:
  struct route {
    protocol::model_names models;
    std::shared_ptr<upstream_port> port;
  };

  // `routes` in routing order: model.upstreams[] entries, then the default upstream.
  explicit routing_upstream_port(std::vector<route> routes);
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
