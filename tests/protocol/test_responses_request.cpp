// Unit tests of the Responses dialect's requests (responses.md §2, RS-2), the pairing and approval
// checks over history (RS-28, RS-33), and the rendering of history for either upstream (§8, §9).
#include "protocol/json.hpp"
#include "protocol/responses_request.hpp"

#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

namespace json = troupe::protocol::json;
using namespace troupe::protocol::responses;
using troupe::problem;
using troupe::protocol::dialect;
using troupe::protocol::http_status;
using troupe::protocol::render_error;

namespace {

json::document parse_doc(const std::string& text) {
  auto doc = json::parse(text);
  REQUIRE(doc);
  return std::move(*doc);
}

request accepted(const std::string& body) {
  auto out = parse_request(body);
  if (auto e = std::get_if<problem>(&out))
    FAIL("rejected: " << e->message);
  return std::get<request>(out);
}

problem rejected(const std::string& body) {
  auto out = parse_request(body);
  REQUIRE(std::holds_alternative<problem>(out));
  return std::get<problem>(out);
}

// A body with `field` set to the JSON text `value` next to a valid model and input.
std::string with(const std::string& field, const std::string& value) {
  return R"({"model":"m","input":"hi",")" + field + "\":" + value + "}";
}

item message(const std::string& role, const std::string& text, const std::string& id = "") {
  item it;
  it.type = item_kind::message;
  it.id = id.empty() ? mint_item_id(item_kind::message) : id;
  it.role = role;
  it.status = "completed";
  it.content.push_back({role == "assistant" ? part_kind::output_text : part_kind::input_text, text, {}, "auto"});
  return it;
}

item function_call(const std::string& call_id, const std::string& name = "f", const std::string& arguments = "{}") {
  item it;
  it.type = item_kind::function_call;
  it.id = mint_item_id(item_kind::function_call);
  it.call_id = call_id;
  it.name = name;
  it.arguments = arguments;
  it.status = "completed";
  return it;
}

item function_output(const std::string& call_id, const std::string& text) {
  item it;
  it.type = item_kind::function_call_output;
  it.id = mint_item_id(item_kind::function_call_output);
  it.call_id = call_id;
  it.output = json::quote(text);
  it.status = "completed";
  return it;
}

item approval_request(const std::string& id, const std::string& label = "srv", const std::string& tool = "rm") {
  item it;
  it.type = item_kind::mcp_approval_request;
  it.id = id;
  it.server_label = label;
  it.name = tool;
  it.arguments = "{\"path\":\"/x\"}";
  return it;
}

item approval_response(const std::string& request_id, bool approve, const std::string& reason = "") {
  item it;
  it.type = item_kind::mcp_approval_response;
  it.id = mint_item_id(item_kind::mcp_approval_response);
  it.approval_request_id = request_id;
  it.approve = approve;
  it.reason = reason;
  return it;
}

mcp_declaration declared(const std::string& label) {
  mcp_declaration d;
  d.server_label = label;
  return d;
}

// The text a function_call_output gives the model.
std::string output_text(const item& it) {
  auto doc = parse_doc(it.output);
  REQUIRE(doc.IsString());
  return doc.GetString();
}

} // namespace

// ---- 9. validation (RS-2) ----

TEST_CASE("a request without model names the missing parameter", "[responses]") { // RS-2
  auto e = rejected(R"({"input":"hi"})");
  CHECK(http_status(e.code) == 400);
  CHECK(e.kind == "missing_required_parameter");
  CHECK(e.param == "model");
  CHECK(e.message == "Missing required parameter: 'model'.");
  CHECK(render_error(dialect::openai, e).body
        == R"({"error":{"message":"Missing required parameter: 'model'.","type":"invalid_request_error","param":"model","code":"missing_required_parameter"}})");
}

TEST_CASE("max_tool_calls must be an integer of at least 1", "[responses]") { // RS-2
  struct bad_case {
    const char* value;
    const char* code;
    const char* message;
  };
  for (auto c : {
         bad_case{"0", "integer_below_min_value",
                  "Invalid 'max_tool_calls': integer below minimum value. Expected a value >= 1, but got 0 instead."},
         bad_case{"\"2\"", "invalid_type",
                  "Invalid type for 'max_tool_calls': expected an integer, but got a string instead."},
         bad_case{"2.5", "invalid_type",
                  "Invalid type for 'max_tool_calls': expected an integer, but got a decimal number instead."},
         bad_case{"true", "invalid_type",
                  "Invalid type for 'max_tool_calls': expected an integer, but got a boolean instead."},
       }) {
    CAPTURE(c.value);
    auto e = rejected(with("max_tool_calls", c.value));
    CHECK(http_status(e.code) == 400);
    CHECK(e.param == "max_tool_calls");
    CHECK(e.kind == c.code);
    CHECK(e.message == c.message);
  }
  CHECK(accepted(with("max_tool_calls", "9223372036854775807")).max_tool_calls == INT64_MAX);
  CHECK(accepted(with("max_tool_calls", "1")).max_tool_calls == 1);
}

TEST_CASE("temperature, top_p and max_output_tokens are bounded with the spec's messages", "[responses]") { // RS-2
  auto t = rejected(with("temperature", "3"));
  CHECK(t.kind == "decimal_above_max_value");
  CHECK(t.param == "temperature");
  CHECK(t.message == "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 instead.");
  auto low = rejected(with("temperature", "-0.5"));
  CHECK(low.kind == "decimal_below_min_value");
  CHECK(low.message == "Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got -0.5 instead.");
  auto p = rejected(with("top_p", "1.5"));
  CHECK(p.kind == "decimal_above_max_value");
  CHECK(p.message == "Invalid 'top_p': decimal above maximum value. Expected a value <= 1, but got 1.5 instead.");
  CHECK(accepted(with("temperature", "2")).temperature == 2.0);
  auto m = rejected(with("max_output_tokens", "15"));
  CHECK(m.kind == "integer_below_min_value");
  CHECK(m.param == "max_output_tokens");
  CHECK(m.message
        == "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got 15 instead.");
  CHECK(accepted(with("max_output_tokens", "16")).max_output_tokens == 16);
}

TEST_CASE("previous_response_id and conversation together are mutually exclusive", "[responses]") { // RS-2
  auto e = rejected(R"({"model":"m","input":"hi","previous_response_id":"resp_a","conversation":"conv_b"})");
  CHECK(http_status(e.code) == 400);
  CHECK(e.kind == "mutually_exclusive_parameters");
  CHECK(e.message == "Only one of 'previous_response_id' or 'conversation' may be provided.");
  CHECK(accepted(R"({"model":"m","conversation":{"id":"conv_b"}})").conversation_id == "conv_b");
}

TEST_CASE("background needs store", "[responses]") { // RS-2
  auto e = rejected(R"({"model":"m","input":"hi","background":true,"store":false})");
  CHECK(e.kind == "invalid_value");
  CHECK(e.param == "background");
  CHECK(e.message == "Background mode requires 'store' to be true.");
  CHECK(accepted(R"({"model":"m","input":"hi","background":true})").background);
}

TEST_CASE("a tool type the server does not enable is rejected at its index", "[responses]") { // RS-14
  auto e = rejected(with("tools", R"([{"type":"x"}])"));
  CHECK(e.kind == "invalid_value");
  CHECK(e.param == "tools[0].type");
  CHECK(e.message == "Tool type 'x' is not enabled on this server.");
  auto second = rejected(with("tools", R"([{"type":"function","name":"f"},{"type":"code_interpreter"}])"));
  CHECK(second.param == "tools[1].type");
  CHECK(second.message == "Tool type 'code_interpreter' is not enabled on this server.");
}

TEST_CASE("function tool names are checked: pattern, uniqueness, and never mcp__", "[responses]") { // RS-14
  auto reserved = rejected(with("tools", R"([{"type":"function","name":"mcp__srv__echo"}])"));
  CHECK(reserved.kind == "invalid_value");
  CHECK(reserved.param == "tools[0].name");
  auto spaced = rejected(with("tools", R"([{"type":"function","name":"has space"}])"));
  CHECK(spaced.param == "tools[0].name");
  auto twice = rejected(with("tools", R"([{"type":"function","name":"f"},{"type":"function","name":"f"}])"));
  CHECK(twice.param == "tools[1].name");
  auto ok = accepted(with("tools", R"([{"type":"function","name":"get_weather","parameters":{"type":"object"}}])"));
  REQUIRE(ok.functions.size() == 1);
  CHECK(ok.functions[0].name == "get_weather");
}

TEST_CASE("a request may declare at most 64 MCP servers", "[responses]") { // RS-30
  auto servers = [](int n) {
    std::string tools = "[";
    for (int i = 0; i < n; ++i)
      tools += std::string(i ? "," : "") + R"({"type":"mcp","server_label":"s)" + std::to_string(i) + R"("})";
    return tools + "]";
  };
  CHECK(accepted(with("tools", servers(64))).mcp.size() == 64);
  auto e = rejected(with("tools", servers(65)));
  CHECK(e.param == "tools");
  CHECK(e.kind == "invalid_value");
  CHECK(e.message == "A request may declare at most 64 MCP servers; it declares 65.");
}

TEST_CASE("an input item of an unknown type is rejected at its index", "[responses]") { // RS-14
  auto e = rejected(R"({"model":"m","input":[{"type":"bogus"}]})");
  CHECK(e.kind == "invalid_value");
  CHECK(e.param == "input[0].type");
  CHECK(e.message == "Invalid value for 'input[0].type': 'bogus'.");
  auto later = rejected(R"({"model":"m","input":[{"role":"user","content":"a"},{"type":"web_search_call"}]})");
  CHECK(later.param == "input[1].type");
}

TEST_CASE("string input becomes one user message with an input_text part", "[responses]") { // RS-14
  auto r = accepted(R"({"model":"m","input":"Say OK"})");
  REQUIRE(r.input.size() == 1);
  auto& m = r.input[0];
  CHECK(m.type == item_kind::message);
  CHECK(m.role == "user");
  CHECK(m.status == "completed");
  CHECK(std::regex_match(m.id, std::regex("msg_[0-9a-f]{32}")));
  REQUIRE(m.content.size() == 1);
  CHECK(m.content[0].type == part_kind::input_text);
  CHECK(m.content[0].text == "Say OK");
  // Array messages may omit type; string content is normalized the same way.
  auto a = accepted(R"({"model":"m","input":[{"role":"assistant","content":"prior"},{"role":"user","content":"next"}]})");
  REQUIRE(a.input.size() == 2);
  CHECK(a.input[0].content[0].type == part_kind::output_text);
  CHECK(a.input[1].content[0].type == part_kind::input_text);
}

TEST_CASE("metadata holds at most 16 keys of at most 64 characters with string values of at most 512", "[responses]") {
  // RS-2
  auto keys = [](int n) {
    std::string body = "{";
    for (int i = 0; i < n; ++i)
      body += (i ? "," : "") + std::string("\"k") + std::to_string(i) + "\":\"v\"";
    return body + "}";
  };
  auto e = rejected(with("metadata", keys(17)));
  CHECK(http_status(e.code) == 400);
  CHECK(e.param == "metadata");
  CHECK(accepted(with("metadata", keys(16))).metadata == keys(16));
  CHECK(rejected(with("metadata", "{\"" + std::string(65, 'k') + "\":\"v\"}")).code == troupe::errc::bad_request);
  CHECK(rejected(with("metadata", "{\"k\":\"" + std::string(513, 'v') + "\"}")).code == troupe::errc::bad_request);
  CHECK(rejected(with("metadata", R"({"k":1})")).kind == "invalid_type");
}

TEST_CASE("truncation, include and context_management accept only their listed values", "[responses]") { // RS-2, RS-14
  CHECK(rejected(with("truncation", "\"sometimes\"")).kind == "invalid_value");
  auto inc = rejected(with("include", R"(["message.output_text.logprobs","output.secrets"])"));
  CHECK(inc.param == "include[1]");
  auto cm = accepted(with("context_management", R"([{"type":"compaction"}])"));
  CHECK(cm.compact_threshold == 100000);
  CHECK(rejected(with("context_management", R"([{"type":"truncate"}])")).kind == "invalid_value");
}

TEST_CASE("RS-14 an empty input with no history to continue is refused naming input", "[responses]") {
  auto empty_string = rejected(R"({"model":"m","input":""})");
  CHECK(http_status(empty_string.code) == 400);
  CHECK(empty_string.param == "input");
  CHECK(empty_string.kind == "string_below_min_length");
  CHECK(empty_string.message
        == "Invalid 'input': string too short. Expected a string with minimum length 1, but got an empty string instead.");
  auto empty_array = rejected(R"({"model":"m","input":[]})");
  CHECK(empty_array.param == "input");
  CHECK(empty_array.kind == "array_below_min_length");
  CHECK(empty_array.message
        == "Invalid 'input': empty array. Expected an array with minimum length 1, but got an empty array instead.");
  // A continuation has its history to answer.
  CHECK(accepted(R"({"model":"m","input":[],"previous_response_id":"resp_a"})").input.empty());
  CHECK(accepted(R"({"model":"m","input":"","conversation":"conv_a"})").input.size() == 1);
}

TEST_CASE("RS-11 a conversation body without metadata keeps it, null clears it, an object replaces it",
          "[responses]") {
  using metadata = std::variant<std::optional<std::string>, problem>;
  auto of = [](const std::string& body) { return conversation_metadata(parse_doc(body)); };
  CHECK(std::get<std::optional<std::string>>(of("{}")) == std::nullopt);
  CHECK(std::get<std::optional<std::string>>(of(R"({"metadata":null})")) == std::optional<std::string>("{}"));
  CHECK(std::get<std::optional<std::string>>(of(R"({"metadata":{"k":"v"}})")) == std::optional<std::string>(R"({"k":"v"})"));
  metadata bad = of(R"({"metadata":{"k":1}})");
  REQUIRE(std::holds_alternative<problem>(bad));
  CHECK(std::get<problem>(bad).param == "metadata.k");
}

TEST_CASE("RS-5 RS-8 include[] on a GET accepts the listed values and names the first unknown one", "[responses]") {
  CHECK_FALSE(check_include_query({{"limit", "2"}, {"include[]", "message.output_text.logprobs"}}));
  CHECK_FALSE(check_include_query({}));
  auto e = check_include_query(
    {{"include[]", "reasoning.encrypted_content"}, {"order", "asc"}, {"include[]", "output.secrets"}});
  REQUIRE(e);
  CHECK(http_status(e->code) == 400);
  CHECK(e->kind == "invalid_value");
  CHECK(e->param == "include[1]");
  CHECK(e->message == "Invalid value for 'include[1]': 'output.secrets'.");
  auto plain = check_include_query({{"include", "nonsense"}});
  REQUIRE(plain);
  CHECK(plain->param == "include[0]");
}

TEST_CASE("RS-15 the response object echoes reasoning as effort and summary, text with its default verbosity "
          "and sampling as the 1.0 default when not requested",
          "[responses]") {
  response_state st;
  st.id = "resp_x";
  auto plain = parse_doc(response_json(accepted(R"({"model":"m","input":"hi"})"), st));
  CHECK(json::serialize(plain["reasoning"]) == R"({"effort":null,"summary":null})");
  CHECK(json::serialize(plain["text"]) == R"({"format":{"type":"text"},"verbosity":"medium"})");
  auto text = parse_doc(response_json(accepted(R"({"model":"m","input":"hi","text":{"verbosity":"low"}})"), st));
  CHECK(json::serialize(text["text"]) == R"({"format":{"type":"text"},"verbosity":"low"})");
  CHECK(json::get_number(plain, "temperature") == 1.0);
  CHECK(json::get_number(plain, "top_p") == 1.0);

  auto given = parse_doc(response_json(
    accepted(R"({"model":"m","input":"hi","reasoning":{"effort":"low"},"temperature":0.2,"top_p":0.5})"), st));
  CHECK(json::serialize(given["reasoning"]) == R"({"effort":"low","summary":null})");
  CHECK(json::get_number(given, "temperature") == 0.2);
  CHECK(json::get_number(given, "top_p") == 0.5);
  auto full = parse_doc(
    response_json(accepted(R"({"model":"m","input":"hi","reasoning":{"summary":"auto","effort":"high"}})"), st));
  CHECK(json::serialize(full["reasoning"]) == R"({"effort":"high","summary":"auto"})");
}

// ---- 10. pairing and approval checks ----

TEST_CASE("history checks name the unanswered call, the orphan output and the duplicate output", "[responses]") {
  // RS-28
  auto unanswered = check_history({message("user", "hi"), function_call("call_1")}, {}, {});
  REQUIRE(unanswered);
  CHECK(unanswered->code == troupe::errc::bad_request);
  CHECK(unanswered->param == "input");
  CHECK(unanswered->kind.empty());
  CHECK(unanswered->message == "No tool output found for function call call_1.");

  auto orphan = check_history({message("user", "hi")}, {function_output("call_9", "x")}, {});
  REQUIRE(orphan);
  CHECK(orphan->param == "input");
  CHECK(orphan->message == "No tool call found for function call output with call_id call_9.");

  auto duplicate = check_history({function_call("call_1")}, {function_output("call_1", "a"), function_output("call_1", "b")}, {});
  REQUIRE(duplicate);
  CHECK(duplicate->message == "Duplicate tool output for call_id call_1.");

  CHECK_FALSE(check_history({function_call("call_1")}, {function_output("call_1", "a")}, {}));
  auto cut = function_call("call_2");
  cut.status = "incomplete";
  CHECK_FALSE(check_history({cut}, {}, {})); // an incomplete call needs no output
}

TEST_CASE("approval responses must answer a known, unanswered request of a declared server", "[responses]") {
  // RS-33
  auto unknown = check_history({}, {approval_response("mcpr_x", true)}, {declared("srv")});
  REQUIRE(unknown);
  CHECK(unknown->param == "input");
  CHECK(unknown->message == "No approval request found with id 'mcpr_x'.");

  auto twice = check_history({approval_request("mcpr_1"), approval_response("mcpr_1", true)},
                             {approval_response("mcpr_1", false)}, {declared("srv")});
  REQUIRE(twice);
  CHECK(twice->message == "Approval request 'mcpr_1' has already been answered.");

  auto undeclared = check_history({approval_request("mcpr_1")}, {approval_response("mcpr_1", true)}, {declared("other")});
  REQUIRE(undeclared);
  CHECK(undeclared->kind == "invalid_value");
  CHECK(undeclared->param == "input");

  CHECK_FALSE(check_history({approval_request("mcpr_1")}, {approval_response("mcpr_1", true)}, {declared("srv")}));
}

// ---- 11. rendering ----

TEST_CASE("the chat request puts instructions first and merges consecutive calls into one assistant message",
          "[responses]") { // RS-47
  auto req = accepted(R"({"model":"m","instructions":"Be brief.","tool_choice":"required","tools":[{"type":"function","name":"f","description":"does f","parameters":{"type":"object"}}]})");
  round_request r;
  fill_round(r, req);
  r.history = {
    message("user", "hi"),
    function_call("call_1", "f", "{\"a\":1}"),
    function_call("call_2", "f", "{\"a\":2}"),
    function_output("call_1", "one"),
    function_output("call_2", "two"),
    message("assistant", "Let me look again."),
    function_call("call_3", "f", "{}"),
    function_output("call_3", "three"),
    message("developer", "mind the rules"),
  };
  r.tools = {{"f", "does f", R"({"type":"object"})", ""}};
  r.force_auto = true;
  r.max_output_tokens = 100;
  auto body = parse_doc(render_chat_request(r, {}));
  auto& messages = body["messages"];
  REQUIRE(messages.Size() == 8);
  CHECK(json::serialize(messages[0]) == R"({"role":"system","content":"Be brief."})");
  CHECK(json::serialize(messages[1]) == R"({"role":"user","content":"hi"})");
  CHECK(json::get_string(messages[2], "role") == "assistant");
  CHECK(messages[2]["content"].IsNull());
  REQUIRE(messages[2]["tool_calls"].Size() == 2);
  CHECK(json::serialize(messages[2]["tool_calls"][1])
        == R"({"id":"call_2","type":"function","function":{"name":"f","arguments":"{\"a\":2}"}})");
  CHECK(json::serialize(messages[3]) == R"({"role":"tool","tool_call_id":"call_1","content":"one"})");
  CHECK(json::serialize(messages[4]) == R"({"role":"tool","tool_call_id":"call_2","content":"two"})");
  // A call right after assistant text joins that message.
  CHECK(json::get_string(messages[5], "content") == "Let me look again.");
  REQUIRE(messages[5]["tool_calls"].Size() == 1);
  CHECK(json::get_string(messages[6], "role") == "tool");
  CHECK(json::serialize(messages[7]) == R"({"role":"system","content":"mind the rules"})");
  // A round after gateway calls is forced to auto (RS-14), and the stream reports usage.
  CHECK(json::serialize(body["tool_choice"]) == R"("auto")");
  CHECK(json::serialize(body["tools"][0])
        == R"({"type":"function","function":{"name":"f","description":"does f","parameters":{"type":"object"}}})");
  CHECK(json::get_bool(body, "stream") == true);
  CHECK(json::serialize(body["stream_options"]) == R"({"include_usage":true})");
  CHECK(json::get_int(body, "max_tokens") == 100);
  CHECK_FALSE(json::member(body, "store"));

  chat_options options;
  options.developer_role = "developer";
  options.max_tokens_field = "max_completion_tokens";
  r.force_auto = false;
  auto other = parse_doc(render_chat_request(r, options));
  CHECK(json::get_string(other["messages"][7], "role") == "developer");
  CHECK(json::get_int(other, "max_completion_tokens") == 100);
  CHECK_FALSE(json::member(other, "max_tokens"));
  CHECK(json::serialize(other["tool_choice"]) == R"("required")");
}

TEST_CASE("RS-14 tool_choice none reaches either upstream as none, with the tools", "[responses]") {
  auto req = accepted(R"({"model":"m","input":"hi","tool_choice":"none","tools":[{"type":"function","name":"f"}]})");
  round_request r;
  fill_round(r, req);
  r.history = req.input;
  r.tools = {{"f", "", R"({"type":"object","properties":{}})", ""}};
  auto chat = parse_doc(render_chat_request(r, {}));
  CHECK(json::serialize(chat["tool_choice"]) == R"("none")");
  REQUIRE(chat["tools"].Size() == 1);
  auto responses = parse_doc(render_responses_request(r));
  CHECK(json::serialize(responses["tool_choice"]) == R"("none")");
  REQUIRE(responses["tools"].Size() == 1);
  CHECK(json::get_string(responses["tools"][0], "name") == "f");
}

TEST_CASE("a list output reaches a chat upstream as its text parts joined by lines", "[responses]") { // RS-47
  auto req = accepted(R"({"model":"m"})");
  auto out = function_output("call_1", "");
  out.output = R"([{"type":"input_text","text":"first"},{"type":"input_image","image_url":"https://example.com/a.png"},{"type":"input_text","text":"last"}])";
  round_request r;
  fill_round(r, req);
  r.history = {function_call("call_1"), out};
  auto body = parse_doc(render_chat_request(r, {}));
  REQUIRE(body["messages"].Size() == 2);
  CHECK(json::get_string(body["messages"][1], "content") == "first\n[non-text output omitted]\nlast");
}

TEST_CASE("the Responses upstream request never carries state, background or metadata, and never stores",
          "[responses]") { // RS-45
  for (auto body : {
         R"({"model":"m","input":"hi","previous_response_id":"resp_a","background":true,"metadata":{"k":"v"},"context_management":[{"type":"compaction","compact_threshold":1000}],"instructions":"Be brief.","truncation":"auto","include":["reasoning.encrypted_content","file_search_call.results"]})",
         R"({"model":"m","input":"hi","conversation":"conv_b","store":true})",
       }) {
    CAPTURE(body);
    auto req = accepted(body);
    round_request r;
    fill_round(r, req);
    r.history = req.input;
    auto out = parse_doc(render_responses_request(r));
    for (auto key : {"previous_response_id", "conversation", "background", "metadata", "context_management"})
      CHECK_FALSE(json::member(out, key));
    CHECK(json::get_bool(out, "store") == false);
    CHECK(json::get_bool(out, "stream") == true);
    CHECK(json::get_string(out, "model") == "m");
    REQUIRE(out["input"].Size() == 1);
    CHECK(json::get_string(out["input"][0], "role") == "user");
    if (req.instructions) {
      CHECK(json::get_string(out, "instructions") == "Be brief.");
      CHECK(json::get_string(out, "truncation") == "auto");
      CHECK(json::serialize(out["include"]) == R"(["reasoning.encrypted_content"])");
    }
  }
}

TEST_CASE("the model's view turns MCP calls and approvals into function calls and outputs", "[responses]") {
  // RS-46
  item call;
  call.type = item_kind::mcp_call;
  call.id = "mcp_1";
  call.server_label = "srv";
  call.name = "echo";
  call.arguments = "{\"text\":\"hi\"}";
  call.output = "\"hi back\"";
  call.status = "completed";
  item failed = call;
  failed.id = "mcp_2";
  failed.output.clear();
  failed.error = R"({"type":"mcp_tool_execution_error","content":[]})";
  failed.status = "failed";
  item list;
  list.type = item_kind::mcp_list_tools;
  list.id = "mcpl_1";
  list.server_label = "srv";
  item approved_call = call;
  approved_call.id = "mcp_3";
  approved_call.approval_request_id = "mcpr_ok";
  approved_call.output = "\"removed\"";
  auto cut = function_call("call_cut");
  cut.status = "incomplete";

  auto view = model_view({
    list,
    call,
    failed,
    approval_request("mcpr_no"),
    approval_response("mcpr_no", false, "Too risky."),
    approval_request("mcpr_open"),
    approval_request("mcpr_ok"),
    approval_response("mcpr_ok", true),
    approved_call,
    cut,
  });
  REQUIRE(view.size() == 8);
  CHECK(view[0].type == item_kind::function_call);
  CHECK(view[0].call_id == "mcp_1");
  CHECK(view[0].name == "mcp__srv__echo");
  CHECK(view[0].arguments == "{\"text\":\"hi\"}");
  CHECK(view[1].type == item_kind::function_call_output);
  CHECK(view[1].call_id == "mcp_1");
  CHECK(output_text(view[1]) == "hi back");
  CHECK(view[2].call_id == "mcp_2");
  CHECK(output_text(view[3]) == R"({"error":{"type":"mcp_tool_execution_error","content":[]}})");
  // A denied request: its call and the denial as its output.
  CHECK(view[4].type == item_kind::function_call);
  CHECK(view[4].call_id == "mcpr_no");
  CHECK(view[4].name == "mcp__srv__rm");
  CHECK(view[5].call_id == "mcpr_no");
  CHECK(output_text(view[5]) == R"({"error":"Tool call was not approved by the user. Too risky."})");
  // The unanswered request gives nothing; the approved one its call, then the executed call's output.
  CHECK(view[6].type == item_kind::function_call);
  CHECK(view[6].call_id == "mcpr_ok");
  CHECK(view[7].type == item_kind::function_call_output);
  CHECK(view[7].call_id == "mcpr_ok");
  CHECK(output_text(view[7]) == "removed");
}

TEST_CASE("after a compaction only earlier user messages remain and the summary speaks as the assistant",
          "[responses]") { // RS-50
  item compaction;
  compaction.type = item_kind::compaction;
  compaction.id = "cmp_1";
  compaction.encrypted_content = "User is planning a trip.";
  auto view = model_view({
    message("user", "first", "msg_u1"),
    message("assistant", "reply", "msg_a1"),
    function_call("call_1"),
    function_output("call_1", "x"),
    message("user", "second", "msg_u2"),
    compaction,
    message("user", "third", "msg_u3"),
    message("assistant", "answer", "msg_a3"),
  });
  REQUIRE(view.size() == 5);
  CHECK(view[0].id == "msg_u1");
  CHECK(view[1].id == "msg_u2");
  CHECK(view[2].type == item_kind::message);
  CHECK(view[2].role == "assistant");
  CHECK(message_text(view[2]) == "User is planning a trip.");
  CHECK(view[3].id == "msg_u3");
  CHECK(view[4].id == "msg_a3");
  for (auto& it : view)
    CHECK(it.type != item_kind::compaction);
}

// ---- 12. names and estimates ----

TEST_CASE("MCP tool names are sanitized and capped at 64 characters with a hash suffix", "[responses]") { // RS-31
  CHECK(mcp_function_name("srv", "echo") == "mcp__srv__echo");
  CHECK(mcp_function_name("my server", "do.thing/now") == "mcp__my_server__do_thing_now");
  CHECK(mcp_function_name("a-b", "c_d") == "mcp__a-b__c_d");
  CHECK(mcp_function_name("srv", "café東京") == "mcp__srv__caf___"); // one `_` per character
  const std::string fits = std::string(64 - 10, 't');
  CHECK(mcp_function_name("srv", fits) == "mcp__srv__" + fits);
  auto long_a = mcp_function_name(std::string(30, 's'), std::string(40, 'a') + "x");
  auto long_b = mcp_function_name(std::string(30, 's'), std::string(40, 'a') + "y");
  CHECK(long_a.size() == 64);
  CHECK(std::regex_match(long_a, std::regex("mcp__s{30}__a{18}_[0-9a-f]{8}")));
  CHECK(long_a != long_b); // same first 55 characters, different hash
  CHECK(long_a == mcp_function_name(std::string(30, 's'), std::string(40, 'a') + "x"));
}

TEST_CASE("the token estimate follows the RS-51 formula", "[responses]") { // RS-51
  // Text: instructions 9 + "hello world" 11 + "look" 4 + arguments 9 + output "ok" 2 = 35 bytes → 9;
  // 4 items × 12, 3 content parts × 7, 1 image × 1024.
  item picture = message("user", "look");
  picture.content.push_back({part_kind::input_image, "", "https://example.com/a.png", "auto"});
  std::vector<item> history = {
    message("user", "hello world"),
    picture,
    function_call("call_1", "f", "{\"q\":\"x\"}"),
    function_output("call_1", "ok"),
  };
  CHECK(estimate_tokens(history, "Be brief.") == 9 + 48 + 21 + 1024);
  CHECK(estimate_tokens({}, "") == 0);
  CHECK(estimate_tokens({message("user", "abcde")}, "") == 2 + 12 + 7);
}

namespace {

using troupe::protocol::chat_message;

chat_message chat(std::string role, std::string content, std::vector<troupe::protocol::tool_call> calls = {}) {
  auto m = troupe::protocol::text_message(std::move(role), std::move(content));
  m.tool_calls = std::move(calls);
  return m;
}

chat_message tool_reply(std::string call_id, std::string name, std::string content) {
  auto m = chat("tool", std::move(content));
  m.tool_call_id = std::move(call_id);
  m.name = std::move(name);
  return m;
}

// What the upstream tells apart: role, text (null kept), calls, and a tool message's call and name.
std::string shape(const std::vector<chat_message>& messages) {
  std::string out;
  for (auto& m : messages) {
    out += m.role + ":" + (m.content_null ? "null" : "'" + m.content + "'");
    for (auto& c : m.tool_calls)
      out += " call(" + c.id + "," + c.name + "," + c.arguments + ")";
    if (!m.tool_call_id.empty())
      out += " for(" + m.tool_call_id + "," + m.name + ")";
    out += "\n";
  }
  return out;
}

} // namespace

TEST_CASE("the agent service's chat history survives the item model: each message renders back as it came", "[responses]") { // AS-19
  std::vector<chat_message> history = {
    chat("user", "q1"),
    chat("assistant", "thinking"),
    chat("assistant", "", {{"c1", "list_dir", "{}"}}),
    tool_reply("c1", "list_dir", "a.txt"),
    chat("assistant", "two at once", {{"c2", "read", "{\"p\":1}"}, {"c3", "read", "{\"p\":2}"}}),
    tool_reply("c2", "read", "one"),
    tool_reply("c3", "read", "{\"json\":\"as text\"}"),
    chat("assistant", "", {{"c4", "f", "{}"}}),
    tool_reply("c4", "f", ""),
    chat("assistant", "", {{"c5", "g", "{}"}}),
    tool_reply("c5", "g", "x"),
    chat("assistant", "a1"),
    chat("user", "q2"),
  };
  history[2].content_null = history[7].content_null = history[9].content_null = true;
  auto items = items_of(history);
  CHECK(items.size() == 16); // 13 messages, 5 calls, minus 3 calls-only messages, plus the one after "thinking"
  CHECK(shape(chat_messages(items)) == shape(history));
}

TEST_CASE("calls-only assistant turns that follow each other stay separate turns", "[responses]") { // AS-19
  std::vector<chat_message> history = {
    chat("user", "q"),
    chat("assistant", "", {{"a", "f", "{}"}}),
    chat("assistant", "", {{"b", "f", "{}"}}),
  };
  history[1].content_null = history[2].content_null = true;
  CHECK(shape(chat_messages(items_of(history))) == shape(history));
}

TEST_CASE("an agent service round names each tool message after its call; a Responses round does not", "[responses]") { // AS-19, RS-47
  auto req = accepted(R"({"model":"m","input":"hi"})");
  round_request r;
  fill_round(r, req);
  r.history = {message("user", "hi"), function_call("c1", "list_dir"), function_output("c1", "a.txt")};
  auto plain = parse_doc(render_chat_request(r, {}));
  CHECK_FALSE(plain["messages"][2].HasMember("name"));
  r.name_tool_messages = true;
  auto named = parse_doc(render_chat_request(r, {}));
  CHECK(json::get_string(named["messages"][2], "role") == "tool");
  CHECK(json::get_string(named["messages"][2], "name") == "list_dir");
  CHECK(json::get_string(named["messages"][2], "tool_call_id") == "c1");
}

TEST_CASE("RS-14 top_logprobs is an integer in 0..20, and logprobs are asked of either upstream only when include "
          "or top_logprobs asks for them",
          "[responses]") {
  auto high = rejected(with("top_logprobs", "21"));
  CHECK(high.kind == "integer_above_max_value");
  CHECK(high.param == "top_logprobs");
  CHECK(high.message == "Invalid 'top_logprobs': integer above maximum value. Expected a value <= 20, but got 21 instead.");
  CHECK(rejected(with("top_logprobs", "-1")).kind == "integer_below_min_value");
  CHECK(rejected(with("top_logprobs", "\"3\"")).kind == "invalid_type");
  CHECK(accepted(with("top_logprobs", "20")).top_logprobs == 20);

  auto round_of = [](const std::string& body) {
    round_request r;
    fill_round(r, accepted(body));
    r.history = {message("user", "hi")};
    return r;
  };
  auto plain = round_of(R"({"model":"m","input":"hi"})");
  CHECK_FALSE(wants_logprobs(plain));
  auto chat = parse_doc(render_chat_request(plain, {}));
  CHECK_FALSE(chat.HasMember("logprobs"));
  CHECK_FALSE(chat.HasMember("top_logprobs"));
  auto resp = parse_doc(render_responses_request(plain));
  CHECK_FALSE(resp.HasMember("include"));
  CHECK_FALSE(resp.HasMember("top_logprobs"));

  auto top = round_of(R"({"model":"m","input":"hi","top_logprobs":3})");
  CHECK(wants_logprobs(top));
  chat = parse_doc(render_chat_request(top, {}));
  CHECK(chat["logprobs"].GetBool());
  CHECK(chat["top_logprobs"].GetInt() == 3);
  resp = parse_doc(render_responses_request(top));
  CHECK(resp["top_logprobs"].GetInt() == 3);
  REQUIRE(resp["include"].Size() == 1);
  CHECK(std::string(resp["include"][0].GetString()) == "message.output_text.logprobs");

  auto included = round_of(R"({"model":"m","input":"hi","include":["message.output_text.logprobs"]})");
  CHECK(wants_logprobs(included));
  chat = parse_doc(render_chat_request(included, {}));
  CHECK(chat["logprobs"].GetBool());
  CHECK_FALSE(chat.HasMember("top_logprobs"));
  CHECK_FALSE(wants_logprobs(round_of(R"({"model":"m","input":"hi","top_logprobs":0})")));
}
