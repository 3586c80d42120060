// The error table and service-token checks (AS-2, AS-3, AS-7).
#include "protocol/auth.hpp"
#include "protocol/errors.hpp"

#include <catch2/catch.hpp>

using namespace troupe;
using namespace troupe::protocol;

TEST_CASE("each error code maps to one status and a body in each dialect", "[errors]") {
  CHECK(http_status(errc::unauthorized) == 401);
  CHECK(http_status(errc::payload_too_large) == 413);
  CHECK(http_status(errc::validation_failed) == 422);
  CHECK(error_body(dialect::agent, errc::not_found, "Run not found") == R"({"detail":"Run not found"})");
  CHECK(error_body(dialect::openai, errc::payload_too_large, "Request body too large")
        == R"({"error":{"message":"Request body too large","type":"invalid_request_error","param":null,"code":"payload_too_large"}})");
}

TEST_CASE("the Responses paths speak OpenAI's dialect and the rest the agent service's", "[errors]") {
  CHECK(dialect_for_path("/v1/responses/abc") == dialect::openai);
  CHECK(dialect_for_path("/v1/chat/completions") == dialect::agent);
}

TEST_CASE("422 bodies list locations with numeric indexes", "[errors]") {
  auto r = render_error(dialect::agent, invalid({{{"body", "messages", "0", "content"}, "bad", "string_type"}}));
  CHECK(r.status == 422);
  CHECK(r.body == R"({"detail":[{"loc":["body","messages",0,"content"],"msg":"bad","type":"string_type"}]})");
}

TEST_CASE("reflexr's dialect: a rejection, a plain detail, or WS-37's list", "[errors]") { // WS-26, WS-37, WS-61
  auto forbidden = render_error(dialect::reflexr, {errc::forbidden, "not yours", {}, "forbidden"});
  CHECK(forbidden.status == 403);
  CHECK(forbidden.body == R"({"detail":{"type":"forbidden","message":"not yours"}})");
  auto invalid = render_error(dialect::reflexr, {errc::validation_failed, "bad id", {}, "validation_failed"});
  CHECK(invalid.body == R"({"detail":{"type":"validation_failed","message":"bad id","errors":[]}})");
  auto listed = render_error(dialect::reflexr, {errc::validation_failed, {}, {}, "validation_failed", {{{"type"}, "x", "missing"}}});
  CHECK(listed.status == 422);
  CHECK(listed.body == R"({"detail":[{"type":"missing","loc":["type"],"msg":"x"}]})");
  auto plain = render_error(dialect::reflexr, {errc::unauthorized, "unauthorized"});
  CHECK(plain.status == 401);
  CHECK(plain.body == R"({"detail":"unauthorized"})");
  CHECK(render_error(dialect::reflexr, {errc::upgrade_required, "use a WebSocket"}).status == 426);
}

TEST_CASE("the token comes from a Bearer header, else X-FastReAct-Service-Token", "[auth]") { // AS-3
  CHECK(presented_token("Bearer abc", "") == "abc");
  CHECK(presented_token("bearer  abc ", "xyz") == "abc");
  CHECK(presented_token("", " xyz ") == "xyz");
  CHECK(presented_token("Basic abc", "") == "");
}

TEST_CASE("only a configured token is accepted, and an empty one never", "[auth]") { // AS-3, AS-89
  std::vector<std::string> tokens{"A", "B"};
  CHECK(token_accepted(tokens, "A"));
  CHECK(token_accepted(tokens, "B"));
  CHECK_FALSE(token_accepted(tokens, "AB"));
  CHECK_FALSE(token_accepted(tokens, ""));
  CHECK_FALSE(token_accepted({}, "A"));
}

TEST_CASE("the tenant is the user key's prefix before the first colon", "[auth]") { // AS-7
  CHECK(infer_tenant("pska:user_primary") == "pska");
  CHECK(infer_tenant("a:b:c") == "a");
  CHECK(infer_tenant("anonymous") == "");
}
