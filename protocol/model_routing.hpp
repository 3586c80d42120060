// Which upstream serves a Responses request's model (responses.md Appendix A): the first
// model.upstreams[] entry whose `models` matches, then the default upstream with model.models; no
// match is RS-2's model_not_found.
#pragma once

#include "protocol/config.hpp"
#include "protocol/responses_items.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::protocol {

bool serves(const model_names& models, std::string_view model);

// What each model.upstreams[] entry with discover_models found at GET {base_url}/models, by entry
// index (missing or empty: nothing found).
using discovered_models = std::vector<std::vector<std::string>>;

// The model lists in routing order: each model.upstreams[] entry's with what it discovered, then
// model.models.
std::vector<model_names> routing_order(const model_config& m, const discovered_models& discovered = {});

// The position in `order` of the first list serving `model`, or nullopt when none does.
std::optional<std::size_t> route_model(const std::vector<model_names>& order, std::string_view model);

// RS-13: the names GET /v1/models lists, in routing order, each once: every name an entry lists or
// discovered, then the default upstream's (model.name when model.models is "*"). "*" adds no name.
std::vector<std::string> listed_models(const model_config& m, const discovered_models& discovered = {});

// The ids of an OpenAI-style model list ({"object":"list","data":[{"id":…},…]}), or nullopt when
// `body` is not one.
std::optional<std::vector<std::string>> parse_model_list(std::string_view body);

// RS-2: 404 model_not_found, param "model".
problem model_not_found(std::string_view model);

} // namespace troupe::protocol
