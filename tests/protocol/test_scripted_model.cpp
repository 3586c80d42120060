// The built-in scripted model: deterministic turns, templates, named scripts.
#include "protocol/scripted_model.hpp"

#include <catch2/catch.hpp>

using namespace troupe::protocol;

namespace {

script demo() {
  auto s = parse_script(R"([{"content":"looking","tool_calls":[{"name":"list_dir","arguments":{"path":"."}}]},
                            {"content":"you asked {{query}}; saw {{last_tool_result}}"}])");
  REQUIRE(std::holds_alternative<script>(s));
  return std::get<script>(s);
}

} // namespace

TEST_CASE("the first step plays the first turn with a deterministic call id", "[scripted]") {
  model_request req;
  req.model = "scripted";
  req.messages = {text_message("system", "s"), text_message("user", "hi")};
  auto reply = scripted_reply(demo(), req);
  CHECK(reply.content == "looking");
  REQUIRE(reply.tool_calls.size() == 1);
  CHECK(reply.tool_calls[0].name == "list_dir");
  CHECK(reply.tool_calls[0].arguments == R"({"path":"."})");
  CHECK(reply.tool_calls[0].id == scripted_reply(demo(), req).tool_calls[0].id);
  CHECK(reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens);
}

TEST_CASE("each assistant message after the query advances one turn and templates are filled", "[scripted]") {
  model_request req;
  auto assistant = text_message("assistant", "looking");
  auto tool = text_message("tool", "a.txt");
  req.messages = {text_message("user", "what?"), assistant, tool};
  CHECK(scripted_reply(demo(), req).content == "you asked what?; saw a.txt");
  req.messages.push_back(text_message("assistant", "x"));
  CHECK(scripted_reply(demo(), req).content == "you asked what?; saw a.txt"); // the last turn repeats
}

TEST_CASE("script errors name the turn and the field", "[scripted]") {
  auto bad = parse_script(R"([{"content":"ok"},{"tool_calls":[{"arguments":{}}]}])");
  REQUIRE(std::holds_alternative<std::string>(bad));
  CHECK(std::get<std::string>(bad) == "[1].tool_calls[0].name: expected the tool's name");
  auto book = script_book::parse("[]", "{}");
  REQUIRE(std::holds_alternative<std::string>(book));
  CHECK(std::get<std::string>(book) == "model.script: expected at least one turn");
}

TEST_CASE("model scripted:<name> picks a named script and unknown names are reported", "[scripted]") {
  auto book = script_book::parse(R"([{"content":"default"}])", R"({"slow":[{"content":"named","delay_ms":5}]})");
  REQUIRE(std::holds_alternative<script_book>(book));
  auto& b = std::get<script_book>(book);
  CHECK(b.find("scripted")->front().content == "default");
  CHECK(b.find("anything-else")->front().content == "default");
  CHECK(b.find("scripted:slow")->front().delay_ms == 5);
  CHECK(b.find("scripted:missing") == nullptr);
}
