// The safety policy: the per-run tool_policy and scope injection (AS-30..AS-33), the configured policy
// and its validation (AS-34, AS-41), the decision's precedence (AS-35..AS-37, AS-88), the policy hash
// (AS-93) and redaction (AS-85).
#include "protocol/json.hpp"
#include "protocol/policy.hpp"
#include "protocol/redaction.hpp"

#include <catch2/catch.hpp>

using namespace troupe::protocol;

namespace {

policy_config policy_of(const char* text) {
  auto doc = json::parse(text);
  REQUIRE(doc);
  std::vector<std::string> errors;
  auto p = parse_policy(&*doc, errors);
  INFO(text);
  REQUIRE(errors.empty());
  return p;
}

std::vector<std::string> errors_of(const char* text) {
  auto doc = json::parse(text);
  REQUIRE(doc);
  std::vector<std::string> errors;
  parse_policy(&*doc, errors);
  return errors;
}

decision check(const policy_config& p, const std::string& tool, const char* args, const std::string& user = "pska:u1",
               const std::string& tenant = "pska", safety_config safety = {}) {
  auto doc = json::parse(args);
  REQUIRE(doc);
  return decide(p, safety, tool, *doc, user, tenant);
}

} // namespace

TEST_CASE("each precedence level overrides the next one down", "[policy]") { // AS-35
  auto all = policy_of(R"({"default_action":"caution",
    "tool_rules":{"read_file":"require_approval","*":"deny"},
    "tenant_rules":{"pska":"allow"},
    "user_rules":{"pska:u1":"deny"}})");
  auto d = check(all, "read_file", "{}");
  CHECK(d.policy_scope == "user:pska:u1");
  CHECK(d.level == decision_level::forbidden);
  CHECK(d.reason == "Policy user:pska:u1 denies tool");
  d = check(all, "read_file", "{}", "pska:u2");
  CHECK(d.policy_scope == "tenant:pska");
  CHECK(d.level == decision_level::safe);
  d = check(all, "read_file", "{}", "acme:u2", "acme");
  CHECK(d.policy_scope == "tool:read_file");
  CHECK(d.level == decision_level::danger);
  CHECK(d.requires_confirmation());
  CHECK(d.should_allow());
  d = check(all, "list_dir", "{}", "acme:u2", "acme");
  CHECK(d.policy_scope == "tool:*");
  CHECK_FALSE(d.should_allow());
  d = check(policy_of(R"({"default_action":"caution"})"), "read_file", "{}");
  CHECK(d.policy_scope == "default");
  CHECK(d.policy_action == "caution");
  CHECK(d.policy_matched);
  d = check(policy_of("{}"), "read_file", "{}");
  CHECK_FALSE(d.policy_matched);
  CHECK(d.reason == "Tool is in safe whitelist");
}

TEST_CASE("an object rule yields its tool entry, then *, then action, then default_action", "[policy]") { // AS-35
  auto p = policy_of(R"({"tenant_rules":{"pska":{"action":"caution","tools":{"exec":"deny","*":"allow"}}},
                         "user_rules":{"pska:u1":{"default_action":"require_approval"}},
                         "tool_rules":{"exec":{"tool_rules":{"read_file":"deny"}}}})");
  CHECK(check(p, "exec", R"({"command":"ls"})", "pska:u2").level == decision_level::forbidden);
  CHECK(check(p, "read_file", "{}", "pska:u2").level == decision_level::safe);
  CHECK(check(p, "read_file", "{}").level == decision_level::danger);
  // A tool_rules object with nothing for this tool falls through to the heuristics.
  auto d = check(p, "exec", R"({"command":"ls"})", "x:u", "x");
  CHECK_FALSE(d.policy_matched);
  CHECK(d.reason == "Command matches safe pattern");
}

TEST_CASE("an allow rule cannot unlock rm -rf /, only safety.allow_all comes first", "[policy]") { // AS-36
  auto p = policy_of(R"({"tool_rules":{"exec":"allow"},"user_rules":{"pska:u1":"allow"}})");
  auto d = check(p, "exec", R"({"command":"rm -rf /"})");
  CHECK(d.level == decision_level::forbidden);
  CHECK(d.reason == "Command matches forbidden pattern");
  CHECK(d.pattern_matched == R"(\brm\s+-rf\s+/)");
  safety_config open;
  open.allow_all = true;
  CHECK(check(p, "exec", R"({"command":"rm -rf /"})", "pska:u1", "pska", open).level == decision_level::safe);
}

TEST_CASE("dangerous exec patterns are checked before safe ones", "[policy]") { // AS-88
  auto p = policy_of("{}");
  for (auto cmd : {"echo x > f", "ls; rm a", "cat a | rm b"}) {
    INFO(cmd);
    auto d = check(p, "exec", (std::string(R"({"command":")") + cmd + "\"}").c_str());
    CHECK(d.level == decision_level::danger);
    CHECK(d.reason == "Command matches dangerous pattern");
  }
  CHECK(check(p, "exec", R"({"command":"ls -la"})").level == decision_level::safe);
  CHECK(check(p, "exec", R"({"command":"git status"})").level == decision_level::safe);
  CHECK(check(p, "exec", R"({"command":"python x.py"})").level == decision_level::caution);
  CHECK(check(p, "write_file", "{}").reason == "Tool modifies files (logged but allowed)");
  CHECK(check(p, "pska_pska_search", "{}").reason == "Unclassified tool (logged but allowed)");
  safety_config strict;
  strict.strict_mode = true;
  CHECK(check(p, "edit_file", "{}", "u", "", strict).level == decision_level::danger);
}

TEST_CASE("invalid policy config is rejected with the path of the offending key", "[policy]") { // AS-41
  CHECK(errors_of(R"({"tool_rules":{"exec":"require-approval"}})")
        == std::vector<std::string>{"policy.tool_rules.exec has invalid action \"require-approval\"; expected one "
                                    "of allow, caution, require_approval, deny"});
  CHECK(errors_of(R"({"tenant_rules":{"pska":{"tools":"deny"}}})")
        == std::vector<std::string>{"policy.tenant_rules.pska.tools must be an object"});
  CHECK(errors_of(R"({"user_rules":{"u":{}}})")
        == std::vector<std::string>{"policy.user_rules.u must define action, default_action, tools, or tool_rules"});
  CHECK(errors_of(R"({"default_action":"maybe"})").size() == 1);
}

TEST_CASE("the policy hash is 16 hex digits of the canonical policy, blind to key order", "[policy]") { // AS-93
  auto a = policy_of(R"({"tool_rules":{"exec":"deny"},"default_action":"allow"})");
  auto b = policy_of(R"({ "default_action" : "allow", "tool_rules" : { "exec" : "deny" } })");
  CHECK(policy_hash(a) == policy_hash(b));
  CHECK(policy_hash(a).size() == 16);
  CHECK(policy_hash(a) != policy_hash(policy_of(R"({"default_action":"allow"})")));
  CHECK(a.canonical == R"({"default_action":"allow","tenant_rules":{},"tool_profiles":{},"tool_rules":{"exec":"deny"},)"
                       R"("user_rules":{}})");
  CHECK(policy_hash(policy_config{}) == policy_hash(policy_of("{}"))); // absent keys are their defaults
}

TEST_CASE("tool_policy modes normalize their aliases and deny with the spec's reasons", "[policy]") { // AS-30, AS-32
  for (auto mode : {"none", "OFF", "disabled", "no_tools"}) {
    auto p = normalize_tool_policy(std::string(R"({"mode":")") + mode + "\"}");
    CHECK(p.mode == "none");
    CHECK(p.denial("read_file") == std::string("run tool_policy mode=none disables all tools"));
  }
  auto allow = normalize_tool_policy(R"({"mode":"Allowed_Tools","allowed_tools":[" read_file ","read_file","exec"]})");
  CHECK(allow.mode == "allowlist");
  CHECK(allow.allowed_tools == std::vector<std::string>{"read_file", "exec"});
  CHECK(allow.visible("exec"));
  CHECK(allow.denial("write_file") == std::string("tool 'write_file' is not in run tool_policy allowed_tools"));
  CHECK(normalize_tool_policy("null").mode.empty());
  CHECK(normalize_tool_policy(R"({"mode":"everything"})").visible("exec"));
  CHECK(normalize_tool_policy(R"(["none"])").visible("exec"));
}

TEST_CASE("scope injection intersects source ids in model order and keeps an empty intersection", "[policy]") { // AS-33
  auto p = normalize_tool_policy(
    R"({"mode":"allowlist","allowed_tools":["pska_pska_search"],
        "scope":{"mode":"STRICT","knowledge_base_ids":["kb1"],"source_item_ids":["s1","s2"]}})");
  auto args = [&](const char* model) {
    auto out = apply_scope(p, "pska_pska_search", model);
    REQUIRE(out);
    auto doc = json::parse(*out);
    REQUIRE(doc);
    return json::canonical((*doc)["source_item_ids"]);
  };
  CHECK(args(R"({"source_item_ids":["s2","s9"]})") == R"(["s2"])");
  CHECK(args(R"({"source_item_ids":["s9"]})") == "[]");
  CHECK(args(R"({"query":"q"})") == R"(["s1","s2"])");
  CHECK(args(R"({"scope":{"source_item_ids":["s2","s1"]}})") == R"(["s2","s1"])");
  auto full = json::parse(*apply_scope(p, "pska_pska_search", R"({"knowledge_base_ids":["kb9"]})"));
  CHECK(json::canonical((*full)["knowledge_base_ids"]) == R"(["kb1"])");
  CHECK(json::canonical((*full)["scope"]) ==
        R"({"knowledge_base_ids":["kb1"],"mode":"strict","scope_mode":"strict","source_item_ids":["s1","s2"]})");
  CHECK(json::get_string(*full, "scope_mode") == "strict");
  CHECK_FALSE(apply_scope(p, "read_file", R"({"path":"a"})")); // only pska_* tools
  CHECK_FALSE(apply_scope(normalize_tool_policy("null"), "pska_pska_search", "{}"));
}

TEST_CASE("redaction masks whole-word secrets, never path, and truncates long strings", "[redaction]") { // AS-85
  for (auto key : {"api_key", "apiKey", "service_token", "github_pat", "Authorization", "password", "client.secret"})
    CHECK(sensitive_key(key));
  for (auto key : {"path", "pattern_matched", "prompt_tokens", "max_tokens", "patch", "tokenizer"})
    CHECK_FALSE(sensitive_key(key));
  auto out = json::parse(redact_json(
    R"({"path":"a/b","api_key":"x","nested":[{"token":"t"}],"v":"sk-live","h":"Bearer abc","long":")"
    + std::string(1300, 'y') + "\"}"));
  REQUIRE(out);
  CHECK(json::get_string(*out, "path") == "a/b");
  CHECK(json::get_string(*out, "api_key") == "***");
  CHECK(json::get_string((*out)["nested"][0], "token") == "***");
  CHECK(json::get_string(*out, "v") == "***");
  CHECK(json::get_string(*out, "h") == "***");
  CHECK(json::get_string(*out, "long") == std::string(600, 'y') + "[... truncated ...]");
  CHECK(redact_json("not json") == "not json");
}
