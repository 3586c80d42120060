#include "protocol/digest_guard.hpp"

#include "protocol/utf8.hpp"

#include <limits>
#include <variant>

namespace troupe::protocol {

namespace {

// AS-71: the arrays a write may carry candidates in.
constexpr const char* candidate_arrays[] = {"knowledge_claims", "digest_notes", "entities", "memory_candidates",
                                            "review_items",     "hyperedges",   "summaries"};

const std::string budget_rule =
  "Input should be an integer from 0 to " + std::to_string(std::numeric_limits<int64_t>::max());

std::map<std::string, int64_t> default_budget() {
  return {{std::string(digest_write_tool), 1}, {std::string(digest_job_context_tool), 1}};
}

bool non_empty_array(const json::value& args, const char* key) {
  auto v = json::member(args, key);
  return v && v->IsArray() && !v->Empty();
}

} // namespace

std::vector<validation_issue> tool_budget_issues(const json::value& tool_budget) {
  std::vector<std::string> loc{"body", "metadata", "tool_budget"};
  if (tool_budget.IsNull())
    return {};
  if (!tool_budget.IsObject())
    return {{loc, "Input should be a valid dictionary of tool names to integers", "dict_type"}};
  if (tool_budget.MemberCount() > max_budget_tools)
    return {{loc, "Dictionary should have at most " + std::to_string(max_budget_tools) + " items, not "
                    + std::to_string(tool_budget.MemberCount()),
             "too_long"}};
  std::vector<validation_issue> out;
  for (auto& m : tool_budget.GetObject()) {
    auto& v = m.value;
    if (v.IsInt64() && v.GetInt64() >= 0)
      continue;
    auto at = loc;
    at.emplace_back(m.name.GetString(), m.name.GetStringLength());
    out.push_back({std::move(at), budget_rule, v.IsInt64() ? "greater_than_equal" : "int_type"});
  }
  return out;
}

std::optional<std::string> digest_write_problem(std::string_view arguments) {
  auto parsed = json::parse_body(arguments);
  if (auto failure = std::get_if<json::parse_failure>(&parsed)) // the message may quote a model-written name
    return "arguments are not readable JSON: " + std::string(utf8_prefix(failure->message(), max_problem_bytes));
  auto& args = std::get<json::document>(parsed);
  if (!args.IsObject())
    return std::string("arguments must be a JSON object");
  bool any = false;
  for (auto key : candidate_arrays)
    any = any || non_empty_array(args, key);
  if (!any)
    return std::string("a write needs at least one non-empty candidate array: knowledge_claims, digest_notes, "
                       "entities, memory_candidates, review_items, hyperedges or summaries");
  if (!non_empty_array(args, "knowledge_claims"))
    for (auto key : {"digest_notes", "hyperedges"})
      if (non_empty_array(args, key))
        return std::string(key) + " need non-empty knowledge_claims in the same write";
  return std::nullopt;
}

void write_digest_budget(json::writer& w, const char* key, const std::optional<digest_budget_report>& report) {
  w.Key(key);
  if (!report) {
    w.Null();
    return;
  }
  w.StartObject();
  json::write_counts(w, "tool_budget", report->tool_budget);
  w.Key("write_call_count");
  w.Int64(report->write_call_count);
  w.Key("job_context_call_count");
  w.Int64(report->job_context_call_count);
  w.Key("tool_budget_exceeded");
  w.Bool(report->tool_budget_exceeded);
  w.EndObject();
}

std::optional<digest_budget_report> digest_budget_report_of(std::string_view text) {
  auto doc = json::parse(text);
  if (!doc || !doc->IsObject())
    return std::nullopt;
  digest_budget_report r;
  auto budget = json::member(*doc, "tool_budget");
  if (!budget || !budget->IsObject())
    return std::nullopt;
  for (auto& m : budget->GetObject())
    if (m.value.IsInt64())
      r.tool_budget[std::string(m.name.GetString(), m.name.GetStringLength())] = m.value.GetInt64();
  r.write_call_count = json::get_int(*doc, "write_call_count").value_or(0);
  r.job_context_call_count = json::get_int(*doc, "job_context_call_count").value_or(0);
  r.tool_budget_exceeded = json::get_bool(*doc, "tool_budget_exceeded").value_or(false);
  return r;
}

std::optional<digest_guard> digest_guard::for_run(std::string_view metadata) {
  auto doc = json::parse(metadata);
  if (!doc || !doc->IsObject())
    return std::nullopt;
  auto caller = json::member(*doc, "caller");
  auto purpose = json::member(*doc, "purpose");
  bool active = (caller && caller->IsString() && std::string_view(caller->GetString()) == "pska_digest_worker")
                || (purpose && purpose->IsString() && std::string_view(purpose->GetString()) == "digest");
  if (!active)
    return std::nullopt;
  digest_guard g;
  g.report_.tool_budget = default_budget();
  auto override_budget = json::member(*doc, "tool_budget");
  if (override_budget && override_budget->IsObject() && tool_budget_issues(*override_budget).empty())
    for (auto& m : override_budget->GetObject())
      g.report_.tool_budget[std::string(m.name.GetString(), m.name.GetStringLength())] = m.value.GetInt64();
  return g;
}

digest_verdict digest_guard::judge(const std::string& tool, std::string_view arguments) {
  if (tool == digest_write_tool)
    if (auto why = digest_write_problem(arguments))
      return {digest_verdict::kind::rejected, digest_validation_text(*why)};
  auto limit = report_.tool_budget.find(tool);
  if (limit != report_.tool_budget.end()) {
    auto& used = used_[tool];
    if (used >= limit->second) {
      report_.tool_budget_exceeded = true;
      return {digest_verdict::kind::denied, budget_denied_text(tool)};
    }
    ++used;
  }
  if (tool == digest_write_tool)
    ++report_.write_call_count;
  else if (tool == digest_job_context_tool)
    ++report_.job_context_call_count;
  return {};
}

std::string budget_denied_text(std::string_view tool) {
  return "[TOOL_BUDGET_DENIED] " + std::string(tool) + " exceeded per-run budget";
}

std::string digest_validation_text(std::string_view why) {
  return "[PSKA_DIGEST_VALIDATION_ERROR] " + std::string(why);
}

} // namespace troupe::protocol
