#include "protocol/policy.hpp"

#include "protocol/auth.hpp"
#include "protocol/config_reader.hpp"
#include "protocol/errors.hpp"

#include "protocol/ids.hpp"

#include <algorithm>
#include <cctype>
#include <regex>

namespace troupe::protocol {

namespace {

using json::writer;

struct pattern {
  std::string text;
  std::regex re;
};

std::vector<pattern> compile(std::initializer_list<const char*> texts) {
  std::vector<pattern> out;
  for (auto t : texts)
    out.push_back({t, std::regex(t, std::regex::ECMAScript | std::regex::optimize)});
  return out;
}

// AS-36: no policy rule can unlock these.
const std::vector<pattern>& forbidden_patterns() {
  static const auto p = compile({R"(\brm\s+-rf\s+/)", R"(\brm\s+-rf\s+\.)", R"(\bformat\s+)", R"(\bmkfs\s+)",
                                 R"(\bdd\s+)", R"(\bshutdown\s+)"});
  return p;
}

// AS-37, AS-88: dangerous patterns are checked before safe ones.
const std::vector<pattern>& dangerous_patterns() {
  static const auto p = compile({R"(\brm\s+)", R"(\bmv\s+)", R"(\brmdir\s+)", R"(\bdelete\s+)", R"(\bdel\s+)",
                                 R"(>\s*)", R"(\|.*rm\s+)", R"(\bsudo\s+.*rm\b)", R"(\bchmod\s+)", R"(\bchown\s+)",
                                 R"(:\s*>$)"});
  return p;
}

const std::vector<pattern>& safe_patterns() {
  static const auto p = compile({R"(\bls\b)", R"(\bcat\b)", R"(\bhead\b)", R"(\btail\b)", R"(\bgrep\b)",
                                 R"(\bfind\b)", R"(\bpwd\b)", R"(\becho\b)", R"(\bcd\b)", R"(\bmkdir\b)",
                                 R"(\bgit\s+(status|log|diff|branch|show))"});
  return p;
}

const pattern* first_match(const std::vector<pattern>& patterns, const std::string& command) {
  for (auto& p : patterns)
    if (std::regex_search(command, p.re))
      return &p;
  return nullptr;
}

constexpr const char* actions[] = {"allow", "caution", "require_approval", "deny"};

bool valid_action(const std::string& a) {
  return std::find(std::begin(actions), std::end(actions), a) != std::end(actions);
}

decision_level level_of(const std::string& action) {
  if (action == "allow")
    return decision_level::safe;
  if (action == "caution")
    return decision_level::caution;
  if (action == "require_approval")
    return decision_level::danger;
  return decision_level::forbidden;
}

const char* verb_of(const std::string& action) {
  if (action == "allow")
    return "allows tool";
  if (action == "caution")
    return "allows with caution";
  if (action == "require_approval")
    return "requires approval";
  return "denies tool";
}

class policy_reader {
public:
  explicit policy_reader(std::vector<std::string>& errors) : errors_(errors) {}

  std::optional<std::string> action(const json::value& v, const std::string& path) {
    if (!v.IsString()) {
      errors_.push_back(path + " must be one of allow, caution, require_approval, deny");
      return std::nullopt;
    }
    std::string a(v.GetString(), v.GetStringLength());
    if (!valid_action(a)) {
      errors_.push_back(path + " has invalid action \"" + a + "\"; expected one of allow, caution, require_approval, deny");
      return std::nullopt;
    }
    return a;
  }

  std::optional<policy_rule> rule(const json::value& v, const std::string& path) {
    policy_rule r;
    if (v.IsString()) {
      r.action = action(v, path);
      return r.action ? std::optional<policy_rule>(r) : std::nullopt;
    }
    if (!v.IsObject()) {
      errors_.push_back(path + " must be an action or an object");
      return std::nullopt;
    }
    keys_.open(v, path);
    bool defined = false;
    for (auto key : {"action", "default_action"}) {
      keys_.asked(v, key);
      if (auto m = json::member(v, key); m && !m->IsNull()) {
        defined = true;
        (std::string(key) == "action" ? r.action : r.default_action) = action(*m, path + "." + key);
      }
    }
    for (auto key : {"tools", "tool_rules"}) {
      keys_.asked(v, key);
      if (auto m = json::member(v, key); m && !m->IsNull()) {
        defined = true;
        rules(*m, path + "." + key, r.tools);
      }
    }
    if (!defined)
      errors_.push_back(path + " must define action, default_action, tools, or tool_rules");
    return r;
  }

  void rules(const json::value& v, const std::string& path, std::map<std::string, policy_rule>& into) {
    if (!v.IsObject()) {
      errors_.push_back(path + " must be an object");
      return;
    }
    for (auto& m : v.GetObject()) {
      std::string name(m.name.GetString(), m.name.GetStringLength());
      if (auto r = rule(m.value, path + "." + name))
        into.emplace(name, std::move(*r));
    }
  }

  // The keys of the policy object and of each rule object; a rule map's names are the user's.
  config_keys& keys() { return keys_; }

private:
  std::vector<std::string>& errors_;
  config_keys keys_;
};

// The action an object rule yields for the tool: its tools entry, else "*", else action, else
// default_action (AS-35).
std::optional<std::string> yield(const policy_rule& r, const std::string& tool) {
  for (auto key : {tool, std::string("*")}) {
    if (auto it = r.tools.find(key); it != r.tools.end())
      if (auto a = yield(it->second, tool))
        return a;
  }
  if (r.action)
    return r.action;
  return r.default_action;
}

decision matched(const std::string& scope, const std::string& action) {
  decision d;
  d.level = level_of(action);
  d.reason = "Policy " + scope + " " + verb_of(action);
  d.policy_scope = scope;
  d.policy_action = action;
  d.policy_matched = true;
  return d;
}

decision plain(decision_level level, std::string reason, const pattern* p = nullptr) {
  decision d;
  d.level = level;
  d.reason = std::move(reason);
  if (p)
    d.pattern_matched = p->text;
  return d;
}

std::string lower(std::string s) {
  for (auto& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos)
    return {};
  auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// The strings of an array, de-duplicated in order (trimmed when `trimmed`); nullopt when not an array.
std::optional<std::vector<std::string>> string_list(const json::value* v, bool trimmed) {
  if (!v || !v->IsArray())
    return std::nullopt;
  std::vector<std::string> out;
  for (auto& item : v->GetArray()) {
    if (!item.IsString())
      continue;
    std::string s(item.GetString(), item.GetStringLength());
    if (trimmed)
      s = trim(s);
    if (!s.empty() && std::find(out.begin(), out.end(), s) == out.end())
      out.push_back(std::move(s));
  }
  return out;
}

void write_strings(writer& w, const std::vector<std::string>& items) {
  w.StartArray();
  for (auto& s : items)
    w.String(s);
  w.EndArray();
}

json::value string_array(const std::vector<std::string>& items, json::document::AllocatorType& a) {
  json::value arr(rapidjson::kArrayType);
  for (auto& s : items)
    arr.PushBack(json::value(s.c_str(), static_cast<rapidjson::SizeType>(s.size()), a), a);
  return arr;
}

void set_member(json::value& obj, const char* key, json::value v, json::document::AllocatorType& a) {
  if (auto m = obj.FindMember(key); m != obj.MemberEnd())
    m->value = std::move(v);
  else
    obj.AddMember(json::value(key, a), std::move(v), a);
}

} // namespace

const char* to_string(decision_level level) {
  switch (level) {
  case decision_level::safe:
    return "safe";
  case decision_level::caution:
    return "caution";
  case decision_level::danger:
    return "danger";
  case decision_level::forbidden:
    return "forbidden";
  }
  return "caution";
}

policy_config parse_policy(const json::value* policy, std::vector<std::string>& errors) {
  policy_config p;
  if (!policy || policy->IsNull())
    return p;
  if (!policy->IsObject()) {
    errors.push_back("policy must be an object");
    return p;
  }
  policy_reader read(errors);
  read.keys().open(*policy, "policy");
  for (auto key : {"default_action", "tool_rules", "tenant_rules", "user_rules", "tool_profiles"})
    read.keys().asked(*policy, key);
  if (auto m = json::member(*policy, "default_action"); m && !m->IsNull())
    p.default_action = read.action(*m, "policy.default_action");
  for (auto [key, into] : {std::pair{"tool_rules", &p.tool_rules}, {"tenant_rules", &p.tenant_rules},
                           {"user_rules", &p.user_rules}})
    if (auto m = json::member(*policy, key); m && !m->IsNull())
      read.rules(*m, std::string("policy.") + key, *into);
  if (auto m = json::member(*policy, "tool_profiles"); m && !m->IsNull()) {
    if (m->IsObject())
      p.tool_profiles = json::serialize(*m);
    else
      errors.push_back("policy.tool_profiles must be an object");
  }
  read.keys().refuse_unknown(errors);
  // The policy as GET /v1/policy shows it, every key present, so a client can recompute the hash.
  auto section = [&](const char* key) {
    auto m = json::member(*policy, key);
    return m && m->IsObject() ? json::canonical(*m) : std::string("{}");
  };
  p.canonical = json::object([&](writer& w) {
    w.Key("default_action");
    if (p.default_action)
      w.String(*p.default_action);
    else
      w.Null();
    for (auto key : {"tenant_rules", "tool_profiles", "tool_rules", "user_rules"}) {
      w.Key(key);
      json::write_raw(w, section(key));
    }
  });
  return p;
}

std::string policy_hash(const policy_config& p) {
  return sha256_hex(p.canonical).substr(0, 16);
}

decision decide(const policy_config& p, const safety_config& safety, const std::string& tool_name,
                const json::value& args, const std::string& user_key, const std::string& tenant_key) {
  if (!safety.enabled)
    return plain(decision_level::safe, "Safety policy disabled");
  if (safety.allow_all)
    return plain(decision_level::safe, "Safety checks disabled (allow_all=True)");
  std::string command = tool_name == "exec" ? json::get_string(args, "command") : std::string();
  if (tool_name == "exec")
    if (auto f = first_match(forbidden_patterns(), command))
      return plain(decision_level::forbidden, "Command matches forbidden pattern", f);
  if (auto it = p.user_rules.find(user_key); it != p.user_rules.end())
    if (auto a = yield(it->second, tool_name))
      return matched("user:" + user_key, *a);
  if (auto it = p.tenant_rules.find(tenant_key); it != p.tenant_rules.end())
    if (auto a = yield(it->second, tool_name))
      return matched("tenant:" + tenant_key, *a);
  for (auto key : {tool_name, std::string("*")})
    if (auto it = p.tool_rules.find(key); it != p.tool_rules.end())
      if (auto a = yield(it->second, tool_name))
        return matched("tool:" + key, *a);
  if (p.default_action)
    return matched("default", *p.default_action);

  if (safety.strict_mode && (tool_name == "write_file" || tool_name == "edit_file"))
    return plain(decision_level::danger, "Tool modifies files (strict mode requires approval)");
  if (tool_name == "read_file" || tool_name == "list_dir")
    return plain(decision_level::safe, "Tool is in safe whitelist");
  if (tool_name == "write_file" || tool_name == "edit_file")
    return plain(decision_level::caution, "Tool modifies files (logged but allowed)");
  if (tool_name == "exec") {
    if (auto d = first_match(dangerous_patterns(), command))
      return plain(decision_level::danger, "Command matches dangerous pattern", d);
    if (auto s = first_match(safe_patterns(), command))
      return plain(decision_level::safe, "Command matches safe pattern", s);
    return plain(decision_level::caution, "Unknown command (logged but allowed)");
  }
  return plain(decision_level::caution, "Unclassified tool (logged but allowed)");
}

std::string policy_document_json(const policy_config& p) {
  return json::object([&](writer& w) {
    w.Key("schema");
    w.String("fastreact.policy.v1");
    w.Key("policy");
    json::write_raw(w, p.canonical);
    auto hash = policy_hash(p);
    w.Key("policy_snapshot_hash");
    w.String(hash);
    w.Key("policy_version");
    w.String(hash);
    w.Key("reload_supported");
    w.Bool(false);
    w.Key("actions");
    w.StartObject();
    for (auto a : actions) {
      w.Key(a);
      w.String(to_string(level_of(a)));
    }
    w.EndObject();
    w.Key("priority");
    write_strings(w, {"run_tool_policy", "user_rules", "tenant_rules", "tool_rules", "default_action", "built_in_safety"});
    w.Key("evaluation_order");
    write_strings(w, {"run_tool_policy", "allow_all", "built_in_forbidden", "user_rules", "tenant_rules", "tool_rules",
                      "default_action", "built_in_safety"});
    w.Key("tenant_inference");
    w.String("prefix_before_colon_in_user_key");
  });
}

std::variant<std::string, request_error> policy_check(const policy_config& p, const safety_config& safety,
                                                      std::string_view body) {
  auto invalid = [](std::vector<std::string> loc, const char* msg, const char* type) {
    return request_error{protocol::invalid({{std::move(loc), msg, type}})};
  };
  auto parsed = json::parse_body(body);
  if (auto failure = std::get_if<json::parse_failure>(&parsed))
    return body_refusal(*failure);
  auto doc = &std::get<json::document>(parsed);
  if (!doc->IsObject())
    return invalid({"body"}, "Input should be a valid dictionary", "dict_type");
  auto name = json::member(*doc, "tool_name");
  if (!name)
    return invalid({"body", "tool_name"}, "Field required", "missing");
  if (!name->IsString())
    return invalid({"body", "tool_name"}, "Input should be a valid string", "string_type");
  json::document empty;
  empty.SetObject();
  auto args = json::member(*doc, "tool_args");
  if (args && !args->IsNull() && !args->IsObject())
    return invalid({"body", "tool_args"}, "Input should be a valid dictionary", "dict_type");
  std::string tool(name->GetString(), name->GetStringLength());
  auto user = json::get_string(*doc, "user_key");
  auto tenant = json::get_string(*doc, "tenant_key");
  if (tenant.empty())
    tenant = infer_tenant(user);
  auto d = decide(p, safety, tool, args && args->IsObject() ? *args : empty, user, tenant);
  return json::object([&](writer& w) {
    w.Key("tool_name");
    w.String(tool);
    w.Key("user_key");
    w.String(user);
    w.Key("tenant_key");
    w.String(tenant);
    w.Key("level");
    w.String(to_string(d.level));
    w.Key("reason");
    w.String(d.reason);
    for (auto [key, v] : {std::pair{"pattern_matched", &d.pattern_matched}, {"policy_scope", &d.policy_scope},
                          {"policy_action", &d.policy_action}}) {
      w.Key(key);
      if (*v)
        w.String(**v);
      else
        w.Null();
    }
    w.Key("policy_matched");
    w.Bool(d.policy_matched);
    w.Key("requires_confirmation");
    w.Bool(d.requires_confirmation());
    w.Key("should_allow");
    w.Bool(d.should_allow());
  });
}

std::string run_tool_policy::json() const {
  if (mode.empty() && !scope)
    return "null";
  return json::object([&](writer& w) {
    w.Key("mode");
    if (mode.empty())
      w.Null();
    else
      w.String(mode);
    w.Key("allowed_tools");
    write_strings(w, allowed_tools);
    if (scope) {
      w.Key("scope");
      w.StartObject();
      w.Key("mode");
      w.String(scope->mode);
      w.Key("scope_mode");
      w.String(scope->mode);
      if (scope->has_knowledge_base_ids) {
        w.Key("knowledge_base_ids");
        write_strings(w, scope->knowledge_base_ids);
      }
      if (scope->has_source_item_ids) {
        w.Key("source_item_ids");
        write_strings(w, scope->source_item_ids);
      }
      w.EndObject();
    }
  });
}

bool run_tool_policy::visible(const std::string& tool_name) const {
  return !denial(tool_name);
}

std::optional<std::string> run_tool_policy::denial(const std::string& tool_name) const {
  if (mode == "none")
    return std::string("run tool_policy mode=none disables all tools");
  if (mode == "allowlist" && std::find(allowed_tools.begin(), allowed_tools.end(), tool_name) == allowed_tools.end())
    return "tool '" + tool_name + "' is not in run tool_policy allowed_tools";
  return std::nullopt;
}

run_tool_policy normalize_tool_policy(std::string_view json_text) {
  run_tool_policy out;
  auto doc = json::parse(json_text);
  if (!doc || !doc->IsObject())
    return out;
  auto mode = lower(trim(json::get_string(*doc, "mode")));
  if (mode == "none" || mode == "off" || mode == "disabled" || mode == "no_tools")
    out.mode = "none";
  else if (mode == "allowlist" || mode == "allowed_tools" || mode == "allow")
    out.mode = "allowlist";
  if (out.mode == "allowlist")
    out.allowed_tools = string_list(json::member(*doc, "allowed_tools"), true).value_or(std::vector<std::string>{});
  if (auto s = json::member(*doc, "scope"); s && s->IsObject()) {
    tool_scope scope;
    auto m = json::get_string(*s, "mode");
    scope.mode = lower(trim(m.empty() ? json::get_string(*s, "scope_mode") : m));
    if (auto kb = string_list(json::member(*s, "knowledge_base_ids"), true)) {
      scope.knowledge_base_ids = std::move(*kb);
      scope.has_knowledge_base_ids = true;
    }
    if (auto src = string_list(json::member(*s, "source_item_ids"), true)) {
      scope.source_item_ids = std::move(*src);
      scope.has_source_item_ids = true;
    }
    out.scope = std::move(scope);
  }
  return out;
}

std::optional<std::string> apply_scope(const run_tool_policy& policy, const std::string& tool_name,
                                       std::string_view args_json) {
  if (!policy.scope || tool_name.rfind("pska_", 0) != 0)
    return std::nullopt;
  auto& scope = *policy.scope;
  auto doc = json::parse(args_json);
  if (!doc || !doc->IsObject())
    doc = json::parse("{}");
  auto& a = doc->GetAllocator();
  auto& args = *doc;
  if (!args.HasMember("scope") || !args["scope"].IsObject())
    set_member(args, "scope", json::value(rapidjson::kObjectType), a);
  bool applied = false;
  if (!scope.knowledge_base_ids.empty()) {
    set_member(args, "knowledge_base_ids", string_array(scope.knowledge_base_ids, a), a);
    set_member(args["scope"], "knowledge_base_ids", string_array(scope.knowledge_base_ids, a), a);
    applied = true;
  }
  if (!scope.source_item_ids.empty()) {
    auto model = string_list(json::member(args, "source_item_ids"), false);
    if (!model)
      model = string_list(json::member(args["scope"], "source_item_ids"), false);
    std::vector<std::string> result;
    if (model) {
      for (auto& id : *model)
        if (std::find(scope.source_item_ids.begin(), scope.source_item_ids.end(), id) != scope.source_item_ids.end())
          result.push_back(id);
    } else {
      result = scope.source_item_ids;
    }
    set_member(args, "source_item_ids", string_array(result, a), a);
    set_member(args["scope"], "source_item_ids", string_array(result, a), a);
    applied = true;
  }
  if (!scope.mode.empty()) {
    auto mode = [&] { return json::value(scope.mode.c_str(), static_cast<rapidjson::SizeType>(scope.mode.size()), a); };
    set_member(args, "scope_mode", mode(), a);
    set_member(args["scope"], "scope_mode", mode(), a);
    set_member(args["scope"], "mode", mode(), a);
    applied = true;
  }
  if (!applied)
    return std::nullopt;
  return json::serialize(args);
}

} // namespace troupe::protocol
