// Unit tests of MCP as troupe speaks it (AS-61..AS-65): server config, the JSON-RPC messages troupe
// sends, classification of what servers send, tool lists and the text a tools/call result becomes.
#include "protocol/mcp.hpp"

#include "protocol/json.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace troupe::protocol;

namespace {

std::vector<std::string> servers_errors(std::string_view text) {
  std::vector<mcp_server_config> out;
  return parse_mcp_servers(text, out);
}

json::document parsed(const std::string& text) {
  auto doc = json::parse(text);
  REQUIRE(doc);
  REQUIRE(doc->IsObject());
  return std::move(*doc);
}

const json::value& at(const json::value& obj, const char* key) {
  auto v = json::member(obj, key);
  INFO("member " << key << " of " << json::serialize(obj));
  REQUIRE(v);
  return *v;
}

} // namespace

// --- configuration (AS-61) ---

TEST_CASE("a minimal stdio server gets the documented defaults", "[mcp]") {
  // AS-61: transport stdio, isolation shared, idle_timeout 300, max_instances 10, no own timeout.
  std::vector<mcp_server_config> out;
  auto errors = parse_mcp_servers(R"([{"name":"pska","command":"/opt/pska/bin/pska","args":["mcp-server"]}])", out);
  REQUIRE(errors.empty());
  REQUIRE(out.size() == 1);
  auto& s = out[0];
  CHECK(s.name == "pska");
  CHECK(s.command == "/opt/pska/bin/pska");
  CHECK(s.args == std::vector<std::string>{"mcp-server"});
  CHECK(s.env.empty());
  CHECK(s.transport == "stdio");
  CHECK(s.isolation == "shared");
  CHECK(s.idle_timeout == 300);
  CHECK(s.max_instances == 10);
  CHECK_FALSE(s.timeout_seconds);
  CHECK(s.description.empty());
}

TEST_CASE("every field of a server entry is read", "[mcp]") {
  // AS-61: {name, command, args, env, transport, url, isolation, idle_timeout, max_instances,
  // timeout_seconds, description}.
  std::vector<mcp_server_config> out;
  auto errors = parse_mcp_servers(R"([
    {"name":"files","command":"mcp-files","args":["--root","/srv"],"env":{"A":"1","B":""},
     "isolation":"lazy_per_user","idle_timeout":0,"max_instances":3,"timeout_seconds":2.5,
     "description":"file tools"},
    {"name":"remote-1","transport":"http","url":"https://mcp.example.com/mcp","isolation":"per_user"}])",
                                  out);
  REQUIRE(errors.empty());
  REQUIRE(out.size() == 2);
  CHECK(out[0].args == std::vector<std::string>{"--root", "/srv"});
  CHECK(out[0].env == std::map<std::string, std::string>{{"A", "1"}, {"B", ""}});
  CHECK(out[0].isolation == "lazy_per_user");
  CHECK(out[0].idle_timeout == 0);
  CHECK(out[0].max_instances == 3);
  REQUIRE(out[0].timeout_seconds);
  CHECK(*out[0].timeout_seconds == 2.5);
  CHECK(out[0].description == "file tools");
  CHECK(out[1].transport == "http");
  CHECK(out[1].url == "https://mcp.example.com/mcp");
  CHECK(out[1].isolation == "per_user");
  CHECK(out[1].command.empty());
}

TEST_CASE("no servers is valid: empty text, null and an empty array", "[mcp]") {
  // AS-65: with none configured, MCP is simply ready; the config must accept that.
  for (auto text : {"", "  \n", "null", "[]"}) {
    std::vector<mcp_server_config> out;
    INFO(text);
    CHECK(parse_mcp_servers(text, out).empty());
    CHECK(out.empty());
  }
}

TEST_CASE("a null member keeps its default, as everywhere in the config", "[mcp]") {
  std::vector<mcp_server_config> out;
  REQUIRE(parse_mcp_servers(R"([{"name":"a","command":"x","isolation":null,"timeout_seconds":null}])", out).empty());
  REQUIRE(out.size() == 1);
  CHECK(out[0].isolation == "shared");
  CHECK_FALSE(out[0].timeout_seconds);
}

TEST_CASE("each wrong field is an error that names its path, what is expected and what was there", "[mcp]") {
  // AS-61 and STYLE.md: `<path>: expected ..., got <json>`.
  struct row {
    const char* members; // added to a valid stdio entry
    const char* error;
  };
  const row rows[] = {
    {R"("transport":"ws")", R"(mcp.servers[0].transport: expected one of stdio, http, got "ws")"},
    {R"("transport":1)", R"(mcp.servers[0].transport: expected one of stdio, http, got 1)"},
    {R"("isolation":"per_tenant")",
     R"(mcp.servers[0].isolation: expected one of shared, per_user, lazy_per_user, got "per_tenant")"},
    {R"("idle_timeout":-1)", R"(mcp.servers[0].idle_timeout: expected a number of seconds >= 0, got -1)"},
    {R"("idle_timeout":"5")", R"(mcp.servers[0].idle_timeout: expected a number of seconds >= 0, got "5")"},
    {R"("max_instances":0)", R"(mcp.servers[0].max_instances: expected an integer 1..100000, got 0)"},
    {R"("max_instances":2.5)", R"(mcp.servers[0].max_instances: expected an integer 1..100000, got 2.5)"},
    {R"("max_instances":"3")", R"(mcp.servers[0].max_instances: expected an integer 1..100000, got "3")"},
    {R"("max_instances":10000000000)",
     R"(mcp.servers[0].max_instances: expected an integer 1..100000, got 10000000000)"},
    {R"("timeout_seconds":0)", R"(mcp.servers[0].timeout_seconds: expected a number of seconds > 0, got 0)"},
    {R"("timeout_seconds":-3)", R"(mcp.servers[0].timeout_seconds: expected a number of seconds > 0, got -3)"},
    {R"("timeout_seconds":true)", R"(mcp.servers[0].timeout_seconds: expected a number of seconds > 0, got true)"},
    {R"("env":["A=1"])", R"(mcp.servers[0].env: expected an object of strings, got ["A=1"])"},
    {R"("env":{"A":1})", R"(mcp.servers[0].env.A: expected a string, got 1)"},
    {R"("args":"--root /srv")", R"(mcp.servers[0].args: expected an array of strings, got "--root /srv")"},
    {R"("args":["ok",3])", R"(mcp.servers[0].args[1]: expected a string, got 3)"},
    {R"("description":{})", R"(mcp.servers[0].description: expected a string, got {})"},
    {R"("url":"ftp://x/y")", R"(mcp.servers[0].url: expected a URL starting with http:// or https://, got "ftp://x/y")"},
    {R"("url":"http://")", R"(mcp.servers[0].url: expected a URL starting with http:// or https://, got "http://")"},
    {R"("url":42)", R"(mcp.servers[0].url: expected a string, got 42)"},
  };
  for (auto& r : rows) {
    auto text = std::string(R"([{"name":"s","command":"c",)") + r.members + "}]";
    INFO(text);
    std::vector<mcp_server_config> out;
    auto errors = parse_mcp_servers(text, out);
    REQUIRE(errors.size() == 1);
    CHECK(errors[0] == r.error);
    CHECK(out.empty()); // an entry with an error is not half-used
  }
}

TEST_CASE("a long wrong value is shortened in the error", "[mcp]") {
  auto errors = servers_errors(R"([{"name":"s","command":"c","isolation":")" + std::string(200, 'x') + R"("}])");
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].size() < 160);
  CHECK(errors[0].substr(errors[0].size() - 3) == "...");
}

TEST_CASE("a server name must be a non-empty run of letters, digits, _ and -", "[mcp]") {
  // AS-62: the name prefixes `{server}_{tool}`, which must stay a valid function name.
  struct row {
    const char* entry;
    const char* error; // nullptr: accepted
  };
  const row rows[] = {
    {R"({"name":"pska","command":"c"})", nullptr},
    {R"({"name":"A9_b-c","command":"c"})", nullptr},
    {R"({"name":"9lives","command":"c"})", nullptr},
    {R"({"command":"c"})",
     "mcp.servers[0].name: required: letters, digits, _ and -, starting with a letter or digit"},
    {R"({"name":"","command":"c"})",
     R"(mcp.servers[0].name: expected letters, digits, _ and -, starting with a letter or digit, got "")"},
    {R"({"name":"my server","command":"c"})",
     R"(mcp.servers[0].name: expected letters, digits, _ and -, starting with a letter or digit, got "my server")"},
    {R"({"name":"_x","command":"c"})",
     R"(mcp.servers[0].name: expected letters, digits, _ and -, starting with a letter or digit, got "_x")"},
    {R"({"name":"-x","command":"c"})",
     R"(mcp.servers[0].name: expected letters, digits, _ and -, starting with a letter or digit, got "-x")"},
    {R"({"name":"a.b","command":"c"})",
     R"(mcp.servers[0].name: expected letters, digits, _ and -, starting with a letter or digit, got "a.b")"},
    {R"({"name":"é","command":"c"})",
     R"(mcp.servers[0].name: expected letters, digits, _ and -, starting with a letter or digit, got "é")"},
    {R"({"name":7,"command":"c"})", "mcp.servers[0].name: expected a string, got 7"},
  };
  for (auto& r : rows) {
    INFO(r.entry);
    auto errors = servers_errors(std::string("[") + r.entry + "]");
    if (!r.error)
      CHECK(errors.empty());
    else {
      REQUIRE(errors.size() == 1);
      CHECK(errors[0] == r.error);
    }
  }
}

TEST_CASE("a duplicate server name is an error at the later entry", "[mcp]") {
  // AS-61: names are unique; a duplicate name is a config error.
  std::vector<mcp_server_config> out;
  auto errors = parse_mcp_servers(R"([{"name":"x","command":"a"},{"name":"y","command":"b"},
                                      {"name":"x","command":"c"},{"name":"y","command":"d"}])",
                                  out);
  REQUIRE(errors.size() == 2);
  CHECK(errors[0] == R"(mcp.servers[2].name: duplicate server name "x")");
  CHECK(errors[1] == R"(mcp.servers[3].name: duplicate server name "y")");
  REQUIRE(out.size() == 2);
  CHECK(out[0].command == "a");
  CHECK(out[1].command == "b");
}

TEST_CASE("names differing only in case are distinct servers", "[mcp]") {
  CHECK(servers_errors(R"([{"name":"x","command":"a"},{"name":"X","command":"b"}])").empty());
}

TEST_CASE("a stdio server needs a command and an http server needs a url", "[mcp]") {
  // AS-61: the transport decides what is required.
  struct row {
    const char* entry;
    std::vector<std::string> errors;
  };
  const row rows[] = {
    {R"({"name":"s"})", {"mcp.servers[0].command: required for a stdio server: the program to start"}},
    {R"({"name":"s","transport":"stdio","command":""})",
     {"mcp.servers[0].command: required for a stdio server: the program to start"}},
    {R"({"name":"s","command":5})", {"mcp.servers[0].command: expected a string, got 5"}}, // reported once
    {R"({"name":"s","transport":"http"})",
     {"mcp.servers[0].url: required for an http server: its http:// or https:// endpoint"}},
    {R"({"name":"s","transport":"http","url":""})",
     {R"(mcp.servers[0].url: expected a URL starting with http:// or https://, got "")"}},
    {R"({"name":"s","transport":"http","url":"http://127.0.0.1:9000"})", {}},
    {R"({"name":"s","transport":"http","url":"https://h/mcp","command":"ignored"})", {}},
    {R"({"name":"s","command":"c","url":"http://h"})", {}}, // a stdio server may carry a url
  };
  for (auto& r : rows) {
    INFO(r.entry);
    CHECK(servers_errors(std::string("[") + r.entry + "]") == r.errors);
  }
}

TEST_CASE("mcp.servers itself must be a JSON array of objects", "[mcp]") {
  auto not_array = servers_errors(R"({"name":"x"})");
  REQUIRE(not_array.size() == 1);
  CHECK(not_array[0] == R"(mcp.servers: expected an array of server objects, got {"name":"x"})");

  auto bad_json = servers_errors("[{");
  REQUIRE(bad_json.size() == 1);
  CHECK(bad_json[0].rfind("mcp.servers: invalid JSON at offset 2", 0) == 0);

  std::vector<mcp_server_config> out;
  auto entries = parse_mcp_servers(R"([3,{"name":"ok","command":"c"},"s"])", out);
  REQUIRE(entries.size() == 2);
  CHECK(entries[0] == "mcp.servers[0]: expected an object, got 3");
  CHECK(entries[1] == R"(mcp.servers[2]: expected an object, got "s")");
  REQUIRE(out.size() == 1); // the good entry is still read, so every error shows up in one pass
  CHECK(out[0].name == "ok");
}

TEST_CASE("every error of an entry is reported, not just the first", "[mcp]") {
  auto errors = servers_errors(R"([{"name":"a b","transport":"ws","max_instances":0}])");
  REQUIRE(errors.size() == 4);
  CHECK(errors[0].rfind("mcp.servers[0].name:", 0) == 0);
  CHECK(errors[1].rfind("mcp.servers[0].transport:", 0) == 0);
  CHECK(errors[2].rfind("mcp.servers[0].max_instances:", 0) == 0);
  CHECK(errors[3].rfind("mcp.servers[0].command: required", 0) == 0); // the transport stays stdio
}

TEST_CASE("an http url with a path is used as given and a bare root gets /message", "[mcp]") {
  // AS-61.
  struct row {
    const char* url;
    const char* endpoint;
  };
  const row rows[] = {
    {"http://127.0.0.1:9000", "http://127.0.0.1:9000/message"},
    {"http://127.0.0.1:9000/", "http://127.0.0.1:9000/message"},
    {"https://mcp.example.com", "https://mcp.example.com/message"},
    {"https://mcp.example.com/mcp", "https://mcp.example.com/mcp"},
    {"https://mcp.example.com/mcp/", "https://mcp.example.com/mcp/"},
    {"http://h:1/a/b/message", "http://h:1/a/b/message"},
    {"http://h/message", "http://h/message"},
    {"http://h?key=1", "http://h/message?key=1"},
    {"http://h/?key=1", "http://h/message?key=1"},
    {"http://h/mcp?key=1", "http://h/mcp?key=1"},
    {"http://[::1]:8080", "http://[::1]:8080/message"},
    {"http://user:pw@h:1", "http://user:pw@h:1/message"},
  };
  for (auto& r : rows) {
    INFO(r.url);
    CHECK(mcp_endpoint_url(r.url) == r.endpoint);
  }
}

// --- messages troupe sends (AS-62) ---

TEST_CASE("initialize offers protocol 2025-03-26, no capabilities and troupe's client info", "[mcp]") {
  auto line = mcp_initialize_request(1, "9.8.7");
  CHECK(line.find('\n') == std::string::npos);
  auto doc = parsed(line);
  CHECK(at(doc, "jsonrpc") == "2.0");
  CHECK(at(doc, "id") == 1);
  CHECK(at(doc, "method") == "initialize");
  auto& params = at(doc, "params");
  CHECK(at(params, "protocolVersion") == "2025-03-26");
  CHECK(at(params, "capabilities").IsObject());
  CHECK(at(params, "capabilities").MemberCount() == 0);
  CHECK(at(at(params, "clientInfo"), "name") == "troupe");
  CHECK(at(at(params, "clientInfo"), "version") == "9.8.7");

  auto plain = parsed(mcp_initialize_request(42));
  CHECK(at(plain, "id") == 42);
  CHECK(at(at(at(plain, "params"), "clientInfo"), "version") == mcp_default_client_version);
}

TEST_CASE("the initialized notification has a method and no id", "[mcp]") {
  auto doc = parsed(mcp_initialized_notification());
  CHECK(at(doc, "jsonrpc") == "2.0");
  CHECK(at(doc, "method") == "notifications/initialized");
  CHECK_FALSE(json::member(doc, "id"));
  CHECK(parse_jsonrpc(mcp_initialized_notification()).type == jsonrpc_message::kind::notification);
}

TEST_CASE("tools/list sends the cursor only when there is one", "[mcp]") {
  auto first = parsed(mcp_tools_list_request(2, std::nullopt));
  CHECK(at(first, "jsonrpc") == "2.0");
  CHECK(at(first, "id") == 2);
  CHECK(at(first, "method") == "tools/list");
  CHECK(at(first, "params").IsObject());
  CHECK_FALSE(json::member(at(first, "params"), "cursor"));

  auto empty = parsed(mcp_tools_list_request(3, std::string()));
  CHECK_FALSE(json::member(at(empty, "params"), "cursor"));

  auto next = parsed(mcp_tools_list_request(4, std::string("page \"2\"")));
  CHECK(at(at(next, "params"), "cursor") == "page \"2\"");
}

TEST_CASE("tools/call carries the tool's own name and the arguments as an object on one line", "[mcp]") {
  auto line = mcp_tools_call_request(7, "pska_search", "{\n  \"query\": \"caf\",\n  \"limit\": 12345678901234567\n}");
  CHECK(line.find('\n') == std::string::npos); // stdio framing is one message per line
  auto doc = parsed(line);
  CHECK(at(doc, "jsonrpc") == "2.0");
  CHECK(at(doc, "id") == 7);
  CHECK(at(doc, "method") == "tools/call");
  auto& params = at(doc, "params");
  CHECK(at(params, "name") == "pska_search");
  auto& args = at(params, "arguments");
  CHECK(at(args, "query") == "caf");
  CHECK(at(args, "limit").GetInt64() == 12345678901234567);
}

TEST_CASE("tools/call arguments that are empty or not an object are sent as {}", "[mcp]") {
  for (auto args : {"", "   ", "[1,2]", "\"x\"", "{broken", "null"}) {
    INFO(args);
    auto doc = parsed(mcp_tools_call_request(1, "t", args));
    auto& a = at(at(doc, "params"), "arguments");
    CHECK(a.IsObject());
    CHECK(a.MemberCount() == 0);
  }
}

TEST_CASE("arguments that are not a JSON object are refused with the reason, blank ones are no arguments",
          "[mcp]") { // RS-25, issue 15 finding 13
  CHECK_FALSE(tool_arguments_error("{\"a\":[1,{\"b\":null}]}"));
  CHECK_FALSE(tool_arguments_error(" \n{}\n "));
  CHECK_FALSE(tool_arguments_error(""));
  CHECK_FALSE(tool_arguments_error("  "));
  auto broken = tool_arguments_error("{\"path\": \"/tmp/x\"");
  REQUIRE(broken);
  CHECK(*broken == "arguments are not valid JSON: Missing a comma or '}' after an object member. (at byte 17)");
  CHECK(tool_arguments_error("{\"a\":1} trailing")->rfind("arguments are not valid JSON: ", 0) == 0);
  for (auto not_object : {"[1,2]", "\"x\"", "null", "7"}) {
    INFO(not_object);
    CHECK(tool_arguments_error(not_object) == std::optional<std::string>("arguments must be a JSON object"));
  }
  // Nesting far beyond any stack: parsed without recursion.
  std::string deep(200000, '[');
  CHECK(tool_arguments_error("{\"a\":" + deep)->rfind("arguments are not valid JSON: ", 0) == 0);
}

TEST_CASE("a cancellation names troupe's request id and the reason", "[mcp]") {
  auto doc = parsed(mcp_cancelled_notification(12, "run cancelled"));
  CHECK(at(doc, "jsonrpc") == "2.0");
  CHECK(at(doc, "method") == "notifications/cancelled");
  CHECK_FALSE(json::member(doc, "id"));
  CHECK(at(at(doc, "params"), "requestId") == 12);
  CHECK(at(at(doc, "params"), "reason") == "run cancelled");

  auto bare = parsed(mcp_cancelled_notification(13, ""));
  CHECK(at(at(bare, "params"), "requestId") == 13);
  CHECK_FALSE(json::member(at(bare, "params"), "reason"));
}

TEST_CASE("a server's ping is answered with an empty result under the same id", "[mcp]") {
  struct row {
    const char* request;
    const char* answer;
  };
  const row rows[] = {
    {R"({"jsonrpc":"2.0","id":5,"method":"ping"})", R"({"jsonrpc":"2.0","id":5,"result":{}})"},
    {R"({"jsonrpc":"2.0","id":"srv-1","method":"ping","params":{}})", R"({"jsonrpc":"2.0","id":"srv-1","result":{}})"},
    {R"({"jsonrpc":"2.0","id":"7","method":"ping"})", R"({"jsonrpc":"2.0","id":"7","result":{}})"},
  };
  for (auto& r : rows) {
    INFO(r.request);
    CHECK(mcp_answer_to_server_request(r.request) == r.answer);
  }
}

TEST_CASE("any other server request is answered with method not found", "[mcp]") {
  // troupe declares no client capabilities, so roots, sampling and elicitation are unknown to it.
  for (auto method : {"roots/list", "sampling/createMessage", "elicitation/create", "x"}) {
    INFO(method);
    auto answer = mcp_answer_to_server_request(std::string(R"({"jsonrpc":"2.0","id":"r9","method":")") + method
                                               + R"(","params":{}})");
    auto doc = parsed(answer);
    CHECK(at(doc, "jsonrpc") == "2.0");
    CHECK(at(doc, "id") == "r9");
    CHECK_FALSE(json::member(doc, "result"));
    CHECK(at(at(doc, "error"), "code") == -32601);
    CHECK(at(at(doc, "error"), "message") == "Method not found");
  }
}

TEST_CASE("notifications, responses and garbage get no answer", "[mcp]") {
  for (auto line : {R"({"jsonrpc":"2.0","method":"notifications/tools/list_changed"})",
                    R"({"jsonrpc":"2.0","id":1,"result":{}})", "not json", "[]", ""}) {
    INFO(line);
    CHECK(mcp_answer_to_server_request(line).empty());
  }
}

// --- what servers send ---

TEST_CASE("parse_jsonrpc classifies responses, errors, requests and notifications", "[mcp]") {
  using k = jsonrpc_message::kind;
  struct row {
    const char* line;
    k type;
    std::optional<int64_t> id;
    const char* method;
    const char* result;
    const char* error;
  };
  const row rows[] = {
    {R"({"jsonrpc":"2.0","id":3,"result":{"tools":[]}})", k::response, 3, "", R"({"tools":[]})", ""},
    {R"({"jsonrpc":"2.0","id":"42","result":{}})", k::response, 42, "", "{}", ""},
    {R"({"jsonrpc":"2.0","id":"abc","result":{}})", k::response, std::nullopt, "", "{}", ""},
    {R"({"jsonrpc":"2.0","id":4,"result":null})", k::response, 4, "", "null", ""},
    {R"({"jsonrpc":"2.0","id":-2,"result":1})", k::response, -2, "", "1", ""},
    {R"({"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"Unknown tool: x"}})", k::error, 5, "", "null",
     "Unknown tool: x (code -32602)"},
    {R"({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}})", k::error, std::nullopt, "",
     "null", "Parse error (code -32700)"},
    {R"({"jsonrpc":"2.0","id":6,"error":{"message":"no code"}})", k::error, 6, "", "null", "no code"},
    {R"({"jsonrpc":"2.0","id":6,"error":{"code":1}})", k::error, 6, "", "null", "unknown error (code 1)"},
    {R"({"jsonrpc":"2.0","id":6,"error":"boom"})", k::error, 6, "", "null", R"(malformed error "boom")"},
    {R"({"jsonrpc":"2.0","id":9,"method":"ping"})", k::request, 9, "ping", "null", ""},
    {R"({"jsonrpc":"2.0","id":"s-1","method":"roots/list"})", k::request, std::nullopt, "roots/list", "null", ""},
    {R"({"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}})", k::notification,
     std::nullopt, "notifications/progress", "null", ""},
    {R"( {"method":"notifications/message"} )", k::notification, std::nullopt, "notifications/message", "null", ""},
  };
  for (auto& r : rows) {
    INFO(r.line);
    auto m = parse_jsonrpc(r.line);
    CHECK(m.type == r.type);
    CHECK(m.id == r.id);
    CHECK(m.method == r.method);
    CHECK(m.result == r.result);
    CHECK(m.error == r.error);
  }
}

TEST_CASE("parse_jsonrpc only takes a digit string id that fits an integer", "[mcp]") {
  struct row {
    const char* id;
    std::optional<int64_t> parsed;
  };
  const row rows[] = {
    {R"("0")", 0},
    {R"("007")", 7},
    {R"("123456789012345678")", 123456789012345678},
    {R"("99999999999999999999999")", std::nullopt},
    {R"("")", std::nullopt},
    {R"("-1")", std::nullopt},
    {R"("1a")", std::nullopt},
    {R"(" 1")", std::nullopt},
    {"1.5", std::nullopt},
    {"18446744073709551615", std::nullopt},
  };
  for (auto& r : rows) {
    INFO(r.id);
    auto m = parse_jsonrpc(std::string(R"({"jsonrpc":"2.0","id":)") + r.id + R"(,"result":{}})");
    CHECK(m.type == jsonrpc_message::kind::response);
    CHECK(m.id == r.parsed);
  }
}

TEST_CASE("anything that is not one JSON-RPC object is invalid, with a reason", "[mcp]") {
  struct row {
    std::string line;
    const char* reason_starts;
  };
  const row rows[] = {
    {"", "empty line"},
    {"   \r", "empty line"},
    {"Starting server on stdio...", "not JSON at offset "},
    {R"({"jsonrpc":"2.0","id":1,"result":)", "not JSON at offset "},
    {std::string("{\"id\":1,\"result\":{}}\0garbage", sizeof("{\"id\":1,\"result\":{}}\0garbage") - 1),
     "not JSON at offset 20: a NUL byte"},
    {R"([{"jsonrpc":"2.0","id":1,"result":{}}])", "batches are not supported"},
    {"[]", "batches are not supported"},
    {"42", "expected a JSON-RPC object, got 42"},
    {R"("hello")", R"(expected a JSON-RPC object, got "hello")"},
    {"null", "expected a JSON-RPC object, got null"},
    {"{}", "neither a request, a notification nor a response"},
    {R"({"jsonrpc":"2.0","id":1})", "neither a request, a notification nor a response"},
    {R"({"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}})",
     "a response cannot have both a result and an error"},
    {R"({"jsonrpc":"2.0","result":{}})", "a response needs an id"},
    {R"({"jsonrpc":"2.0","error":{"code":1,"message":"x"}})", "an error needs an id"},
    {R"({"jsonrpc":"2.0","id":null,"result":{}})", "a response needs an id, got null"},
    {R"({"jsonrpc":"2.0","id":null,"method":"ping"})", "a request needs an id, got null"},
    {R"({"jsonrpc":"2.0","id":1,"method":"ping","result":{}})", "a message cannot have both a method and a result"},
    {R"({"jsonrpc":"2.0","id":{"a":1},"result":{}})", R"(id: expected a string or a number, got {"a":1})"},
    {R"({"jsonrpc":"2.0","id":true,"method":"ping"})", "id: expected a string or a number, got true"},
    {R"({"jsonrpc":"2.0","method":7})", "method: expected a string, got 7"},
  };
  for (auto& r : rows) {
    INFO(r.line);
    auto m = parse_jsonrpc(r.line);
    CHECK(m.type == jsonrpc_message::kind::invalid);
    CHECK(m.error.rfind(r.reason_starts, 0) == 0);
  }
}

TEST_CASE("a 1 MB line is classified like any other", "[mcp]") {
  // Bounds on line length belong to the transport; the parser must not choke on a big result.
  std::string text(1024 * 1024, 'x');
  auto line = R"({"jsonrpc":"2.0","id":11,"result":{"content":[{"type":"text","text":")" + text + R"("}]}})";
  auto m = parse_jsonrpc(line);
  REQUIRE(m.type == jsonrpc_message::kind::response);
  CHECK(m.id == 11);
  CHECK(mcp_tool_result_text(m.result) == text);

  auto cut = parse_jsonrpc(line.substr(0, line.size() - 3)); // truncated mid-message
  CHECK(cut.type == jsonrpc_message::kind::invalid);
  CHECK(cut.error.rfind("not JSON at offset ", 0) == 0);
}

TEST_CASE("a tools/list result gives names, descriptions, schemas and annotations", "[mcp]") {
  auto page = parse_tools_list(R"({"tools":[
    {"name":"pska_search","description":"Search the corpus",
     "inputSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]},
     "annotations":{"readOnlyHint":true,"idempotentHint":true,"destructiveHint":false,"openWorldHint":false}},
    {"name":"write","annotations":{"title":"Write","destructiveHint":true}},
    {"name":"odd","inputSchema":"not an object","annotations":"nope"}
  ]})");
  REQUIRE(page.tools.size() == 3);
  CHECK_FALSE(page.next_cursor);

  auto& search = page.tools[0];
  CHECK(search.name == "pska_search");
  CHECK(search.description == "Search the corpus");
  auto schema = parsed(search.input_schema);
  CHECK(at(schema, "type") == "object");
  CHECK(at(at(at(schema, "properties"), "q"), "type") == "string");
  CHECK(at(schema, "required")[0] == "q");
  CHECK(search.read_only);
  CHECK(search.idempotent);
  CHECK_FALSE(search.destructive);
  CHECK_FALSE(search.open_world);

  // Missing hints take MCP's defaults: not read-only, not idempotent, destructive, open world.
  auto& write = page.tools[1];
  CHECK(write.description.empty());
  CHECK(write.input_schema == R"({"type":"object","properties":{}})");
  CHECK_FALSE(write.read_only);
  CHECK_FALSE(write.idempotent);
  CHECK(write.destructive);
  CHECK(write.open_world);

  auto& odd = page.tools[2];
  CHECK(odd.input_schema == R"({"type":"object","properties":{}})");
  CHECK_FALSE(odd.read_only);
}

TEST_CASE("tools without a usable name are skipped", "[mcp]") {
  auto page = parse_tools_list(R"({"tools":[{"description":"anonymous"},{"name":""},{"name":3},"x",{"name":"ok"}]})");
  REQUIRE(page.tools.size() == 1);
  CHECK(page.tools[0].name == "ok");
}

TEST_CASE("the next cursor is kept only when it is a non-empty string", "[mcp]") {
  struct row {
    const char* result;
    std::optional<std::string> cursor;
  };
  const row rows[] = {
    {R"({"tools":[],"nextCursor":"page-2"})", std::string("page-2")},
    {R"({"tools":[],"nextCursor":""})", std::nullopt},
    {R"({"tools":[],"nextCursor":null})", std::nullopt},
    {R"({"tools":[],"nextCursor":2})", std::nullopt},
    {R"({"tools":[]})", std::nullopt},
  };
  for (auto& r : rows) {
    INFO(r.result);
    CHECK(parse_tools_list(r.result).next_cursor == r.cursor);
  }
}

TEST_CASE("two pages of tools/list chain through the cursor", "[mcp]") {
  // What the server actor does: ask, read nextCursor, ask again with it, stop when there is none.
  auto first = parse_tools_list(R"({"tools":[{"name":"a"}],"nextCursor":"c1"})");
  REQUIRE(first.next_cursor);
  auto request = parsed(mcp_tools_list_request(3, first.next_cursor));
  CHECK(at(at(request, "params"), "cursor") == "c1");
  auto second = parse_tools_list(R"({"tools":[{"name":"b"}]})");
  CHECK_FALSE(second.next_cursor);
  CHECK(first.tools[0].name == "a");
  CHECK(second.tools[0].name == "b");
}

TEST_CASE("a malformed tools/list result is an empty page", "[mcp]") {
  for (auto text : {"", "garbage", "[]", "null", R"({"tools":{}})", R"({"tools":"x"})"}) {
    INFO(text);
    auto page = parse_tools_list(text);
    CHECK(page.tools.empty());
    CHECK_FALSE(page.next_cursor);
  }
}

TEST_CASE("AS-62 a tools/call result becomes the text the model sees", "[mcp]") {
  // AS-62: text items joined with \n; isError → [MCP_ERROR] <text>.
  struct row {
    const char* result;
    const char* text;
  };
  const row rows[] = {
    {R"({"content":[{"type":"text","text":"hello"}]})", "hello"},
    {R"({"content":[{"type":"text","text":"a"},{"type":"text","text":"b"},{"type":"text","text":""}]})", "a\nb\n"},
    {R"({"content":[{"type":"text","text":"see"},{"type":"image","data":"AAA=","mimeType":"image/png"}]})",
     "see\n[image: image/png, 2 bytes]"},
    {R"({"content":[{"type":"audio","data":"UklG","mimeType":"audio/wav"}]})", "[audio: audio/wav, 3 bytes]"},
    {R"({"content":[{"type":"resource","resource":{"uri":"file:///a","text":"x"}},{"type":"text","text":"end"}]})",
     "[resource: file:///a]\nx\nend"},
    {R"({"content":[],"structuredContent":{"temperature":21.5,"unit":"C"}})", R"({"temperature":21.5,"unit":"C"})"},
    {R"({"structuredContent":{"n":1}})", R"({"n":1})"},
    {R"({"content":[{"type":"text","text":"{\"n\":1}"}],"structuredContent":{"n":1}})", R"({"n":1})"},
    {R"({"content":[]})", ""},
    {R"({})", ""},
    {R"({"content":[{"type":"text","text":"no such file"}],"isError":true})", "[MCP_ERROR] no such file"},
    {R"({"content":[],"isError":true})", "[MCP_ERROR] tool reported an error"},
    {R"({"isError":true})", "[MCP_ERROR] tool reported an error"},
    {R"({"content":[],"structuredContent":{"code":"E1"},"isError":true})", R"([MCP_ERROR] {"code":"E1"})"},
    {R"({"content":[{"type":"text","text":"fine"}],"isError":false})", "fine"},
    {R"({"content":[{"type":"text","text":"x"}],"isError":"yes"})", "x"},
    {R"({"content":[{"type":"text","text":"line1\nline2"}]})", "line1\nline2"},
    {R"({"content":[{"type":"text"}]})", "[text content]"},
    {"not json", "[MCP_ERROR] malformed tools/call result"},
    {"[1]", "[MCP_ERROR] malformed tools/call result"},
  };
  for (auto& r : rows) {
    INFO(r.result);
    CHECK(mcp_tool_result_text(r.result) == r.text);
  }
}

TEST_CASE("AS-62 non-text MCP content is described in bounded text, never pasted as JSON or base64", "[mcp]") {
  struct row {
    const char* result;
    const char* text;
  };
  const row rows[] = {
    {R"({"content":[{"type":"image","data":"iVBORw0KGgoAAAANSUhEUg==","mimeType":"image/png"}]})",
     "[image: image/png, 16 bytes]"},
    {R"({"content":[{"type":"image","mimeType":"image/jpeg"}]})", "[image: image/jpeg]"},
    {R"({"content":[{"type":"image","data":"AAAA"}]})", "[image: unknown type, 3 bytes]"},
    {R"({"content":[{"type":"resource","resource":{"uri":"file:///r.txt","mimeType":"text/plain","text":"line 1\nline 2"}}]})",
     "[resource: file:///r.txt]\nline 1\nline 2"},
    {R"({"content":[{"type":"resource","resource":{"uri":"file:///b.bin","mimeType":"application/pdf","blob":"JVBERi0x"}}]})",
     "[resource: file:///b.bin, application/pdf, 6 bytes]"},
    {R"({"content":[{"type":"resource","resource":"x"}]})", "[resource]"},
    {R"({"content":[{"type":"resource_link","uri":"file:///doc.md","name":"doc.md","mimeType":"text/markdown"}]})",
     "[resource_link: file:///doc.md (doc.md)]"},
    {R"({"content":[{"type":"resource_link","uri":"https://x.example/a"}]})", "[resource_link: https://x.example/a]"},
    {R"({"content":[{"type":"hologram","data":"AAAA"}]})", "[hologram content]"},
    {R"({"content":[{"data":"AAAA"}]})", "[content]"},
    {R"({"content":[{"type":"text","text":"a"},{"type":"image","data":"AAAA","mimeType":"image/gif"},{"type":"text","text":"b"}]})",
     "a\n[image: image/gif, 3 bytes]\nb"},
  };
  for (auto& r : rows) {
    INFO(r.result);
    CHECK(mcp_tool_result_text(r.result) == r.text);
  }
  // A megabyte of image data costs the model a few words; a long URI is cut at 512 bytes.
  std::string big(1 << 20, 'A');
  auto text = mcp_tool_result_text(R"({"content":[{"type":"image","mimeType":"image/png","data":")" + big + "\"}]}");
  CHECK(text == "[image: image/png, 786432 bytes]");
  auto uri = "file:///" + std::string(2000, 'u');
  auto link = mcp_tool_result_text(R"({"content":[{"type":"resource_link","uri":")" + uri + "\"}]}");
  CHECK(link == "[resource_link: " + uri.substr(0, 512) + "...]");
}

TEST_CASE("MCP tools are registered as server_tool", "[mcp]") {
  // AS-62: `pska` + `pska_search` → `pska_pska_search`.
  struct row {
    const char* server;
    const char* tool;
    const char* name;
  };
  const row rows[] = {
    {"pska", "pska_search", "pska_pska_search"},
    {"files", "read-file", "files_read-file"},
    {"fs", "dir/list", "fs_dir_list"},   // a character a function name cannot hold becomes _
    {"fs", "a.b c", "fs_a_b_c"},
    {"x", "", "x_"},
  };
  for (auto& r : rows) {
    INFO(r.server << " + " << r.tool);
    CHECK(mcp_registered_name(r.server, r.tool) == r.name);
  }
}

TEST_CASE("invalid UTF-8 in an MCP tool result reaches the model as U+FFFD", "[mcp][hostile]") { // issue 15 #14
  auto text = mcp_tool_result_text("{\"content\":[{\"type\":\"text\",\"text\":\"ok \xff\xfe end\"}]}");
  CHECK(text == "ok \xEF\xBF\xBD\xEF\xBF\xBD end");
}
