// The agent service's safety policy (AS-30..AS-41, AS-88, AS-93): the per-run tool_policy and its
// scope injection, the configured policy and its validation, and the one decision function that live
// calls and POST /v1/policy/check share. Pure: no I/O, no clocks.
#pragma once

#include "protocol/chat_request.hpp"
#include "protocol/json.hpp"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::protocol {

enum class decision_level { safe, caution, danger, forbidden };

const char* to_string(decision_level level);

// A configured rule (AS-34): an action, or an object with action / default_action / per-tool rules.
struct policy_rule {
  std::optional<std::string> action;
  std::optional<std::string> default_action;
  std::map<std::string, policy_rule> tools; // `tools` or `tool_rules`, keyed by registered name or "*"
};

struct policy_config {
  std::optional<std::string> default_action;
  std::map<std::string, policy_rule> tool_rules;
  std::map<std::string, policy_rule> tenant_rules;
  std::map<std::string, policy_rule> user_rules;
  std::string tool_profiles = "{}"; // validated and exposed, not enforced
  // The `policy` object with every key (defaults filled in), sorted, no whitespace (AS-39, AS-93).
  std::string canonical = R"({"default_action":null,"tenant_rules":{},"tool_profiles":{},"tool_rules":{},"user_rules":{}})";
};

struct safety_config {
  bool enabled = true;
  bool allow_all = false;
  bool strict_mode = false;
};

// Reads the `policy` object (null or absent: the defaults); each problem is appended to `errors`
// with its JSON path (AS-41).
policy_config parse_policy(const json::value* policy, std::vector<std::string>& errors);

// AS-93: the first 16 hex digits of the SHA-256 of the canonical policy JSON.
std::string policy_hash(const policy_config& p);

// A decision with its provenance (AS-35, AS-38).
struct decision {
  decision_level level = decision_level::caution;
  std::string reason;
  std::optional<std::string> pattern_matched;
  std::optional<std::string> policy_scope;
  std::optional<std::string> policy_action;
  bool policy_matched = false;

  bool requires_confirmation() const { return level == decision_level::danger; }
  bool should_allow() const { return level != decision_level::forbidden; }
};

// Steps 2–8 of AS-35 for one call; `args` is the call's arguments object.
decision decide(const policy_config& p, const safety_config& safety, const std::string& tool_name,
                const json::value& args, const std::string& user_key, const std::string& tenant_key);

// GET /v1/policy (AS-39).
std::string policy_document_json(const policy_config& p);

// POST /v1/policy/check (AS-40): the body's call, decided with no side effects. An error is the
// request_error to answer (422 for a missing or mistyped field).
std::variant<std::string, request_error> policy_check(const policy_config& p, const safety_config& safety,
                                                      std::string_view body);

// The per-run tool_policy, normalized (AS-30, AS-33).
struct tool_scope {
  std::string mode; // "" when unset
  std::vector<std::string> knowledge_base_ids;
  std::vector<std::string> source_item_ids;
  bool has_knowledge_base_ids = false;
  bool has_source_item_ids = false;
};

struct run_tool_policy {
  std::string mode; // "" (no filter) | none | allowlist
  std::vector<std::string> allowed_tools;
  std::optional<tool_scope> scope;

  // {mode, allowed_tools, scope?}, or null without a filter or scope.
  std::string json() const;
  // The tool may be offered to the model (AS-31).
  bool visible(const std::string& tool_name) const;
  // Why a call of the tool is refused (AS-32), or nullopt.
  std::optional<std::string> denial(const std::string& tool_name) const;
};

// From the request's tool_policy JSON text ("null" or anything that is not an object: no filter).
run_tool_policy normalize_tool_policy(std::string_view json_text);

// AS-33: the arguments a `pska_*` call runs with under the scope, or nullopt when nothing applies.
std::optional<std::string> apply_scope(const run_tool_policy& policy, const std::string& tool_name,
                                       std::string_view args_json);

} // namespace troupe::protocol
