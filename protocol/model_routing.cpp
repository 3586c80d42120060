#include "protocol/model_routing.hpp"

#include "protocol/json.hpp"

#include <algorithm>

namespace troupe::protocol {

bool serves(const model_names& models, std::string_view model) {
  return models.any || std::find(models.names.begin(), models.names.end(), model) != models.names.end();
}

std::vector<model_names> routing_order(const model_config& m, const discovered_models& discovered) {
  std::vector<model_names> order;
  for (std::size_t i = 0; i < m.upstreams.size(); ++i) {
    order.push_back(m.upstreams[i].models);
    if (i < discovered.size())
      order.back().names.insert(order.back().names.end(), discovered[i].begin(), discovered[i].end());
  }
  order.push_back(m.models);
  return order;
}

std::optional<std::size_t> route_model(const std::vector<model_names>& order, std::string_view model) {
  for (std::size_t i = 0; i < order.size(); ++i)
    if (serves(order[i], model))
      return i;
  return std::nullopt;
}

std::vector<std::string> listed_models(const model_config& m, const discovered_models& discovered) {
  std::vector<std::string> out;
  auto add = [&](const std::string& name) {
    if (std::find(out.begin(), out.end(), name) == out.end())
      out.push_back(name);
  };
  auto order = routing_order(m, discovered);
  for (std::size_t i = 0; i + 1 < order.size(); ++i)
    for (auto& name : order[i].names)
      add(name);
  if (m.models.any)
    add(m.name);
  for (auto& name : m.models.names)
    add(name);
  return out;
}

std::optional<std::vector<std::string>> parse_model_list(std::string_view body) {
  auto doc = json::parse(body);
  if (!doc || !doc->IsObject())
    return std::nullopt;
  auto data = json::member(*doc, "data");
  if (!data || !data->IsArray())
    return std::nullopt;
  std::vector<std::string> ids;
  for (auto& m : data->GetArray()) {
    auto id = m.IsObject() ? json::get_string(m, "id") : std::string();
    if (!id.empty() && std::find(ids.begin(), ids.end(), id) == ids.end())
      ids.push_back(std::move(id));
  }
  return ids;
}

problem model_not_found(std::string_view model) {
  return {errc::not_found, "The model '" + std::string(model) + "' does not exist.", "model", "model_not_found"};
}

} // namespace troupe::protocol
