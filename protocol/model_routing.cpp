#include "protocol/model_routing.hpp"

#include <algorithm>

namespace troupe::protocol {

bool serves(const model_names& models, std::string_view model) {
  return models.any || std::find(models.names.begin(), models.names.end(), model) != models.names.end();
}

std::vector<model_names> routing_order(const model_config& m) {
  std::vector<model_names> order;
  for (auto& u : m.upstreams)
    order.push_back(u.models);
  order.push_back(m.models);
  return order;
}

std::optional<std::size_t> route_model(const std::vector<model_names>& order, std::string_view model) {
  for (std::size_t i = 0; i < order.size(); ++i)
    if (serves(order[i], model))
      return i;
  return std::nullopt;
}

std::vector<std::string> listed_models(const model_config& m) {
  std::vector<std::string> out;
  auto add = [&](const std::string& name) {
    if (std::find(out.begin(), out.end(), name) == out.end())
      out.push_back(name);
  };
  for (auto& u : m.upstreams)
    for (auto& name : u.models.names)
      add(name);
  if (m.models.any)
    add(m.name);
  for (auto& name : m.models.names)
    add(name);
  return out;
}

responses::api_error model_not_found(std::string_view model) {
  return {404, "The model '" + std::string(model) + "' does not exist.", "model", "model_not_found"};
}

} // namespace troupe::protocol
