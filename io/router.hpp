// Routes a request by method and path pattern (`/v1/runs/{run_id}`) to its handler. A last segment
// `{name...}` captures the rest of the path, slashes included (`/v1/models/{model...}`).
#pragma once

#include "io/http_types.hpp"

#include <string>
#include <vector>

namespace troupe::io {

class router {
public:
  void add(std::string method, std::string pattern, http_handler handler);

  // Calls the matching handler, or answers 404 / 405 in the path's dialect.
  void dispatch(http_request& request, const std::shared_ptr<http_exchange>& exchange) const;

private:
  struct route {
    std::string method;
    std::vector<std::string> segments; // "{name}" segments capture, a last "{name...}" the rest
    http_handler handler;
  };
  std::vector<route> routes_;
};

} // namespace troupe::io
