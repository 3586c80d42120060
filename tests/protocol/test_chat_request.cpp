// Validation of POST /v1/chat/completions bodies (AS-2, AS-9, AS-10).
#include "protocol/chat_request.hpp"
#include "protocol/json.hpp"

#include <catch2/catch.hpp>

using namespace troupe;
using namespace troupe::protocol;

namespace {

// The body the edge sends for `err`.
std::string body_of(const request_error& err) {
  return render_error(dialect::agent, err.what).body;
}

request_error rejected(std::string_view body) {
  auto r = parse_chat_request(body);
  REQUIRE(std::holds_alternative<request_error>(r));
  return std::get<request_error>(r);
}

chat_request accepted(std::string_view body) {
  auto r = parse_chat_request(body);
  if (auto err = std::get_if<request_error>(&r))
    FAIL(body_of(*err));
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
  CHECK(err.what.code == errc::bad_request);
  CHECK(body_of(err) == R"({"detail":"No messages provided"})");
}

TEST_CASE("a request without a user message with content is 400", "[request]") { // AS-10
  auto err = rejected(R"({"messages":[{"role":"system","content":"x"},{"role":"user","content":""}]})");
  CHECK(err.what.code == errc::bad_request);
  CHECK(body_of(err) == R"({"detail":"At least one user message with non-empty content is required"})");
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
    CHECK(err.what.code == errc::validation_failed);
    auto doc = json::parse(body_of(err));
    REQUIRE(doc);
    auto& loc = (*doc)["detail"][0]["loc"];
    CHECK(std::string(loc[1].GetString()) == c.field);
  }
}

TEST_CASE("malformed JSON is 422 before any 400", "[request]") { // AS-2, AS-8 order
  CHECK(rejected("{not json").what.code == errc::validation_failed);
  CHECK(rejected(R"({"messages":[],"temperature":9})").what.code == errc::validation_failed);
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

TEST_CASE("a body nested 100,000 deep is a 400 naming the limit, not a crash", "[request][hostile]") { // issue 15 #1
  std::string body = R"({"messages":[{"role":"user","content":"hi"}],"metadata":{"x":)" + std::string(100'000, '[')
                     + std::string(100'000, ']') + "}}";
  auto err = rejected(body);
  CHECK(err.what.code == errc::bad_request);
  CHECK(body_of(err).find("deeper than 64 levels") != std::string::npos);
}

TEST_CASE("a repeated member name is a 422 naming the member", "[request][hostile]") { // issue 15 #14
  auto err = rejected(R"({"messages":[{"role":"user","content":"hi"}],"metadata":{"severity":"x","severity":1}})");
  CHECK(err.what.code == errc::validation_failed);
  CHECK(body_of(err).find(R"("loc":["body","metadata","severity"])") != std::string::npos);
}

TEST_CASE("invalid UTF-8 in a body is a 400", "[request][hostile]") { // issue 15 #14
  auto err = rejected("{\"messages\":[{\"role\":\"user\",\"content\":\"\xed\xa0\x80\"}]}");
  CHECK(err.what.code == errc::bad_request);
  CHECK(body_of(err).find("UTF-8") != std::string::npos);
}

TEST_CASE("session_id and metadata.run_id with a line break or NUL are 422s naming the field", "[request][hostile]") { // issue 15 #5
  auto session = rejected(R"({"messages":[{"role":"user","content":"hi"}],"session_id":"a\r\nX-Injected: 1"})");
  CHECK(session.what.code == errc::validation_failed);
  CHECK(body_of(session).find(R"("loc":["body","session_id"])") != std::string::npos);
  CHECK(body_of(session).find("printable ASCII") != std::string::npos);
  auto run = rejected(R"({"messages":[{"role":"user","content":"hi"}],"metadata":{"run_id":"r\u0000"}})");
  CHECK(body_of(run).find(R"("loc":["body","metadata","run_id"])") != std::string::npos);
  auto user = rejected(R"({"messages":[{"role":"user","content":"hi"}],"user_key":"alice\nbob"})");
  CHECK(body_of(user).find(R"("loc":["body","user_key"])") != std::string::npos);
  CHECK(rejected(R"({"messages":[{"role":"user","content":"hi"}],"metadata":{"run_id":"../runs/x"}})").what.code
        == errc::validation_failed);
  auto fine = accepted(R"({"messages":[{"role":"user","content":"hi"}],"session_id":"pska:s-1.2@x y","metadata":{"run_id":"run_01J"}})");
  CHECK(fine.session_id == "pska:s-1.2@x y");
  CHECK(fine.run_id == "run_01J");
}

TEST_CASE("a 400 still names the body's user, for the 403 and 429 that precede it", "[request][hostile]") { // AS-2, AS-8, issue 15 #10
  auto err = rejected(R"({"messages":[],"user_key":"blocked:user","metadata":{"tenant_key":"acme"}})");
  CHECK(err.what.code == errc::bad_request);
  CHECK(err.user_key == "blocked:user");
  CHECK(err.tenant_key == "acme");
}

TEST_CASE("more than max_messages messages are a 422 before any is read", "[request][hostile]") { // issue 15 #3
  std::string body = R"({"messages":[)";
  for (std::size_t i = 0; i <= max_messages; ++i)
    body += R"({"role":"user","content":"x"},)";
  body.back() = ']';
  body += '}';
  auto err = rejected(body);
  CHECK(err.what.code == errc::validation_failed);
  CHECK(body_of(err).find("at most 4096 items") != std::string::npos);
}

TEST_CASE("a background run's metadata.priority is an integer from -100 to 100, 0 when absent or null, and any "
          "other value is a 422 naming it and the range (CJ-18)",
          "[request][runs]") {
  auto priority_of = [](std::string_view metadata) {
    auto body = std::string(R"({"messages":[{"role":"user","content":"q"}],"metadata":)") + std::string(metadata) + "}";
    auto r = parse_chat_request(body, request_kind::background_run);
    if (auto err = std::get_if<request_error>(&r))
      FAIL(body_of(*err));
    return std::get<chat_request>(r).priority;
  };
  CHECK(priority_of(R"({"priority":100})") == 100);
  CHECK(priority_of(R"({"priority":-100})") == -100);
  CHECK(priority_of(R"({"priority":7})") == 7);
  CHECK(priority_of(R"({"priority":null})") == 0);
  CHECK(priority_of(R"({"other":1})") == 0);

  struct {
    const char* priority;
    const char* type;
  } refused[] = {
    {"101", "less_than_equal"},   {"-101", "greater_than_equal"}, {"9223372036854775807", "less_than_equal"},
    {"1.5", "int_type"},          {"5.0", "int_type"},            {R"("5")", "int_type"},
    {"true", "int_type"},         {"[1]", "int_type"},            {"18446744073709551616", "int_type"},
  };
  for (auto& c : refused) {
    INFO(c.priority);
    auto body = std::string(R"({"messages":[],"metadata":{"priority":)") + c.priority + "}}";
    auto r = parse_chat_request(body, request_kind::background_run);
    REQUIRE(std::holds_alternative<request_error>(r));
    auto& err = std::get<request_error>(r);
    CHECK(err.what.code == errc::validation_failed); // before the 400 for the empty message list
    CHECK(body_of(err) == std::string(R"({"detail":[{"loc":["body","metadata","priority"],)")
                            + R"("msg":"Input should be an integer from -100 to 100","type":")" + c.type + R"("}]})");
  }
}

TEST_CASE("a chat completion's metadata.priority is the caller's own business: kept verbatim, never validated "
          "(CJ-18)",
          "[request][runs]") {
  auto req = accepted(R"({"messages":[{"role":"user","content":"q"}],"metadata":{"priority":"high"}})");
  CHECK(req.priority == 0);
  CHECK(req.metadata == R"({"priority":"high"})");
}

TEST_CASE("AS-25 skills: absent or null auto-selects, a list names them, anything else is a 422 naming it",
          "[request]") {
  auto base = std::string(R"({"messages":[{"role":"user","content":"q"}])");
  CHECK_FALSE(accepted(base + "}").skills);
  CHECK_FALSE(accepted(base + R"(,"skills":null})").skills);
  CHECK(accepted(base + R"(,"skills":[]})").skills == std::optional<std::vector<std::string>>(std::vector<std::string>{}));
  CHECK(accepted(base + R"(,"skills":["a","b"]})").skills
        == std::optional<std::vector<std::string>>(std::vector<std::string>{"a", "b"}));
  CHECK(body_of(rejected(base + R"(,"skills":"a"})"))
        == R"({"detail":[{"loc":["body","skills"],"msg":"Input should be a valid list","type":"list_type"}]})");
  CHECK(body_of(rejected(base + R"(,"skills":["a",3]})")).find(R"("loc":["body","skills",1])") != std::string::npos);
  CHECK(body_of(rejected(base + R"(,"skills":[""]})"))
        == R"({"detail":[{"loc":["body","skills",0],"msg":"String should have at least 1 character",)"
           R"("type":"string_too_short"}]})");
  std::string many = base + R"(,"skills":[)";
  for (int i = 0; i < 65; ++i)
    many += std::string(i ? "," : "") + "\"s" + std::to_string(i) + "\"";
  CHECK(body_of(rejected(many + "]}")).find("at most 64 items") != std::string::npos);
}

TEST_CASE("AS-23 metadata.max_context_tokens is a positive integer, named when it is not", "[request]") {
  auto with = [](std::string v) {
    return R"({"messages":[{"role":"user","content":"q"}],"metadata":{"max_context_tokens":)" + v + "}}";
  };
  CHECK(accepted(with("3000")).max_context_tokens == std::optional<int64_t>(3000));
  CHECK_FALSE(accepted(with("null")).max_context_tokens);
  CHECK(body_of(rejected(with("0"))).find(R"("loc":["body","metadata","max_context_tokens"])") != std::string::npos);
  CHECK(body_of(rejected(with(R"("big")"))).find(R"("loc":["body","metadata","max_context_tokens"])")
        != std::string::npos);
}
