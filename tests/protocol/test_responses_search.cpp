// Unit tests of the Responses gateway's search tools (RS-27): the declarations, the provider's reply
// (hostile input), the numbered text the model reads, the items and events, and their configuration.
#include "protocol/config.hpp"
#include "protocol/json.hpp"
#include "protocol/model_round.hpp"
#include "protocol/responses_request.hpp"
#include "protocol/responses_search.hpp"
#include "protocol/responses_stream.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

namespace json = troupe::protocol::json;
using namespace troupe::protocol::responses;
using troupe::protocol::config_result;
using troupe::protocol::parse_config;

namespace {

request parsed(const std::string& body) {
  auto r = parse_request(body);
  REQUIRE(std::holds_alternative<request>(r));
  return std::get<request>(r);
}

troupe::problem refused(const std::string& body) {
  auto r = parse_request(body);
  REQUIRE(std::holds_alternative<troupe::problem>(r));
  return std::get<troupe::problem>(r);
}

config_result configured(std::string_view text, std::map<std::string, std::string> env = {}) {
  return parse_config(text, {}, [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  });
}

bool has_error(const config_result& c, const std::string& start) {
  for (auto& e : c.errors)
    if (e.rfind(start, 0) == 0)
      return true;
  return false;
}

std::optional<gateway_route> search_routes(const std::string& name) {
  if (auto kind = search_call_of(name))
    return gateway_route{{}, name, false, *kind};
  return std::nullopt;
}

upstream_event call_event(const std::string& name) {
  upstream_event call;
  call.what = upstream_event::kind::call;
  call.name = name;
  call.call_id = "call_1";
  return call;
}

std::vector<std::string> types_of(const std::vector<stream_event>& events) {
  std::vector<std::string> out;
  for (auto& e : events)
    out.push_back(e.type);
  return out;
}

// Streams one round in which the model calls `name` with `arguments` and the round finishes.
void round_with_call(response_stream& s, const std::string& name, const std::string& arguments) {
  upstream_event args;
  args.what = upstream_event::kind::arguments;
  args.text = arguments;
  upstream_event finish;
  finish.what = upstream_event::kind::finish;
  finish.finish = "tool_calls";
  REQUIRE(s.feed(call_event(name)));
  REQUIRE(s.feed(args));
  REQUIRE(s.feed(finish));
}

} // namespace

TEST_CASE("RS-27 a provider's reply is an array of results or an object with a results array", "[responses][search]") {
  auto web = parse_search_reply(item_kind::web_search_call,
                                R"([{"title":"A","url":"https://a.example","snippet":"aa"},{"url":"https://b.example"}])");
  REQUIRE(web.error.empty());
  REQUIRE(web.hits.size() == 2);
  CHECK(web.hits[0].title == "A");
  CHECK(web.hits[1].url == "https://b.example");
  CHECK(web.hits[1].title.empty());

  auto files = parse_search_reply(item_kind::file_search_call,
                                  R"({"results":[{"file_id":"f1","filename":"a.md","score":0.5,"text":"t"}]})");
  REQUIRE(files.error.empty());
  REQUIRE(files.hits.size() == 1);
  CHECK(files.hits[0].file_id == "f1");
  CHECK(files.hits[0].score == 0.5);
}

TEST_CASE("RS-27 a reply that is not JSON, of the wrong shape or with a mistyped field is an error that says which", "[responses][search]") {
  CHECK(parse_search_reply(item_kind::web_search_call, "<html>").error.find("not valid JSON") != std::string::npos);
  CHECK(parse_search_reply(item_kind::web_search_call, R"({"items":[]})").error.find("'results' array")
        != std::string::npos);
  CHECK(parse_search_reply(item_kind::web_search_call, "[1]").error.find("results[0] is not an object")
        != std::string::npos);
  auto typed = parse_search_reply(item_kind::web_search_call, R"([{"url":"u"},{"url":7}])");
  CHECK(typed.error.find("results[1].url is not a string") != std::string::npos);
  CHECK(typed.hits.empty());
  CHECK(parse_search_reply(item_kind::file_search_call, R"([{"score":"high"}])").error.find("score is not a number")
        != std::string::npos);
  std::string nested(100, '[');
  CHECK_FALSE(parse_search_reply(item_kind::web_search_call, nested).error.empty());
}

TEST_CASE("RS-27 a reply is bounded: its size, the number of results and each string's length", "[responses][search]") {
  std::string huge = "[" + std::string(max_search_reply_bytes, ' ') + "]";
  CHECK(parse_search_reply(item_kind::web_search_call, huge).error.find("larger than") != std::string::npos);

  std::string many = "[";
  for (int i = 0; i < 80; ++i)
    many += std::string(i ? "," : "") + R"({"url":"u"})";
  many += "]";
  CHECK(parse_search_reply(item_kind::web_search_call, many).hits.size() == max_search_results);
  CHECK(parse_search_reply(item_kind::file_search_call, many, 3).hits.size() == 3);

  auto long_snippet = "[{\"snippet\":" + json::quote(std::string(100000, 'x') + "\xC3\xA9") + "}]";
  auto cut = parse_search_reply(item_kind::web_search_call, long_snippet);
  REQUIRE(cut.hits.size() == 1);
  CHECK(cut.hits[0].snippet.size() == max_search_text_bytes);
}

TEST_CASE("RS-27 the model reads the results as numbered text", "[responses][search]") {
  std::vector<search_hit> web(2);
  web[0].title = "Home";
  web[0].url = "https://h.example";
  web[0].snippet = "About.";
  web[1].url = "https://u.example";
  CHECK(numbered_results(item_kind::web_search_call, "q", web)
        == "[1] Home\nURL: https://h.example\nAbout.\n\n[2] https://u.example\nURL: https://u.example");
  std::vector<search_hit> files(1);
  files[0].file_id = "f1";
  files[0].filename = "a.md";
  files[0].score = 0.25;
  files[0].text = "Body.";
  CHECK(numbered_results(item_kind::file_search_call, "q", files) == "[1] a.md (file f1)\nScore: 0.25\nBody.");
  CHECK(numbered_results(item_kind::web_search_call, "nothing", {}) == "No results for \"nothing\".");
}

TEST_CASE("RS-27 the item's optional fields: web sources as url entries, file results with their scores", "[responses][search]") {
  std::vector<search_hit> hits(1);
  hits[0].url = "https://h.example";
  CHECK(results_json(item_kind::web_search_call, hits) == R"([{"type":"url","url":"https://h.example"}])");
  hits[0].file_id = "f";
  hits[0].filename = "n";
  hits[0].score = 1.5;
  hits[0].text = "t";
  CHECK(results_json(item_kind::file_search_call, hits)
        == R"([{"attributes":{},"file_id":"f","filename":"n","score":1.5,"text":"t"}])");
}

TEST_CASE("RS-27 the query is the model's non-empty string; the provider gets the declaration's parameters", "[responses][search]") {
  CHECK(query_of(R"({"query":"caf"})").query == "caf");
  CHECK_FALSE(query_of(R"({"query":""})").error.empty());
  CHECK_FALSE(query_of(R"({"q":"x"})").error.empty());
  CHECK_FALSE(query_of("not json").error.empty());
  search_declaration d;
  CHECK(provider_request(d, "a\"b") == R"({"query":"a\"b"})");
  d.call = item_kind::file_search_call;
  d.vector_store_ids = {"vs_1"};
  d.max_num_results = 4;
  CHECK(provider_request(d, "x") == R"({"query":"x","vector_store_ids":["vs_1"],"max_num_results":4})");
}

TEST_CASE("RS-27 a request declares web_search (or web_search_preview) and file_search once each, with file_search's parameters checked", "[responses][search]") {
  auto r = parsed(R"({"model":"m","input":"x","tools":[{"type":"web_search_preview"},)"
                  R"({"type":"file_search","vector_store_ids":["vs_1"],"max_num_results":5}]})");
  REQUIRE(r.search.size() == 2);
  CHECK(r.search[0].call == item_kind::web_search_call);
  CHECK(r.search[1].call == item_kind::file_search_call);
  CHECK(r.search[1].index == 1);
  CHECK(r.search[1].vector_store_ids == std::vector<std::string>{"vs_1"});
  CHECK(r.search[1].max_num_results == 5);
  CHECK(r.tools_echo.find("web_search_preview") != std::string::npos);

  auto twice = refused(R"({"model":"m","input":"x","tools":[{"type":"web_search"},{"type":"web_search_preview"}]})");
  CHECK(twice.param == "tools[1].type");
  auto many = refused(R"({"model":"m","input":"x","tools":[{"type":"file_search","max_num_results":51}]})");
  CHECK(many.param == "tools[0].max_num_results");
  CHECK(many.kind == "invalid_value");
  auto ids = refused(R"({"model":"m","input":"x","tools":[{"type":"file_search","vector_store_ids":[3]}]})");
  CHECK(ids.param == "tools[0].vector_store_ids");
}

TEST_CASE("RS-27 a search tool without a provider is refused as a disabled tool type, naming the type as given", "[responses][search]") {
  auto r = parsed(R"({"model":"m","input":"x","tools":[{"type":"function","name":"f"},{"type":"web_search_preview"}]})");
  auto off = check_search_tools(r, false, true);
  REQUIRE(off);
  CHECK(off->param == "tools[1].type");
  CHECK(off->kind == "invalid_value");
  CHECK(off->message == "Tool type 'web_search_preview' is not enabled on this server.");
  CHECK_FALSE(check_search_tools(r, true, false));

  auto clash = parsed(R"({"model":"m","input":"x","tools":[{"type":"function","name":"file_search"},{"type":"file_search"}]})");
  auto named = check_search_tools(clash, true, true);
  REQUIRE(named);
  CHECK(named->message.find("rename the function") != std::string::npos);
}

TEST_CASE("RS-27 a search call streams added, in_progress, searching, then completed and done with its query and included results", "[responses][search]") {
  response_stream s(search_routes, -1);
  round_with_call(s, "web_search", R"({"query":"caf actors"})");
  CHECK(types_of(s.take_events())
        == std::vector<std::string>{"response.output_item.added", "response.web_search_call.in_progress",
                                    "response.web_search_call.searching"});
  CHECK(s.gateway_calls() == 1);
  CHECK(s.client_actions() == 0);
  auto pending = s.take_pending();
  REQUIRE(pending.size() == 1);
  CHECK(pending[0].tool == "web_search");
  CHECK(s.output()[0].query == "caf actors");

  s.complete_search(0, false, R"([{"type":"url","url":"https://a.example"}])", "[1] A");
  auto end = s.take_events();
  CHECK(types_of(end) == std::vector<std::string>{"response.web_search_call.completed", "response.output_item.done"});
  CHECK(end[1].json.find(R"("item":{"id":")") != std::string::npos);
  CHECK(end[1].json.find(R"("status":"completed","action":{"type":"search","query":"caf actors","sources":[{"type":"url","url":"https://a.example"}]})")
        != std::string::npos);

  // RS-46: the next round sees the call and the numbered text.
  auto view = model_view(s.model_items());
  REQUIRE(view.size() == 2);
  CHECK(view[0].type == item_kind::function_call);
  CHECK(view[0].name == "web_search");
  CHECK(view[0].arguments == R"({"query":"caf actors"})");
  CHECK(view[1].output == json::quote("[1] A"));
}

TEST_CASE("RS-27 a failed search ends its item failed with no completed event, and the model reads the error", "[responses][search]") {
  response_stream s(search_routes, -1);
  round_with_call(s, "file_search", R"({"query":"x"})");
  s.take_events();
  s.take_pending();
  s.complete_search(0, true, {}, search_error_output("provider down"));
  auto end = s.take_events();
  CHECK(types_of(end) == std::vector<std::string>{"response.output_item.done"});
  CHECK(end[0].json.find(R"("status":"failed","queries":["x"],"results":null)") != std::string::npos);
  auto view = model_view(s.model_items());
  REQUIRE(view.size() == 2);
  CHECK(view[1].output == json::quote(R"({"error":"provider down"})"));
}

TEST_CASE("RS-27 search items read back from storage keep their query and results, and render for a later response", "[responses][search]") {
  auto ws = item_from_json(std::string_view(
    R"({"id":"ws_1","type":"web_search_call","status":"completed","action":{"type":"search","query":"q","sources":[{"type":"url","url":"https://a.example"}]}})"));
  REQUIRE(ws);
  CHECK(ws->type == item_kind::web_search_call);
  CHECK(ws->query == "q");
  CHECK(to_json(*ws) == R"({"id":"ws_1","type":"web_search_call","status":"completed","action":{"type":"search","query":"q","sources":[{"type":"url","url":"https://a.example"}]}})");
  CHECK(search_history_text(*ws) == "[1] https://a.example\nURL: https://a.example");

  auto fs = item_from_json(std::string_view(R"({"id":"fs_1","type":"file_search_call","status":"completed","queries":["q"],"results":null})"));
  REQUIRE(fs);
  CHECK(fs->query == "q");
  CHECK(search_history_text(*fs) == "The search for \"q\" ran; its results are no longer available.");
}

TEST_CASE("RS-27 replaying a stored search item gives its status events", "[responses][search]") {
  response_stream s(search_routes, -1);
  item it;
  it.type = item_kind::web_search_call;
  it.id = "ws_1";
  it.status = "completed";
  it.query = "q";
  s.replay_item(it);
  CHECK(types_of(s.take_events())
        == std::vector<std::string>{"response.output_item.added", "response.web_search_call.in_progress",
                                    "response.web_search_call.searching", "response.web_search_call.completed",
                                    "response.output_item.done"});
}

TEST_CASE("RS-27 tools.<t>.provider names an MCP server with its tool, or an HTTP url with an optional bearer token from the environment", "[config][search]") {
  auto mcp = configured(R"({"mcp":{"servers":[{"name":"finder","transport":"http","url":"http://127.0.0.1:9/mcp"}]},)"
                        R"("tools":{"web_search":{"provider":{"mcp_server":"finder","tool":"search"}}}})");
  REQUIRE(mcp.ok());
  CHECK(mcp.value.search.web_search.configured());
  CHECK(mcp.value.search.web_search.tool == "search");
  CHECK_FALSE(mcp.value.search.file_search.configured());

  auto web = configured(R"({"tools":{"file_search":{"provider":{"url":"https://s.example/q","bearer_token_env":"TOK",)"
                        R"("timeout_seconds":5}}}})",
                        {{"TOK", "secret"}});
  REQUIRE(web.ok());
  CHECK(web.value.search.file_search.bearer_token == "secret");
  CHECK(web.value.search.file_search.timeout_seconds == 5);

  CHECK_FALSE(configured("{}").value.search.web_search.configured());
}

TEST_CASE("RS-27 a search provider's config errors name the key and the fix", "[config][search]") {
  auto unknown = configured(R"({"tools":{"web_search":{"provider":{"mcp_server":"nope","tool":"t"}}}})");
  CHECK(has_error(unknown, "tools.web_search.provider.mcp_server: no mcp.servers entry is named \"nope\""));
  auto both = configured(R"({"tools":{"web_search":{"provider":{"mcp_server":"a","url":"http://x"}}}})");
  CHECK(has_error(both, "tools.web_search.provider.mcp_server: set exactly one of"));
  auto neither = configured(R"({"tools":{"web_search":{"provider":{}}}})");
  CHECK(has_error(neither, "tools.web_search.provider.mcp_server: set exactly one of"));
  auto no_tool = configured(R"({"mcp":{"servers":[{"name":"finder","transport":"http","url":"http://127.0.0.1:9/mcp"}]},)"
                            R"("tools":{"file_search":{"provider":{"mcp_server":"finder"}}}})");
  CHECK(has_error(no_tool, "tools.file_search.provider.tool: required with mcp_server"));
  auto bad_url = configured(R"({"tools":{"web_search":{"provider":{"url":"ftp://x"}}}})");
  CHECK(has_error(bad_url, "tools.web_search.provider.url: expected a URL"));
  auto no_env = configured(R"({"tools":{"web_search":{"provider":{"url":"http://x","bearer_token_env":"MISSING"}}}})");
  CHECK(has_error(no_env, "tools.web_search.provider.bearer_token_env: the environment variable MISSING is not set"));
  auto typo = configured(R"({"tools":{"web_search":{"provider":{"url":"http://x","timeout":3}}}})");
  CHECK(has_error(typo, "tools.web_search.provider.timeout"));
  auto other = configured(R"({"tools":{"image_search":{}}})");
  CHECK(has_error(other, "tools.image_search"));
}
