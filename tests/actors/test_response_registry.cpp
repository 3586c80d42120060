// The Responses registry against a fake model and an in-memory store: background responses beyond
// the active cap wait queued (RS-55) and one cancelled there still logs response.in_progress (RS-37.2),
// a conversation holds one live response (RS-54), a foreground response whose client left is cancelled
// with its model round (RS-42), and tool_choice "none" keeps the tools upstream (RS-14).
#include "actors/errors.hpp"
#include "actors/response_registry.hpp"
#include "fake_ports.hpp"
#include "fake_response_store.hpp"
#include "protocol/json.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

using namespace troupe;
using troupe::testing::fake_model;
namespace rs = troupe::protocol::responses;

namespace {

struct fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::shared_ptr<fake_model> model = std::make_shared<fake_model>(); // rounds hang unless told otherwise
  response_store_actor store = sys.spawn(testing::fake_response_store, std::string("fake response store"));
  response_registry_actor registry;
  response_owner owner{""};

  explicit fixture(std::size_t max_active_background = 8) {
    auto env = std::make_shared<response_environment>();
    env->model = model;
    env->store = store;
    response_registry_options options;
    options.max_active_background = max_active_background;
    registry = spawn_response_registry(sys, env, options);
  }

  ~fixture() {
    self->send_exit(registry, caf::exit_reason::user_shutdown);
    self->send_exit(store, caf::exit_reason::user_shutdown);
  }

  static response_job job(const std::string& id, const std::string& body) {
    auto parsed = rs::parse_request(body);
    if (auto err = std::get_if<problem>(&parsed))
      FAIL("the test's request is invalid: " << err->message);
    response_job j;
    j.req = std::get<rs::request>(std::move(parsed));
    j.input = j.req.input;
    j.id = id;
    j.created_at = 1700000000;
    return j;
  }

  // The answer to a create, or the problem it was refused with.
  std::variant<response_answer, problem> create(response_job j) {
    std::variant<response_answer, problem> out = problem{errc::internal, "no answer"};
    sink_opener no_stream = [] { return std::shared_ptr<event_sink>(); };
    self->request(registry, std::chrono::seconds(10), create_response_atom::value, std::move(j), no_stream)
      .receive([&](response_answer& a) { out = std::move(a); }, [&](caf::error& err) { out = problem_of(err); });
    return out;
  }

  static std::string status_of(const std::string& object) {
    auto doc = protocol::json::parse(object);
    if (!doc)
      FAIL("not JSON: " << object);
    return protocol::json::get_string(*doc, "status", "<absent>");
  }

  std::string created_status(response_job j) {
    auto a = create(std::move(j));
    if (auto p = std::get_if<problem>(&a))
      FAIL("the create was refused: " << p->message);
    return status_of(std::get<response_answer>(a).end.snapshot);
  }

  std::string cancel(const std::string& id) {
    std::string object;
    self->request(registry, std::chrono::seconds(10), cancel_atom::value, id, owner)
      .receive([&](std::string& o) { object = std::move(o); },
               [&](caf::error& err) { FAIL("cancel refused: " << message_of(err)); });
    return status_of(object);
  }

  // The types of a background response's stored events, in order.
  std::vector<std::string> stored_event_types(const std::string& id) {
    std::vector<std::string> types;
    self->request(store, std::chrono::seconds(10), response_events_atom::value, id, int64_t{-1})
      .receive(
        [&](std::vector<response_event>& events) {
          for (auto& e : events)
            if (auto doc = protocol::json::parse(e.json))
              types.push_back(protocol::json::get_string(*doc, "type"));
        },
        [&](caf::error& err) { FAIL(message_of(err)); });
    return types;
  }

  std::string stored_status(const std::string& id) {
    std::string status;
    self->request(store, std::chrono::seconds(10), get_response_atom::value, id, owner)
      .receive([&](response_row& r) { status = rs::to_string(r.status); }, [&](caf::error& err) { status = message_of(err); });
    return status;
  }
};

const char* background = R"({"model":"m","input":"hi","background":true})";

// With one active slot: resp_a runs its round, resp_b is answered queued.
void queue_behind_one(fixture& f) {
  CHECK(f.created_status(fixture::job("resp_a", background)) != "failed");
  REQUIRE(f.model->wait_for_requests(1));
  CHECK(f.created_status(fixture::job("resp_b", background)) == "queued");
}

} // namespace

TEST_CASE("a background response beyond the active cap waits queued and starts when a slot frees (RS-55)",
          "[response_registry]") {
  fixture f(1);
  queue_behind_one(f);
  CHECK(f.stored_status("resp_b") == "queued");
  CHECK(f.model->requests().size() == 1); // b's answer came after the registry queued it: no round of its own

  CHECK(f.cancel("resp_a") == "cancelled");
  REQUIRE(f.model->wait_for_requests(2)); // the freed slot goes to b
  CHECK(f.cancel("resp_b") == "cancelled");
  CHECK(f.model->cancels() == 2);
}

TEST_CASE("a conversation holds one live response: another is refused until it ends (RS-54)",
          "[response_registry]") {
  fixture f;
  conversation_row conv;
  conv.id = "conv_1";
  conv.created_at = 1700000000;
  f.self->request(f.store, std::chrono::seconds(10), create_conversation_atom::value, conv, std::vector<stored_item>{})
    .receive([](conversation_row&) {}, [](caf::error& err) { FAIL(message_of(err)); });
  const char* in_conversation = R"({"model":"m","input":"hi","background":true,"conversation":"conv_1"})";

  CHECK(f.created_status(fixture::job("resp_a", in_conversation)) != "failed");
  REQUIRE(f.model->wait_for_requests(1));
  auto refused = f.create(fixture::job("resp_b", in_conversation));
  REQUIRE(std::holds_alternative<problem>(refused));
  CHECK(std::get<problem>(refused).code == errc::conflict);
  CHECK(f.model->requests().size() == 1);

  CHECK(f.cancel("resp_a") == "cancelled");
  CHECK(f.created_status(fixture::job("resp_c", in_conversation)) != "failed");
  REQUIRE(f.model->wait_for_requests(2));
  CHECK(f.cancel("resp_c") == "cancelled");
}

TEST_CASE("a foreground response whose client went away is cancelled with its model round (RS-42)",
          "[response_registry]") {
  fixture f;
  sink_opener no_stream = [] { return std::shared_ptr<event_sink>(); };
  auto pending = f.self->request(f.registry, std::chrono::seconds(10), create_response_atom::value,
                                 fixture::job("resp_fg", R"({"model":"m","input":"hi"})"), no_stream);
  REQUIRE(f.model->wait_for_requests(1));
  f.self->send(f.registry, disconnect_atom::value, std::string("resp_fg"));
  bool answered = false; // by the registry, not by the request's own timeout
  pending.receive([&](response_answer&) { answered = true; },
                  [&](caf::error& err) { answered = err != caf::sec::request_timeout; });
  CHECK(answered);
  CHECK(f.model->cancels() == 1);
}

TEST_CASE("RS-37.2 a background response cancelled while queued logs created, queued, in_progress, then its "
          "cancelled terminal event",
          "[response_registry]") {
  fixture f(1);
  queue_behind_one(f);
  CHECK(f.cancel("resp_b") == "cancelled");
  CHECK(f.stored_event_types("resp_b")
        == std::vector<std::string>{"response.created", "response.queued", "response.in_progress",
                                    "response.incomplete"});
  CHECK(f.model->requests().size() == 1); // b never ran a round
  CHECK(f.cancel("resp_a") == "cancelled");
}

TEST_CASE("RS-14 tool_choice none keeps the request's tools in every round sent upstream", "[response_registry]") {
  fixture f;
  f.model->push(fake_model::text("fine"));
  auto a = f.create(fixture::job(
    "resp_n", R"({"model":"m","input":"hi","tool_choice":"none","tools":[{"type":"function","name":"f"}]})"));
  REQUIRE(std::holds_alternative<response_answer>(a));
  CHECK(fixture::status_of(std::get<response_answer>(a).end.snapshot) == "completed");
  REQUIRE(f.model->requests().size() == 1);
  REQUIRE(f.model->requests()[0].tools.size() == 1);
  CHECK(f.model->requests()[0].tools[0].name == "f");
}
