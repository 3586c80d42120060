// Unit tests of a model round read as one agent step (AS-18): the chat chunk reader's events folded
// into a reply, argument repair and minted call ids.
#include "protocol/round_reply.hpp"
#include "protocol/upstream_readers.hpp"

#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

using namespace troupe::protocol;
using responses::upstream_event;

namespace {

bool is_minted_id(const std::string& id) {
  return std::regex_match(id, std::regex("call_[0-9a-f]{12}"));
}

std::string chunk(const std::string& delta, const std::string& finish = "null") {
  return R"({"object":"chat.completion.chunk","model":"m1","choices":[{"index":0,"delta":)" + delta +
         R"(,"finish_reason":)" + finish + "}]}";
}

// Reads chat chunks as a streamed round and folds them into the agent's outcome.
model_outcome fold(const std::vector<std::string>& chunks) {
  responses::chat_chunk_reader reader;
  std::vector<upstream_event> events;
  for (auto& c : chunks)
    if (!reader.feed(c, events))
      break;
  reader.end(events);
  reply_assembler assembler;
  for (auto& e : events)
    assembler.feed(e);
  REQUIRE(assembler.ended());
  return assembler.outcome();
}

} // namespace

TEST_CASE("a round's content deltas and usage fold into one reply", "[round_reply]") {
  auto out = fold({chunk(R"({"content":"Hel"})"), chunk(R"({"content":"lo"})"),
                   R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}})"});
  REQUIRE(out.ok);
  CHECK(out.reply.content == "Hello");
  CHECK(out.reply.finish_reason == "stop");
  CHECK(out.reply.usage.prompt_tokens == 7);
  CHECK(out.reply.usage.completion_tokens == 2);
  CHECK(out.reply.usage.total_tokens == 9);
}

TEST_CASE("tool-call arguments streamed in pieces are assembled by index, repaired, and missing ids minted", "[round_reply]") { // AS-18
  auto out = fold({chunk(R"({"tool_calls":[{"index":0,"id":"call_a","function":{"name":"exec","arguments":"```json\n{\"cmd\":"}}]})"),
                   chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":" \"ls\",}\n```"}}]})"),
                   chunk(R"({"tool_calls":[{"index":1,"function":{"name":"read","arguments":"{}"}}]})"),
                   chunk("{}", R"("tool_calls")")});
  REQUIRE(out.ok);
  REQUIRE(out.reply.tool_calls.size() == 2);
  CHECK(out.reply.tool_calls[0].id == "call_a");
  CHECK(out.reply.tool_calls[0].arguments == R"({"cmd": "ls"})");
  CHECK(is_minted_id(out.reply.tool_calls[1].id));
  CHECK(out.reply.tool_calls[1].name == "read");
  CHECK(out.reply.finish_reason == "tool_calls");
}

TEST_CASE("tool-call pieces without an index continue the open call, and another id starts the next", "[round_reply]") {
  auto out = fold({chunk(R"({"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"x\""}}]})"),
                   chunk(R"({"tool_calls":[{"function":{"arguments":":1}"}}]})"),
                   chunk(R"({"tool_calls":[{"id":"b","function":{"name":"g","arguments":"{}"}}]})"),
                   chunk("{}", R"("tool_calls")")});
  REQUIRE(out.ok);
  REQUIRE(out.reply.tool_calls.size() == 2);
  CHECK(out.reply.tool_calls[0].arguments == R"({"x":1})");
  CHECK(out.reply.tool_calls[1].id == "b");
  CHECK(out.reply.tool_calls[1].name == "g");
}

TEST_CASE("a failed round keeps its message, status and whether it was transient", "[round_reply]") { // AS-53
  upstream_event e;
  e.what = upstream_event::kind::failure;
  e.text = "HTTP 503: busy";
  e.http_status = 503;
  e.retryable = true;
  reply_assembler assembler;
  CHECK_FALSE(assembler.feed(e));
  auto out = assembler.outcome();
  CHECK_FALSE(out.ok);
  CHECK(out.error == "HTTP 503: busy");
  CHECK(out.http_status == 503);
  CHECK(out.retryable);
}

TEST_CASE("a whole reply streams as the events that fold back into it", "[round_reply]") {
  model_reply reply;
  reply.content = "Looking.";
  reply.tool_calls = {{"call_1", "list_dir", R"({"path":"."})"}};
  reply.usage = {10, 5, 15};
  reply_assembler assembler;
  for (auto& e : reply_events(reply))
    assembler.feed(e);
  auto out = assembler.outcome();
  REQUIRE(out.ok);
  CHECK(out.reply.content == reply.content);
  REQUIRE(out.reply.tool_calls.size() == 1);
  CHECK(out.reply.tool_calls[0].id == "call_1");
  CHECK(out.reply.tool_calls[0].arguments == R"({"path":"."})");
  CHECK(out.reply.finish_reason == "tool_calls");
  CHECK(out.reply.usage.total_tokens == 15);
}

TEST_CASE("arguments that already form an object are kept verbatim", "[round_reply]") {
  // AS-18
  CHECK(repair_arguments(R"({"a": [1, 2]})") == R"({"a": [1, 2]})");
}

TEST_CASE("arguments wrapped in a code fence are unwrapped", "[round_reply]") {
  // AS-18
  CHECK(repair_arguments("```json\n{\"path\": \"a.txt\"}\n```") == R"({"path": "a.txt"})");
  CHECK(repair_arguments("```{\"x\":1}```") == R"({"x":1})");
}

TEST_CASE("trailing commas before a closing brace or bracket are dropped", "[round_reply]") {
  // AS-18
  CHECK(repair_arguments(R"({"a": [1, 2,], "b": "x,}",})") == R"({"a": [1, 2], "b": "x,}"})");
  CHECK(repair_arguments("```json\n{\"a\": 1,\n}\n```") == "{\"a\": 1\n}");
}

TEST_CASE("unrepairable or non-object arguments become an empty object", "[round_reply]") {
  // AS-18
  CHECK(repair_arguments("not json at all") == "{}");
  CHECK(repair_arguments("") == "{}");
  CHECK(repair_arguments("[1,2]") == "{}");
  CHECK(repair_arguments("{\"a\": ") == "{}");
}

TEST_CASE("minted tool call ids are call_ and 12 lowercase hex characters and differ", "[round_reply]") {
  // AS-18
  auto a = make_tool_call_id();
  auto b = make_tool_call_id();
  CHECK(is_minted_id(a));
  CHECK(is_minted_id(b));
  CHECK(a != b);
}
