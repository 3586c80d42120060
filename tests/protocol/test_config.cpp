// Configuration: defaults, environment and --set overrides, errors that name the JSON path.
#include "protocol/config.hpp"
#include "protocol/config_reader.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

#include <map>
#include <set>

using namespace troupe::protocol;

namespace {

env_lookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

config_result parse(std::string_view text, std::map<std::string, std::string> env = {},
                    std::vector<std::string> set = {}) {
  return parse_config(text, set, env_of(std::move(env)));
}

} // namespace

TEST_CASE("an empty file gives the shared defaults of DESIGN.md", "[config]") {
  auto r = parse("");
  REQUIRE(r.ok());
  auto c = r.value;
  finalize(c);
  CHECK(c.service.host == "127.0.0.1");
  CHECK(c.service.port == 18741);
  CHECK(c.service.max_body_bytes == 10 * 1024 * 1024);
  CHECK(c.service.sse_heartbeat_seconds == 15);
  CHECK(c.model.provider == "scripted");
  CHECK(c.model.max_retries == 2);
  CHECK(c.model.timeout_seconds == 600);
  CHECK(c.react.max_iterations == 20);
  CHECK(c.store_path == "./var/troupe.db");
  CHECK(c.workspaces_root == "./var/workspaces");
}

TEST_CASE("errors name the JSON path, what is expected and what was there", "[config]") {
  auto r = parse(R"({"service":{"port":"x","max_body_bytes":-1},"model":{"provider":"llama","stream":"yes"},
                     "react":{"max_iterations":0}})");
  REQUIRE(r.errors.size() == 5);
  CHECK(r.errors[0] == R"(service.port: expected an integer 0..65535, got "x")");
  CHECK(r.errors[1].rfind("service.max_body_bytes: expected an integer 1..", 0) == 0);
  CHECK(r.errors[2] == R"(model.provider: expected one of scripted, openai, got "llama")");
  CHECK(r.errors[3] == R"(model.stream: expected true or false, got "yes")");
  CHECK(r.errors[4].rfind("react.max_iterations: expected an integer 1..", 0) == 0);
}

TEST_CASE("the Responses executor's limits default to the spec's and are read from their sections", "[config]") {
  auto defaults = parse("");
  REQUIRE(defaults.ok());
  CHECK(defaults.value.responses.max_rounds == 10); // RS-23
  CHECK(defaults.value.responses.max_concurrent_gateway_calls == 5);
  CHECK(defaults.value.responses.gateway_tool_timeout == 60);
  CHECK(defaults.value.responses.max_tool_output_bytes == 1024 * 1024);
  CHECK(defaults.value.responses.compact_default_threshold == 100000);
  CHECK(defaults.value.responses.max_summary_tokens == 4096);
  CHECK(defaults.value.responses.background_max_active == 64);
  CHECK(defaults.value.responses.client_stall_timeout == 60);
  CHECK(defaults.value.responses.outbound_queue_events == 64);
  auto r = parse(R"({"executor":{"max_rounds":3,"max_concurrent_gateway_calls":2,"gateway_tool_timeout":1.5,
                     "max_tool_output_bytes":4096},"compaction":{"default_threshold":500,"max_summary_tokens":256},
                     "background":{"max_active":8},"stream":{"client_stall_timeout":5,
                     "outbound_queue_events":16}})");
  REQUIRE(r.ok());
  CHECK(r.value.responses.max_rounds == 3);
  CHECK(r.value.responses.max_concurrent_gateway_calls == 2);
  CHECK(r.value.responses.gateway_tool_timeout == 1.5);
  CHECK(r.value.responses.max_tool_output_bytes == 4096);
  CHECK(r.value.responses.compact_default_threshold == 500);
  CHECK(r.value.responses.max_summary_tokens == 256);
  CHECK(r.value.responses.background_max_active == 8);
  CHECK(r.value.responses.client_stall_timeout == 5);
  CHECK(r.value.responses.outbound_queue_events == 16);
  auto bad = parse(R"({"executor":{"max_rounds":0}})");
  REQUIRE(bad.errors.size() == 1);
  CHECK(bad.errors[0].rfind("executor.max_rounds: expected an integer 1..", 0) == 0);
}

TEST_CASE("a section that is not an object is an error at its path", "[config]") {
  auto r = parse(R"({"service":[1]})");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0] == "service: expected an object, got [1]");
}

TEST_CASE("the environment beats the file", "[config]") {
  auto r = parse(R"({"data_dir":"/file","model":{"name":"from-file","provider":"scripted"}})",
                 {{"TROUPE_DATA_DIR", "/env"},
                  {"TROUPE_MODEL", "m"},
                  {"TROUPE_MODEL_PROVIDER", "openai"},
                  {"TROUPE_MODEL_BASE_URL", "http://127.0.0.1:11434/v1"},
                  {"TROUPE_MODEL_API_KEY", "k"}});
  REQUIRE(r.ok());
  CHECK(r.value.data_dir == "/env");
  CHECK(r.value.model.name == "m");
  CHECK(r.value.model.provider == "openai");
  CHECK(r.value.model.base_url == "http://127.0.0.1:11434/v1");
  CHECK(r.value.model.api_key == "k");
}

TEST_CASE("service tokens come from the file, its alias and the environment at once", "[config]") { // AS-3, AS-89
  auto r = parse(R"({"service":{"service_token":" A ","token":"C"}})", {{"FASTREACT_SERVICE_TOKEN", "B"}});
  REQUIRE(r.ok());
  CHECK(r.value.service.service_tokens == std::vector<std::string>{"A", "C", "B"});
}

TEST_CASE("model.api_key_env names the variable holding the key", "[config]") {
  auto r = parse(R"({"model":{"api_key_env":"MY_KEY"}})", {{"MY_KEY", "sk-1"}});
  REQUIRE(r.ok());
  CHECK(r.value.model.api_key == "sk-1");
}

TEST_CASE("an openai provider without a base URL says how to set one", "[config]") {
  auto r = parse(R"({"model":{"provider":"openai"}})");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].find("TROUPE_MODEL_BASE_URL") != std::string::npos);
}

TEST_CASE("--set overrides any key with a JSON value or a plain string", "[config]") {
  auto r = parse(R"({"service":{"port":1}})", {}, {"service.port=9000", "service.host=0.0.0.0", "react.max_iterations=3"});
  REQUIRE(r.ok());
  CHECK(r.value.service.port == 9000);
  CHECK(r.value.service.host == "0.0.0.0");
  CHECK(r.value.react.max_iterations == 3);
  CHECK_FALSE(parse("", {}, {"no-equals-sign"}).ok());
}

TEST_CASE("request-declared MCP servers are allowed only when mcp.allow_request_servers says so, to mcp.allowed_hosts",
          "[config]") { // RS-30
  auto r = parse(R"({"mcp":{"allow_request_servers":true,"allowed_hosts":["mcp.example.com"],"connect_timeout":5}})");
  REQUIRE(r.ok());
  CHECK(r.value.mcp.allow_request_servers);
  CHECK(r.value.mcp.allowed_hosts == std::vector<std::string>{"mcp.example.com"});
  CHECK(r.value.mcp.connect_timeout_seconds == 5);
  auto bad = parse(R"({"mcp":{"allow_request_servers":"yes","connect_timeout":0}})");
  CHECK(bad.errors.size() == 2);
}

TEST_CASE("invalid JSON is reported with its offset", "[config]") {
  auto r = parse("{\"service\":");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].find("invalid JSON at offset") != std::string::npos);
}

TEST_CASE("MCP servers are read from mcp.servers with their isolation", "[config]") { // AS-61, AS-63
  auto r = parse(R"({"mcp":{"call_timeout_seconds":30,"servers":[
    {"name":"everything","command":"npx","args":["-y","@modelcontextprotocol/server-everything"]},
    {"name":"docs","transport":"http","url":"http://127.0.0.1:3001/mcp","timeout_seconds":5},
    {"name":"mine","command":"x","isolation":"lazy_per_user","idle_timeout":60,"max_instances":2}]}})");
  REQUIRE(r.ok());
  CHECK(r.value.mcp.call_timeout_seconds == 30);
  REQUIRE(r.value.mcp.servers.size() == 3);
  CHECK(r.value.mcp.servers[1].timeout_seconds == std::optional<double>(5));
  CHECK(r.value.mcp.servers[2].isolation == "lazy_per_user");
  CHECK(r.value.mcp.servers[2].max_instances == 2);
  CHECK_FALSE(r.value.mcp.allow_request_servers);
  CHECK(r.value.mcp.connect_timeout_seconds == 30);
  auto dup = parse(R"({"mcp":{"servers":[{"name":"a","command":"x"},{"name":"a","command":"y"}]}})");
  REQUIRE(dup.errors.size() == 1);
  CHECK(dup.errors[0] == R"(mcp.servers[1].name: duplicate server name "a")");
}

TEST_CASE("without model.upstreams the default upstream serves every model name", "[config][routing]") {
  auto r = parse("");
  REQUIRE(r.ok());
  CHECK(r.value.model.models.any);
  CHECK(r.value.model.upstreams.empty());
}

TEST_CASE("model.upstreams entries are read with Appendix A's defaults", "[config][routing]") {
  auto r = parse(R"({"model":{"models":["scripted"],"upstreams":[
    {"name":"vllm","protocol":"responses","base_url":"http://127.0.0.1:8000/v1","models":["qwen3","llama"]},
    {"name":"rest","protocol":"chat_completions","base_url":"https://api.example.com/v1","models":"*",
     "api_key":"sk-x","stream":false,"developer_role":"developer","replay_reasoning":true,
     "max_tokens_field":"max_completion_tokens","timeout_seconds":30}]}})");
  REQUIRE(r.ok());
  auto& m = r.value.model;
  CHECK_FALSE(m.models.any);
  CHECK(m.models.names == std::vector<std::string>{"scripted"});
  REQUIRE(m.upstreams.size() == 2);
  auto& a = m.upstreams[0];
  CHECK(a.name == "vllm");
  CHECK(a.protocol == "responses");
  CHECK(a.base_url == "http://127.0.0.1:8000/v1");
  CHECK_FALSE(a.models.any);
  CHECK(a.models.names == std::vector<std::string>{"qwen3", "llama"});
  CHECK(a.api_key.empty());
  CHECK(a.stream);
  CHECK(a.developer_role == "system");
  CHECK_FALSE(a.replay_reasoning);
  CHECK(a.max_tokens_field == "max_tokens");
  CHECK(a.timeout_seconds == 600);
  auto& b = m.upstreams[1];
  CHECK(b.models.any);
  CHECK(b.api_key == "sk-x");
  CHECK_FALSE(b.stream);
  CHECK(b.developer_role == "developer");
  CHECK(b.replay_reasoning);
  CHECK(b.max_tokens_field == "max_completion_tokens");
  CHECK(b.timeout_seconds == 30);
}

TEST_CASE("an upstream's api_key_env names the variable holding its key, and api_key wins over it",
          "[config][routing]") {
  auto r = parse(R"({"model":{"upstreams":[
    {"name":"a","protocol":"responses","base_url":"http://h/v1","models":"*","api_key_env":"A_KEY"},
    {"name":"b","protocol":"responses","base_url":"http://h/v1","models":"*","api_key_env":"A_KEY","api_key":"own"},
    {"name":"c","protocol":"responses","base_url":"http://h/v1","models":"*","api_key_env":"UNSET"}]}})",
                 {{"A_KEY", "sk-a"}});
  REQUIRE(r.ok());
  CHECK(r.value.model.upstreams[0].api_key == "sk-a");
  CHECK(r.value.model.upstreams[1].api_key == "own");
  CHECK(r.value.model.upstreams[2].api_key.empty());
}

TEST_CASE("model.upstreams can be given with --set as JSON", "[config][routing]") {
  auto r = parse("", {}, {R"(model.upstreams=[{"name":"a","protocol":"chat_completions","base_url":"http://h/v1","models":["m"]}])",
                          R"(model.models=[])"});
  REQUIRE(r.ok());
  REQUIRE(r.value.model.upstreams.size() == 1);
  CHECK(r.value.model.upstreams[0].models.names == std::vector<std::string>{"m"});
  CHECK_FALSE(r.value.model.models.any); // an empty default list: only the entries serve /v1/responses
  CHECK(r.value.model.models.names.empty());
}

TEST_CASE("an upstream entry's missing required fields are each named with what to write", "[config][routing]") {
  auto r = parse(R"({"model":{"upstreams":[{}]}})");
  REQUIRE(r.errors.size() == 4);
  CHECK(r.errors[0] == "model.upstreams[0].name: required: a name for this upstream, unique among model.upstreams");
  CHECK(r.errors[1] == R"(model.upstreams[0].protocol: required: "responses" or "chat_completions")");
  CHECK(r.errors[2] == "model.upstreams[0].base_url: required: the upstream's URL, e.g. http://127.0.0.1:8000/v1");
  CHECK(r.errors[3]
        == R"(model.upstreams[0].models: required: "*" for every model or an array of the model names this upstream serves)");
}

TEST_CASE("an upstream entry's bad values name their path, what is expected and what was there", "[config][routing]") {
  auto r = parse(R"({"model":{"upstreams":[
    {"name":"a","protocol":"responses","base_url":"http://h/v1","models":"*"},
    {"name":"b","protocol":"grpc","base_url":"ftp://h","models":"qwen3","stream":"yes",
     "developer_role":"assistant","replay_reasoning":1,"max_tokens_field":"tokens","timeout_seconds":0}]}})");
  REQUIRE(r.errors.size() == 8);
  CHECK(r.errors[0] == R"(model.upstreams[1].protocol: expected one of responses, chat_completions, got "grpc")");
  CHECK(r.errors[1] == R"(model.upstreams[1].base_url: expected a URL starting with http:// or https://, got "ftp://h")");
  CHECK(r.errors[2]
        == R"(model.upstreams[1].models: expected "*" (every model) or an array of model names such as ["qwen3"], got "qwen3")");
  CHECK(r.errors[3] == R"(model.upstreams[1].stream: expected true or false, got "yes")");
  CHECK(r.errors[4] == R"(model.upstreams[1].developer_role: expected one of system, developer, got "assistant")");
  CHECK(r.errors[5] == "model.upstreams[1].replay_reasoning: expected true or false, got 1");
  CHECK(r.errors[6]
        == R"(model.upstreams[1].max_tokens_field: expected one of max_tokens, max_completion_tokens, got "tokens")");
  CHECK(r.errors[7] == "model.upstreams[1].timeout_seconds: expected a number of seconds >= 0.001, got 0");
}

TEST_CASE("model.upstreams must be an array of objects with unique, non-empty names", "[config][routing]") {
  auto not_array = parse(R"({"model":{"upstreams":{"name":"a"}}})");
  REQUIRE(not_array.errors.size() == 1);
  CHECK(not_array.errors[0] == R"(model.upstreams: expected an array of upstream objects, got {"name":"a"})");
  auto r = parse(R"({"model":{"upstreams":[3,
    {"name":"a","protocol":"responses","base_url":"http://h/v1","models":"*"},
    {"name":"a","protocol":"responses","base_url":"http://h/v1","models":"*"},
    {"name":"","protocol":"responses","base_url":"http://h/v1","models":"*"}]}})");
  REQUIRE(r.errors.size() == 3);
  CHECK(r.errors[0] == "model.upstreams[0]: expected an object, got 3");
  CHECK(r.errors[1] == R"(model.upstreams[2].name: duplicate upstream name "a")");
  CHECK(r.errors[2] == R"(model.upstreams[3].name: expected a non-empty string, got "")");
}

TEST_CASE("model lists hold non-empty names; \"*\" stands alone, and only model.models may be empty",
          "[config][routing]") {
  auto r = parse(R"({"model":{"models":["ok",""],"upstreams":[
    {"name":"a","protocol":"responses","base_url":"http://h/v1","models":[]},
    {"name":"b","protocol":"responses","base_url":"http://h/v1","models":["x","*",7]}]}})");
  REQUIRE(r.errors.size() == 4);
  CHECK(r.errors[0] == R"(model.models[1]: expected a non-empty model name, got "")");
  CHECK(r.errors[1] == R"(model.upstreams[0].models: expected at least one model name, or "*" for every model)");
  CHECK(r.errors[2] == R"(model.upstreams[1].models[1]: "*" means every model only on its own; write "*" instead of the list)");
  CHECK(r.errors[3] == "model.upstreams[1].models[2]: expected a non-empty model name, got 7");
  auto star = parse(R"({"model":{"models":"*"}})");
  REQUIRE(star.ok());
  CHECK(star.value.model.models.any);
}

TEST_CASE("discover_models is read per upstream entry, false unless given, and must be a boolean",
          "[config][routing]") { // RS-13
  auto r = parse(R"({"model":{"upstreams":[
    {"name":"a","protocol":"responses","base_url":"http://h/v1","models":["x"],"discover_models":true},
    {"name":"b","protocol":"responses","base_url":"http://h/v1","models":"*"}]}})");
  REQUIRE(r.ok());
  CHECK(r.value.model.upstreams[0].discover_models);
  CHECK_FALSE(r.value.model.upstreams[1].discover_models);
  auto bad = parse(R"({"model":{"upstreams":[
    {"name":"a","protocol":"responses","base_url":"http://h/v1","models":"*","discover_models":"yes"}]}})");
  REQUIRE(bad.errors.size() == 1);
  CHECK(bad.errors[0].rfind("model.upstreams[0].discover_models: ", 0) == 0);
}

TEST_CASE("an unknown key in an upstream entry is refused at its path", "[config][routing]") {
  auto r = parse(R"({"model":{"upstreams":[
    {"name":"a","protocol":"responses","base_url":"http://h/v1","models":"*","comment":"the GPU box"}]}})");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0] == "model.upstreams[0].comment: unknown key");
}

namespace {

bool has_error(const config_result& r, const std::string& text) {
  for (auto& e : r.errors)
    if (e == text)
      return true;
  return false;
}

} // namespace

TEST_CASE("an unknown key is refused with its path and the nearest known key when one is close", "[config]") {
  // Issue 15 finding 16: a misspelt key must not leave its setting silently at the default.
  auto r = parse(R"({"auth":{"moed":"jwt"},"workspaces":{"colour":"red"},"servce":{}})");
  CHECK(r.errors.size() == 3);
  CHECK(has_error(r, R"(auth.moed: unknown key (did you mean "mode"))"));
  CHECK(has_error(r, "workspaces.colour: unknown key"));
  CHECK(has_error(r, R"(servce: unknown key (did you mean "service"))"));
}

TEST_CASE("keys of features troupe does not have are unknown keys", "[config]") {
  auto r = parse(R"({"cluster":{"tls":{"ciphers":"HIGH"}},"console":{}})");
  CHECK(r.errors.size() == 2);
  CHECK(has_error(r, "cluster.tls.ciphers: unknown key"));
  CHECK(has_error(r, "console: unknown key"));
}

TEST_CASE("jobs.* sets the jobs API's limits, and each type's lease cap by its name (CJ-31 to CJ-37)", "[config]") {
  auto defaults = parse("");
  REQUIRE(defaults.ok());
  CHECK(defaults.value.jobs.max_waiters == 10000);
  CHECK(defaults.value.jobs.max_leased_per_tenant.at("pska.digest") == 4);
  auto r = parse(R"({"jobs":{"max_payload_bytes":1024,"fair_share":"none",
                     "types":{"email.send":{"max_leased_per_tenant":2},"pska.digest":{"max_leased_per_tenant":0}}}})");
  REQUIRE(r.ok());
  CHECK(r.value.jobs.max_payload_bytes == 1024);
  CHECK(r.value.jobs.fair_share == "none");
  CHECK(r.value.jobs.max_leased_per_tenant.at("email.send") == 2);
  CHECK(r.value.jobs.max_leased_per_tenant.at("pska.digest") == 0);
  auto bad = parse(R"({"jobs":{"fair_share":"fifo","types":{"Bad Type":{},"a.b":{"max_leased_per_tnant":1}}}})");
  CHECK(has_error(bad, "jobs.types.Bad Type: expected a job type such as email.send (CJ-31)"));
  CHECK(has_error(bad, R"(jobs.types.a.b.max_leased_per_tnant: unknown key (did you mean "max_leased_per_tenant"))"));
  CHECK(bad.errors.size() == 3);
}

TEST_CASE("store.postgres_url (or TROUPE_POSTGRES_URL) selects PostgreSQL, bounded by cluster.pg.* (CJ-1, CJ-4)",
          "[config]") {
  auto defaults = parse("");
  REQUIRE(defaults.ok());
  CHECK(defaults.value.postgres_url.empty());
  CHECK(defaults.value.postgres.pool_size == 8);
  CHECK(defaults.value.postgres.active_transactions == 0);
  CHECK(defaults.value.postgres.acquire_timeout_seconds == 5);
  CHECK(defaults.value.postgres.statement_timeout_seconds == 5);
  CHECK(defaults.value.postgres.idle_in_transaction_seconds == 10);
  CHECK(defaults.value.postgres.lock_timeout_seconds == 2);

  auto r = parse(R"({"store":{"postgres_url":"postgresql://file/db"},
                     "cluster":{"remoting":false,"pg":{"pool_size":3,"active_transactions":4}}})",
                 {{"TROUPE_POSTGRES_URL", "postgresql://env/db"}});
  REQUIRE(r.ok());
  CHECK(r.value.postgres_url == "postgresql://env/db");
  CHECK(r.value.postgres.pool_size == 3);
  CHECK(r.value.postgres.active_transactions == 4);

  auto bad = parse(R"({"cluster":{"pg":{"pool_size":0,"lock_timeout_seconds":"soon","active_transactions":-1}}})");
  CHECK(bad.errors.size() == 3);
  auto names = [&](const std::string& key) {
    return std::any_of(bad.errors.begin(), bad.errors.end(), [&](auto& e) { return e.rfind(key + ": ", 0) == 0; });
  };
  CHECK(names("cluster.pg.pool_size"));
  CHECK(names("cluster.pg.lock_timeout_seconds"));
  CHECK(names("cluster.pg.active_transactions"));
}

TEST_CASE("a node with remoting on needs cluster.secret or TROUPE_CLUSTER_SECRET of at least 32 bytes, and no error "
          "shows it (CJ-23)",
          "[config][cluster]") {
  auto defaults = parse("");
  REQUIRE(defaults.ok()); // the embedded store is no cluster: nothing to prove
  CHECK(defaults.value.cluster.remoting);
  CHECK(defaults.value.cluster.request_timeout_seconds == 2);
  CHECK(defaults.value.cluster.forward_timeout_seconds == 5);
  CHECK(defaults.value.cluster.peer_timeout_seconds == 5);
  CHECK(defaults.value.cluster.approval_poll_seconds == 2);

  const std::string on_pg = R"({"store":{"postgres_url":"postgresql://h/db"})";
  auto missing = parse(on_pg + "}");
  REQUIRE(missing.errors.size() == 1);
  CHECK(missing.errors[0].rfind("cluster.secret (env TROUPE_CLUSTER_SECRET): required while cluster.remoting is on", 0)
        == 0);

  auto short_one = parse(on_pg + R"(,"cluster":{"secret":"hunter2-but-longer"}})");
  REQUIRE(short_one.errors.size() == 1);
  CHECK(short_one.errors[0].find("got 18") != std::string::npos);
  CHECK(short_one.errors[0].find("hunter2") == std::string::npos);

  const std::string secret(32, 's');
  auto from_env = parse(on_pg + "}", {{"TROUPE_CLUSTER_SECRET", secret}});
  REQUIRE(from_env.ok());
  CHECK(from_env.value.cluster.secret == secret);

  auto previous = parse(on_pg + R"(,"cluster":{"secret":")" + secret + R"(","secret_previous":"old-and-short"}})");
  REQUIRE(previous.errors.size() == 1);
  CHECK(previous.errors[0].rfind("cluster.secret_previous: expected at least 32 bytes, got 13", 0) == 0);
  CHECK(previous.errors[0].find("old-and-short") == std::string::npos);

  CHECK(parse(on_pg + R"(,"cluster":{"remoting":false}})").ok()); // every message takes its store fallback
}

TEST_CASE("cluster.tls takes a certificate, a key and a CA together, or none of them", "[config]") { // CJ-24
  auto none = parse("");
  REQUIRE(none.ok());
  CHECK_FALSE(none.value.cluster.tls.enabled());
  auto all = parse(R"({"cluster":{"tls":{"certificate":"node.crt","key":"node.key","ca_file":"ca.crt"}}})");
  REQUIRE(all.ok());
  CHECK(all.value.cluster.tls.enabled());
  CHECK(all.value.cluster.tls.ca_file == "ca.crt");
  auto no_ca = parse(R"({"cluster":{"tls":{"certificate":"node.crt","key":"node.key"}}})");
  REQUIRE(no_ca.errors.size() == 1);
  CHECK(no_ca.errors[0].rfind("cluster.tls.ca_file: expected a PEM file's path", 0) == 0);
  auto only_ca = parse(R"({"cluster":{"tls":{"ca_file":"ca.crt"}}})");
  CHECK(only_ca.errors.size() == 2);
}

TEST_CASE("an unknown key given with --set is refused like one in the file", "[config]") {
  auto r = parse("", {}, {"auth.moed=jwt"});
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0] == R"(auth.moed: unknown key (did you mean "mode"))");
}

TEST_CASE("unknown keys are refused in array entries, rule objects and nested sections", "[config]") {
  auto r = parse(R"({"mcp":{"servers":[{"name":"a","comand":"x","command":"y"}]},
                     "policy":{"tool_rules":{"exec":{"acton":"deny"}},"defaults":"allow"},
                     "tools":{"exec":{"timout_seconds":3}},
                     "workspaces":{"stream":{"outbox":5},"event_types":[{"name":"a:b","schema":{},"publishd_by":"runs"}]}})");
  CHECK(has_error(r, R"(mcp.servers[0].comand: unknown key (did you mean "command"))"));
  CHECK(has_error(r, R"(policy.tool_rules.exec.acton: unknown key (did you mean "action"))"));
  CHECK(has_error(r, "policy.defaults: unknown key"));
  CHECK(has_error(r, R"(tools.exec.timout_seconds: unknown key (did you mean "timeout_seconds"))"));
  CHECK(has_error(r, "workspaces.stream.outbox: unknown key"));
  CHECK(has_error(r, R"(workspaces.event_types[0].publishd_by: unknown key (did you mean "published_by"))"));
}

TEST_CASE("maps of names the operator chooses and free-form values take any key", "[config]") {
  auto r = parse(R"({"tools":{"exec":{"env":{"ANY_NAME":"1"}}},
                     "model":{"scripts":{"my-script":[{"content":"x"}]}},
                     "policy":{"tool_rules":{"whatever_tool":"allow"},"tenant_rules":{"acme":{"default_action":"deny"}},
                               "tool_profiles":{"anything":{"goes":1}}},
                     "mcp":{"servers":[{"name":"a","command":"x","env":{"FREE":"y"}}]},
                     "workspaces":{"event_types":[{"name":"a:b","schema":{"type":"object","x-anything":1}}]}})");
  CHECK(r.errors == std::vector<std::string>{});
}

TEST_CASE("the nearest known key is suggested only for a likely typo", "[config]") {
  std::set<std::string, std::less<>> known{"mode", "jwt_secret", "api_keys"};
  CHECK(nearest_key("moed", known) == "mode");
  CHECK(nearest_key("jwt_secert", known) == "jwt_secret");
  CHECK(nearest_key("apikeys", known) == "api_keys");
  CHECK(nearest_key("colour", known).empty());
  CHECK(nearest_key(std::string(100000, 'm'), known).empty()); // bounded work for any length
}

TEST_CASE("cluster.* timings must let a node miss 3 heartbeats and fence itself a heartbeat before it is declared "
          "dead (CJ-12)",
          "[config]") {
  auto defaults = parse("");
  REQUIRE(defaults.ok());
  CHECK(defaults.value.cluster.heartbeat_seconds == 2);
  CHECK(defaults.value.cluster.node_expiry_seconds == 10);
  CHECK(defaults.value.cluster.fence_margin_seconds == 2);
  CHECK(defaults.value.cluster.host == "127.0.0.1");
  CHECK(defaults.value.cluster.port == 18742);

  auto test_timings = parse(R"({"cluster":{"heartbeat_seconds":0.25,"node_expiry_seconds":2,"fence_margin_seconds":0.5}})");
  CHECK(test_timings.ok());

  auto too_few_beats = parse(R"({"cluster":{"heartbeat_seconds":4,"node_expiry_seconds":10}})");
  REQUIRE(too_few_beats.errors.size() == 1);
  CHECK(too_few_beats.errors[0] == "cluster.node_expiry_seconds: expected at least 3 heartbeats "
                                   "(cluster.heartbeat_seconds 4 x 3), got 10");

  auto late_fence = parse(R"({"cluster":{"heartbeat_seconds":2,"node_expiry_seconds":10,"fence_margin_seconds":8}})");
  REQUIRE(late_fence.errors.size() == 1);
  CHECK(late_fence.errors[0] == "cluster.fence_margin_seconds: expected less than cluster.node_expiry_seconds - "
                                "cluster.heartbeat_seconds (8), got 8");
}

TEST_CASE("cluster.claim_batch (8, at least 1) and cluster.tenant_max_running (0 = no cap, at least 0) are "
          "integers, and an error names the key (CJ-18, CJ-19)",
          "[config]") {
  auto defaults = parse("");
  REQUIRE(defaults.ok());
  CHECK(defaults.value.cluster.claim_batch == 8);
  CHECK(defaults.value.cluster.tenant_max_running == 0);

  auto set = parse(R"({"cluster":{"claim_batch":1,"tenant_max_running":5}})");
  REQUIRE(set.ok());
  CHECK(set.value.cluster.claim_batch == 1);
  CHECK(set.value.cluster.tenant_max_running == 5);

  for (auto bad : {R"({"cluster":{"claim_batch":0,"tenant_max_running":-1}})",
                   R"({"cluster":{"claim_batch":2.5,"tenant_max_running":"3"}})"}) {
    INFO(bad);
    auto r = parse(bad);
    REQUIRE(r.errors.size() == 2);
    CHECK(r.errors[0].rfind("cluster.claim_batch: expected an integer 1..", 0) == 0);
    CHECK(r.errors[1].rfind("cluster.tenant_max_running: expected an integer 0..", 0) == 0);
  }
}

TEST_CASE("pska_digest_worker.* names its tenants without control characters (AS-66, CJ-43)", "[config]") {
  auto r = parse(R"({"pska_digest_worker":{"tenants":[{"tenant_id":"acme","represented_user_id":"ann"},
                                                       {"tenant_id":"a\nb","represented_user_id":""}],
                                           "tenant_id":"x\u0000y","source":"troupe"}})");
  CHECK(r.errors.size() == 3);
  CHECK(has_error(r, "pska_digest_worker.tenant_id: Value should have 1 to 256 bytes and no control character"));
  auto ok = parse(R"({"pska_digest_worker":{"enabled":true,"tenants":[{"tenant_id":"acme","represented_user_id":"ann"}]}})");
  REQUIRE(ok.ok());
  CHECK(ok.value.pska_worker.enabled);
  CHECK(ok.value.pska_worker.tenants.at(0).tenant_id == "acme");
}

TEST_CASE("AS-23 AS-25 the context budget's keys reach the agent service's loop, and skills.dirs is a list of paths",
          "[config]") {
  auto r = parse(R"({"react":{"max_context_tokens":3000,"sliding_window_size":4},"skills":{"dirs":["/srv/skills"]}})");
  REQUIRE(r.ok());
  auto loop = agent_service_loop(r.value);
  CHECK(loop.max_context_tokens == 3000);
  CHECK(loop.sliding_window_size == 4);
  CHECK(r.value.skills.dirs == std::vector<std::string>{"/srv/skills"});
  CHECK(agent_service_loop(parse("").value).max_context_tokens == 128000);
  CHECK(agent_service_loop(parse("").value).sliding_window_size == 15);

  auto bad = parse(R"({"skills":{"dirs":"/srv/skills"},"react":{"sliding_window_size":0}})");
  REQUIRE(bad.errors.size() == 2);
  CHECK(bad.errors[0].rfind("react.sliding_window_size: expected an integer 1..", 0) == 0);
  CHECK(bad.errors[1] == R"(skills.dirs: expected an array of strings, got "/srv/skills")");
  CHECK(parse(R"({"skills":{"dirs":[""]}})").errors
        == std::vector<std::string>{R"(skills.dirs[0]: expected a directory's path, got "")"});
  CHECK_FALSE(parse(R"({"skills":{"folders":[]}})").ok()); // an unknown key is named
}
