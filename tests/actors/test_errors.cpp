// The one error model below the edge (issue "one shape"): a problem crosses actors whole inside a
// caf::error, and the actor system names troupe's errors when it renders them.
#include "actors/errors.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <optional>

using namespace troupe;

TEST_CASE("a problem sent as an error arrives with its code, message, param and kind", "[errors]") {
  caf::actor_system_config cfg;
  add_error_category(cfg);
  caf::actor_system sys{cfg};
  // Spawned with an argument: CAF 0.17 binds a null empty tuple to a function spawned without any.
  auto refuser = sys.spawn(
    [](errc code) -> caf::behavior {
      return {[code](int) -> caf::result<int> {
        return make_error(problem{code, "Previous response with id 'x' not found.", "previous_response_id",
                                  "previous_response_not_found"});
      }};
    },
    errc::bad_request);
  caf::scoped_actor self{sys};
  std::optional<problem> got;
  self->request(refuser, caf::infinite, 1).receive([](int) {}, [&](caf::error& err) { got = problem_of(err); });
  REQUIRE(got);
  CHECK(got->code == errc::bad_request);
  CHECK(got->message == "Previous response with id 'x' not found.");
  CHECK(got->param == "previous_response_id");
  CHECK(got->kind == "previous_response_not_found");
}

TEST_CASE("the actor system renders troupe's errors by their code's name and message", "[errors]") {
  caf::actor_system_config cfg;
  add_error_category(cfg);
  caf::actor_system sys{cfg};
  CHECK(sys.render(make_error(errc::not_found, "Run not found")) == "troupe: not_found (Run not found)");
}

TEST_CASE("an error from outside troupe reads as an internal problem", "[errors]") {
  auto p = problem_of(caf::make_error(caf::sec::request_timeout));
  CHECK(p.code == errc::internal);
  CHECK(code_of(caf::make_error(caf::sec::request_timeout)) == errc::internal);
}
