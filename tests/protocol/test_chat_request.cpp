// Validation of POST /v1/chat/completions bodies (AS-2, AS-9, AS-10).
#include "protocol/chat_request.hpp"
#include "protocol/json.hpp"

#include <catch2/catch.hpp>

using namespace troupe;
using namespace troupe::protocol;

namespace {

request_error rejected(std::string_view body) {
  auto r = parse_chat_request(body);
  REQUIRE(std::holds_alternative<request_error>(r));
  return std::get<request_error>(r);
}

chat_request accepted(std::string_view body) {
  auto r = parse_chat_request(body);
  if (auto err = std::get_if<request_error>(&r))
    FAIL(err->body);
  return std::get<chat_request>(r);
}

} // namespace

TEST_CASE("the query is the last user message with content and later messages are dropped", "[request]") {
  auto req = accepted(R"({"messages":[{"role":"system","content":"s"},{"role":"user","content":"first"},
    {"role":"assistant","content":"a"},{"role":"user","content":"second"},{"role":"user","content":""},
    {"role":"assistant","content":"late"}]})");
  CHECK(req.query == "second");
  REQUIRE(req.history.size() == 3);
  CHECK(req.history[2].content == "a");
  CHECK(req.stream);
}

TEST_CASE("text parts are joined with newlines", "[request]") { // AS-9
  auto req = accepted(R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]})");
  CHECK(req.query == "a\nb");
}

TEST_CASE("an empty message list is 400 No messages provided", "[request]") { // AS-10
  auto err = rejected(R"({"messages":[]})");
  CHECK(err.code == errc::bad_request);
  CHECK(err.body == R"({"detail":"No messages provided"})");
}

TEST_CASE("a request without a user message with content is 400", "[request]") { // AS-10
  auto err = rejected(R"({"messages":[{"role":"system","content":"x"},{"role":"user","content":""}]})");
  CHECK(err.code == errc::bad_request);
  CHECK(err.body == R"({"detail":"At least one user message with non-empty content is required"})");
}

TEST_CASE("out-of-range sampling values and wrong types are 422 with their location", "[request]") { // AS-2
  struct {
    const char* body;
    const char* field;
  } cases[] = {
    {R"({"messages":[{"role":"user","content":"q"}],"temperature":2.5})", "temperature"},
    {R"({"messages":[{"role":"user","content":"q"}],"temperature":-1})", "temperature"},
    {R"({"messages":[{"role":"user","content":"q"}],"top_p":1.5})", "top_p"},
    {R"({"messages":[{"role":"user","content":"q"}],"max_tokens":0})", "max_tokens"},
    {R"({"messages":[{"role":"user","content":"q"}],"max_tokens":1.5})", "max_tokens"},
    {R"({"messages":[{"role":"user","content":"q"}],"stream":"yes"})", "stream"},
    {R"({"messages":[{"role":"user","content":"q"}],"on_disconnect":"later"})", "on_disconnect"},
    {R"({"messages":"hello"})", "messages"},
  };
  for (auto& c : cases) {
    INFO(c.body);
    auto err = rejected(c.body);
    CHECK(err.code == errc::validation_failed);
    auto doc = json::parse(err.body);
    REQUIRE(doc);
    auto& loc = (*doc)["detail"][0]["loc"];
    CHECK(std::string(loc[1].GetString()) == c.field);
  }
}

TEST_CASE("malformed JSON is 422 before any 400", "[request]") { // AS-2, AS-8 order
  CHECK(rejected("{not json").code == errc::validation_failed);
  CHECK(rejected(R"({"messages":[],"temperature":9})").code == errc::validation_failed);
}

TEST_CASE("unknown fields are ignored and metadata is kept verbatim", "[request]") { // AS-2, AS-9
  auto req = accepted(R"({"messages":[{"role":"user","content":"q"}],"frobnicate":1,
    "metadata":{"run_id":"r1","tenant_key":"t","custom":{"x":[1,2]},"on_disconnect":"continue"},
    "session_id":"Keep-This Exact Id"})");
  CHECK(req.run_id == "r1");
  CHECK(req.tenant_key == "t");
  CHECK(req.session_id == "Keep-This Exact Id"); // AS-79
  CHECK(req.on_disconnect == std::optional<std::string>("continue"));
  auto meta = json::parse(req.metadata);
  REQUIRE(meta);
  CHECK((*meta)["custom"]["x"][1].GetInt() == 2);
}

TEST_CASE("a missing session id gets a fresh UUIDv4", "[request]") {
  auto req = accepted(R"({"messages":[{"role":"user","content":"q"}]})");
  CHECK(req.session_id.size() == 36);
  CHECK(req.session_id[14] == '4');
}

TEST_CASE("top-level tool_policy wins over metadata.tool_policy", "[request]") { // AS-9
  auto req = accepted(R"({"messages":[{"role":"user","content":"q"}],"tool_policy":{"mode":"none"},
    "metadata":{"tool_policy":{"mode":"allowlist"}}})");
  CHECK(req.tool_policy == R"({"mode":"none"})");
  auto fallback = accepted(R"({"messages":[{"role":"user","content":"q"}],"metadata":{"tool_policy":{"mode":"allowlist"}}})");
  CHECK(fallback.tool_policy == R"({"mode":"allowlist"})");
}

TEST_CASE("assistant tool calls in the history keep their ids, names and arguments", "[request]") {
  auto req = accepted(R"({"messages":[{"role":"user","content":"a"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"exec","arguments":"{\"command\":\"ls\"}"}}]},
    {"role":"tool","tool_call_id":"c1","content":"out"},{"role":"user","content":"b"}]})");
  REQUIRE(req.history.size() == 3);
  CHECK(req.history[1].content_null);
  REQUIRE(req.history[1].tool_calls.size() == 1);
  CHECK(req.history[1].tool_calls[0].arguments == R"({"command":"ls"})");
  CHECK(req.history[2].tool_call_id == "c1");
}
