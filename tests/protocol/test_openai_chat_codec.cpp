// Unit tests of the chat-completions codec: request bodies, replies, streamed chunks, argument repair.
#include "protocol/openai_chat_codec.hpp"
#include "protocol/json.hpp"

#include <catch2/catch.hpp>

#include <regex>
#include <string>

namespace json = troupe::protocol::json;
using namespace troupe::protocol;

namespace {

json::document parsed(const std::string& text) {
  auto doc = json::parse(text);
  REQUIRE(doc);
  return std::move(*doc);
}

chat_message message(std::string role, std::string content) {
  chat_message m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

bool is_minted_id(const std::string& id) {
  return std::regex_match(id, std::regex("call_[0-9a-f]{12}"));
}

std::string chunk(const std::string& delta, const std::string& tail = "") {
  return R"({"object":"chat.completion.chunk","model":"m1","choices":[{"index":0,"delta":)" + delta +
         R"(,"finish_reason":null}])" + tail + "}";
}

} // namespace

TEST_CASE("a request body carries model, messages, sampling values and stream options", "[openai]") {
  // AS-17
  model_request request;
  request.model = "gpt-test";
  request.temperature = 0.5;
  request.max_tokens = 256;
  request.messages.push_back(message("system", "be brief"));
  request.messages.push_back(message("user", "hi"));
  auto doc = parsed(encode_chat_request(request));
  CHECK(json::get_string(doc, "model") == "gpt-test");
  CHECK(json::get_number(doc, "temperature") == 0.5);
  CHECK_FALSE(json::member(doc, "top_p"));
  CHECK(json::get_int(doc, "max_tokens") == 256);
  CHECK(json::get_bool(doc, "stream") == true);
  CHECK(json::get_bool(doc["stream_options"], "include_usage") == true);
  REQUIRE(doc["messages"].Size() == 2);
  CHECK(json::get_string(doc["messages"][1], "role") == "user");
  CHECK(json::get_string(doc["messages"][1], "content") == "hi");
  CHECK_FALSE(json::member(doc, "tools"));
  CHECK_FALSE(json::member(doc, "tool_choice"));
}

TEST_CASE("a non-streamed request has stream false and no stream options", "[openai]") {
  model_request request;
  request.model = "m";
  request.stream = false;
  auto doc = parsed(encode_chat_request(request));
  CHECK(json::get_bool(doc, "stream") == false);
  CHECK_FALSE(json::member(doc, "stream_options"));
}

TEST_CASE("visible tools are sent as functions with object parameters and tool_choice auto", "[openai]") {
  // AS-17
  model_request request;
  request.model = "m";
  request.tools.push_back({"read_file", "Read a file", R"({"type":"object","properties":{"path":{"type":"string"}}})"});
  request.tools.push_back({"broken", "bad schema", "not json"});
  auto doc = parsed(encode_chat_request(request));
  REQUIRE(doc["tools"].Size() == 2);
  const auto& tool = doc["tools"][0];
  CHECK(json::get_string(tool, "type") == "function");
  CHECK(json::get_string(tool["function"], "name") == "read_file");
  CHECK(json::get_string(tool["function"], "description") == "Read a file");
  REQUIRE(tool["function"]["parameters"].IsObject());
  CHECK(tool["function"]["parameters"]["properties"].HasMember("path"));
  CHECK(doc["tools"][1]["function"]["parameters"].IsObject()); // an invalid schema degrades
  CHECK(json::get_string(doc, "tool_choice") == "auto");
}

TEST_CASE("assistant tool calls and tool results are encoded in the chat format", "[openai]") {
  // AS-19: the assistant message with the executed arguments, then one tool message per call.
  model_request request;
  auto assistant = message("assistant", "");
  assistant.content_null = true;
  assistant.tool_calls.push_back({"call_1", "exec", R"({"command":"ls"})"});
  auto result = message("tool", "a.txt");
  result.tool_call_id = "call_1";
  result.name = "exec";
  request.messages = {assistant, result};
  auto doc = parsed(encode_chat_request(request));
  const auto& a = doc["messages"][0];
  CHECK(a["content"].IsNull());
  const auto& call = a["tool_calls"][0];
  CHECK(json::get_string(call, "id") == "call_1");
  CHECK(json::get_string(call, "type") == "function");
  CHECK(json::get_string(call["function"], "name") == "exec");
  CHECK(json::get_string(call["function"], "arguments") == R"({"command":"ls"})");
  const auto& t = doc["messages"][1];
  CHECK(json::get_string(t, "role") == "tool");
  CHECK(json::get_string(t, "tool_call_id") == "call_1");
  CHECK(json::get_string(t, "name") == "exec");
  CHECK(json::get_string(t, "content") == "a.txt");
}

TEST_CASE("a non-streamed reply decodes content, tool calls, usage, model and finish reason", "[openai]") {
  auto result = decode_chat_response(R"({
    "id":"x","object":"chat.completion","model":"m2",
    "choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
      "tool_calls":[{"id":"call_a","type":"function","function":{"name":"exec","arguments":"{\"command\":\"ls\"}"}},
                    {"type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a\",}"}}]}}],
    "usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}})");
  REQUIRE(result.ok);
  const auto& reply = result.reply;
  CHECK(reply.content.empty());
  CHECK(reply.model == "m2");
  CHECK(reply.finish_reason == "tool_calls");
  CHECK(reply.usage.prompt_tokens == 10);
  CHECK(reply.usage.completion_tokens == 5);
  CHECK(reply.usage.total_tokens == 15);
  REQUIRE(reply.tool_calls.size() == 2);
  CHECK(reply.tool_calls[0].id == "call_a");
  CHECK(reply.tool_calls[0].arguments == R"({"command":"ls"})");
  CHECK(is_minted_id(reply.tool_calls[1].id)); // AS-18
  CHECK(reply.tool_calls[1].arguments == R"({"path":"a"})"); // AS-18
}

TEST_CASE("an error body or a body without choices decodes to an error", "[openai]") {
  auto err = decode_chat_response(R"({"error":{"message":"model not found","type":"invalid"}})");
  CHECK_FALSE(err.ok);
  CHECK(err.error.find("model not found") != std::string::npos);
  CHECK_FALSE(decode_chat_response(R"({"choices":[]})").ok);
  CHECK_FALSE(decode_chat_response("not json").ok);
}

TEST_CASE("streamed content deltas are concatenated and usage comes from the last chunk", "[openai]") {
  chat_stream_assembler assembler;
  REQUIRE(assembler.feed(chunk(R"({"role":"assistant","content":""})")));
  REQUIRE(assembler.feed(chunk(R"({"content":"Hel"})")));
  REQUIRE(assembler.feed(chunk(R"({"content":"lo"})")));
  REQUIRE(assembler.feed(R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})"));
  REQUIRE(assembler.feed(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}})"));
  CHECK_FALSE(assembler.done());
  REQUIRE(assembler.feed("[DONE]"));
  CHECK(assembler.done());
  auto reply = assembler.finish();
  CHECK(reply.content == "Hello");
  CHECK(reply.model == "m1");
  CHECK(reply.finish_reason == "stop");
  CHECK(reply.usage.total_tokens == 5);
  CHECK(reply.tool_calls.empty());
}

TEST_CASE("tool-call arguments streamed in pieces are assembled by index", "[openai]") {
  chat_stream_assembler assembler;
  REQUIRE(assembler.feed(chunk(
    R"({"tool_calls":[{"index":0,"id":"call_x","type":"function","function":{"name":"exec","arguments":"{\"co"}}]})")));
  REQUIRE(assembler.feed(chunk(
    R"({"tool_calls":[{"index":1,"type":"function","function":{"name":"read_file","arguments":""}}]})")));
  REQUIRE(assembler.feed(chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":"mmand\":"}}]})")));
  REQUIRE(assembler.feed(chunk(R"({"tool_calls":[{"index":1,"function":{"arguments":"{\"path\":\"a\"}"}}]})")));
  REQUIRE(assembler.feed(chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":"\"ls\"}"}}]})")));
  auto reply = assembler.finish();
  REQUIRE(reply.tool_calls.size() == 2);
  CHECK(reply.tool_calls[0].id == "call_x");
  CHECK(reply.tool_calls[0].name == "exec");
  CHECK(reply.tool_calls[0].arguments == R"({"command":"ls"})");
  CHECK(is_minted_id(reply.tool_calls[1].id)); // AS-18
  CHECK(reply.tool_calls[1].name == "read_file");
  CHECK(reply.tool_calls[1].arguments == R"({"path":"a"})");
}

TEST_CASE("tool-call pieces without an index continue the call of the last id", "[openai]") {
  chat_stream_assembler assembler;
  REQUIRE(assembler.feed(chunk(R"({"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"x\""}}]})")));
  REQUIRE(assembler.feed(chunk(R"({"tool_calls":[{"function":{"arguments":":1}"}}]})")));
  REQUIRE(assembler.feed(chunk(R"({"tool_calls":[{"id":"b","function":{"name":"g","arguments":"{}"}}]})")));
  auto reply = assembler.finish();
  REQUIRE(reply.tool_calls.size() == 2);
  CHECK(reply.tool_calls[0].arguments == R"({"x":1})");
  CHECK(reply.tool_calls[1].name == "g");
}

TEST_CASE("an error object in the stream is reported", "[openai]") {
  chat_stream_assembler assembler;
  CHECK_FALSE(assembler.feed(R"({"error":{"message":"overloaded"}})"));
  CHECK(assembler.error().find("overloaded") != std::string::npos);
  CHECK_FALSE(assembler.feed("{not json"));
}

TEST_CASE("arguments that already form an object are kept verbatim", "[openai]") {
  // AS-18
  CHECK(repair_arguments(R"({"a": [1, 2]})") == R"({"a": [1, 2]})");
}

TEST_CASE("arguments wrapped in a code fence are unwrapped", "[openai]") {
  // AS-18
  CHECK(repair_arguments("```json\n{\"path\": \"a.txt\"}\n```") == R"({"path": "a.txt"})");
  CHECK(repair_arguments("```{\"x\":1}```") == R"({"x":1})");
}

TEST_CASE("trailing commas before a closing brace or bracket are dropped", "[openai]") {
  // AS-18
  CHECK(repair_arguments(R"({"a": [1, 2,], "b": "x,}",})") == R"({"a": [1, 2], "b": "x,}"})");
  CHECK(repair_arguments("```json\n{\"a\": 1,\n}\n```") == "{\"a\": 1\n}");
}

TEST_CASE("unrepairable or non-object arguments become an empty object", "[openai]") {
  // AS-18
  CHECK(repair_arguments("not json at all") == "{}");
  CHECK(repair_arguments("") == "{}");
  CHECK(repair_arguments("[1,2]") == "{}");
  CHECK(repair_arguments("{\"a\": ") == "{}");
}

TEST_CASE("minted tool call ids are call_ and 12 lowercase hex characters and differ", "[openai]") {
  // AS-18
  auto a = make_tool_call_id();
  auto b = make_tool_call_id();
  CHECK(is_minted_id(a));
  CHECK(is_minted_id(b));
  CHECK(a != b);
}
