// Model routing of the Responses gateway (responses.md Appendix A, RS-2 model_not_found).
#include "protocol/model_routing.hpp"

#include <catch2/catch.hpp>

using namespace troupe::protocol;

namespace {

model_names list(std::vector<std::string> names) {
  model_names m;
  m.any = false;
  m.names = std::move(names);
  return m;
}

model_names every() {
  return model_names{};
}

} // namespace

TEST_CASE("\"*\" serves every model name and a list only the names it holds", "[routing]") {
  CHECK(serves(every(), "anything"));
  CHECK(serves(every(), ""));
  CHECK(serves(list({"qwen3", "llama"}), "llama"));
  CHECK_FALSE(serves(list({"qwen3", "llama"}), "Qwen3")); // names match exactly
  CHECK_FALSE(serves(list({"qwen3"}), "qwen"));
  CHECK_FALSE(serves(list({}), "qwen3"));
}

TEST_CASE("the first list serving the model wins, even when a later one would too", "[routing]") {
  std::vector<model_names> order{list({"a"}), list({"b", "c"}), every(), list({"c"})};
  CHECK(route_model(order, "a") == std::optional<std::size_t>(0));
  CHECK(route_model(order, "c") == std::optional<std::size_t>(1));
  CHECK(route_model(order, "zzz") == std::optional<std::size_t>(2));
}

TEST_CASE("a model no list serves has no route", "[routing]") { // RS-2 model_not_found
  CHECK_FALSE(route_model({list({"a"}), list({"b"})}, "c").has_value());
  CHECK_FALSE(route_model({}, "c").has_value());
}

TEST_CASE("the routing order is model.upstreams in order, then the default upstream's model.models", "[routing]") {
  model_config m;
  upstream_config first, second;
  first.models = list({"a"});
  second.models = every();
  m.upstreams = {first, second};
  m.models = list({"default-only"});
  auto order = routing_order(m);
  REQUIRE(order.size() == 3);
  CHECK(order[0].names == std::vector<std::string>{"a"});
  CHECK(order[1].any);
  CHECK(order[2].names == std::vector<std::string>{"default-only"});
  CHECK(routing_order(model_config{}).size() == 1); // only the default, serving "*"
  CHECK(route_model(routing_order(model_config{}), "whatever") == std::optional<std::size_t>(0));
}

TEST_CASE("model_not_found is RS-2's 404 with the exact message and param model", "[routing]") {
  auto e = model_not_found("gpt-9");
  CHECK(http_status(e.code) == 404);
  CHECK(e.message == "The model 'gpt-9' does not exist.");
  CHECK(e.param == "model");
  CHECK(e.kind == "model_not_found");
  CHECK(render_error(dialect::openai, e).body
        == R"({"error":{"message":"The model 'gpt-9' does not exist.","type":"invalid_request_error","param":"model","code":"model_not_found"}})");
}

TEST_CASE("GET /v1/models lists every name an entry routes, then the default upstream's, each once", "[routing]") { // RS-13
  model_config m;
  m.name = "qwen3";
  CHECK(listed_models(m) == std::vector<std::string>{"qwen3"});
  upstream_config a;
  a.models = list({"alpha", "beta"});
  upstream_config any; // "*" adds no name
  upstream_config b;
  b.models = list({"beta", "gamma"});
  m.upstreams = {a, any, b};
  CHECK(listed_models(m) == std::vector<std::string>{"alpha", "beta", "gamma", "qwen3"});
  m.models = list({"scripted", "alpha"}); // a list replaces model.name
  CHECK(listed_models(m) == std::vector<std::string>{"alpha", "beta", "gamma", "scripted"});
}

TEST_CASE("names an entry discovered route to it and are listed after its configured ones", "[routing]") { // RS-13
  model_config m;
  m.name = "scripted";
  upstream_config a;
  a.models = list({"alpha"});
  upstream_config b;
  b.models = list({"beta"});
  m.upstreams = {a, b};
  m.models = list({"scripted"});
  discovered_models found{{"alpha", "alpha-big"}, {}};
  CHECK(listed_models(m, found) == std::vector<std::string>{"alpha", "alpha-big", "beta", "scripted"});
  auto order = routing_order(m, found);
  CHECK(route_model(order, "alpha-big") == std::optional<std::size_t>(0));
  CHECK(route_model(order, "beta") == std::optional<std::size_t>(1));
  CHECK_FALSE(route_model(routing_order(m), "alpha-big").has_value()); // before discovery
  CHECK(listed_models(m, {{"x"}}) == std::vector<std::string>{"alpha", "x", "beta", "scripted"}); // shorter list
}

TEST_CASE("a model list answer gives its ids in order, each once; anything else is not a list", "[routing]") {
  CHECK(parse_model_list(R"({"object":"list","data":[{"id":"qwen3","object":"model"},{"id":"llama"},{"id":"qwen3"}]})")
        == std::vector<std::string>{"qwen3", "llama"});
  CHECK(parse_model_list(R"({"data":[]})") == std::vector<std::string>{});
  CHECK(parse_model_list(R"({"data":[{"name":"no id"},7,{"id":""}]})") == std::vector<std::string>{});
  CHECK_FALSE(parse_model_list("not json").has_value());
  CHECK_FALSE(parse_model_list(R"({"models":["a"]})").has_value());
  CHECK_FALSE(parse_model_list(R"([{"id":"a"}])").has_value());
}
