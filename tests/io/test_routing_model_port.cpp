// The Responses executor's routing port (responses.md Appendix A): each round goes to the adapter
// serving its model; a model no route serves fails its round (the backstop behind RS-2's 404).
#include "io/routing_model_port.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

using namespace troupe;
namespace rs = troupe::protocol::responses;

namespace {

struct idle_round : model_round {
  void cancel() override {}
  void resume() override {}
};

// Records the model of every round it is handed.
struct recording_port : model_port {
  std::vector<std::string> models;
  std::shared_ptr<model_round> open(const rs::round_request& round, events_handler) override {
    models.push_back(round.model);
    return std::make_shared<idle_round>();
  }
};

protocol::model_names names(std::vector<std::string> list) {
  protocol::model_names m;
  m.any = false;
  m.names = std::move(list);
  return m;
}

struct fixture {
  std::shared_ptr<recording_port> a = std::make_shared<recording_port>();
  std::shared_ptr<recording_port> b = std::make_shared<recording_port>();
  io::routing_model_port router{{a, b}, catalog({names({"alpha"}), names({"alpha", "beta"})})};

  // Two upstream entries, and a default upstream that serves no name.
  static std::shared_ptr<io::model_catalog> catalog(std::vector<protocol::model_names> entries) {
    protocol::model_config m;
    for (auto& e : entries) {
      protocol::upstream_config u;
      u.models = e;
      m.upstreams.push_back(u);
    }
    m.models = names({});
    return std::make_shared<io::model_catalog>(m, std::vector<io::model_source>{});
  }

  std::shared_ptr<model_round> open(const std::string& model, model_port::events_handler events = {}) {
    rs::round_request round;
    round.model = model;
    return router.open(round, std::move(events));
  }
};

} // namespace

TEST_CASE("a round goes to the first route serving its model", "[io][routing]") {
  fixture f;
  f.open("alpha");
  f.open("beta");
  f.open("alpha");
  CHECK(f.a->models == std::vector<std::string>{"alpha", "alpha"});
  CHECK(f.b->models == std::vector<std::string>{"beta"});
}

TEST_CASE("a round for a model no route serves fails with model_not_found, never from inside open()",
          "[io][routing]") { // RS-2
  fixture f;
  std::promise<std::vector<rs::upstream_event>> delivered;
  std::thread::id delivered_on;
  f.open("gamma", [&](std::vector<rs::upstream_event> events) {
    delivered_on = std::this_thread::get_id();
    delivered.set_value(std::move(events));
  });
  auto future = delivered.get_future();
  REQUIRE(future.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  auto events = future.get();
  CHECK(delivered_on != std::this_thread::get_id()); // the port's own thread, not open()'s caller
  REQUIRE(events.size() == 1);
  CHECK(events[0].what == rs::upstream_event::kind::failure);
  CHECK(events[0].http_status == 404);
  CHECK(events[0].text == "The model 'gamma' does not exist.");
  CHECK(f.a->models.empty());
  CHECK(f.b->models.empty());
}
