#include "protocol/approvals.hpp"

#include "protocol/errors.hpp"
#include "protocol/json.hpp"
#include "protocol/redaction.hpp"
#include "protocol/runs.hpp"
#include "protocol/utf8.hpp"

#include <algorithm>
#include <cmath>

namespace troupe::protocol {

namespace {

using json::writer;

constexpr std::size_t summary_chars = 500;

void optional_bool(writer& w, const char* key, const std::optional<bool>& v) {
  w.Key(key);
  if (v)
    w.Bool(*v);
  else
    w.Null();
}

void write_record(writer& w, const approval_record& r) {
  w.StartObject();
  w.Key("request_id");
  w.String(r.request_id);
  w.Key("approval_request_id");
  w.String(r.request_id);
  for (auto [key, v] : {std::pair{"run_id", &r.run_id}, {"session_id", &r.session_id}}) {
    w.Key(key);
    w.String(*v);
  }
  w.Key("tenant_key");
  w.String(r.tenant_key);
  w.Key("user_key");
  w.String(r.user_key);
  json::write_nullable(w, "task_id", r.task_id);
  json::write_nullable(w, "tool_call_id", r.tool_call_id);
  w.Key("tool_name");
  w.String(r.tool_name);
  w.Key("tool_args");
  json::write_raw(w, redact_json(r.tool_args));
  w.Key("reason");
  w.String(r.reason);
  w.Key("decision_level");
  w.String(r.decision_level);
  json::write_nullable(w, "pattern_matched", r.pattern_matched);
  json::write_nullable(w, "policy_scope", r.policy_scope);
  json::write_nullable(w, "policy_action", r.policy_action);
  w.Key("policy_matched");
  w.Bool(r.policy_matched);
  w.Key("status");
  w.String(r.status);
  optional_bool(w, "approved", r.approved);
  w.Key("expired");
  w.Bool(r.status == "expired");
  w.Key("timeout_seconds");
  w.Double(r.timeout_seconds);
  w.Key("created_at");
  w.String(r.created_at);
  w.Key("expires_at");
  w.String(r.expires_at);
  json::write_nullable(w, "resolved_at", r.resolved_at);
  json::write_nullable(w, "resolution_reason", r.resolution_reason);
  w.EndObject();
}

} // namespace

std::string approval_json(const approval_record& r) {
  rapidjson::StringBuffer buf;
  writer w(buf);
  write_record(w, r);
  return std::string(buf.GetString(), buf.GetSize());
}

std::variant<approval_query, request_error> parse_approval_query(const std::map<std::string, std::string>& query) {
  approval_query q;
  auto get = [&](const char* key) {
    auto it = query.find(key);
    return it == query.end() ? std::string() : it->second;
  };
  // The limit follows the events page's rule (AS-47 = AS-51): 200, at most 1000, 0 = all.
  auto page = parse_page_query(get("limit"), "");
  if (auto err = std::get_if<request_error>(&page))
    return std::move(*err);
  q.limit = std::get<page_query>(page).limit;
  if (auto offset = get("offset"); !offset.empty()) {
    auto v = parse_query_integer("offset", offset);
    if (auto err = std::get_if<request_error>(&v))
      return std::move(*err);
    if (std::get<int64_t>(v) < 0)
      return bad_request("offset must be >= 0");
    q.offset = std::get<int64_t>(v);
  }
  if (auto order = get("order"); !order.empty()) {
    if (order != "asc" && order != "desc")
      return bad_request("order must be 'asc' or 'desc'");
    q.ascending = order == "asc";
  }
  for (auto key : {"status", "session_id", "tool_name", "policy_action", "policy_scope", "run_id", "task_id"})
    if (auto v = get(key); !v.empty())
      q.filters.emplace(key, v);
  return q;
}

std::string approvals_page_json(const std::vector<approval_record>& page, const approval_query& q,
                                const approval_summary& summary) {
  return json::object([&](writer& w) {
    w.Key("schema");
    w.String("fastreact.approvals.v1");
    w.Key("approvals");
    w.StartArray();
    for (auto& r : page)
      write_record(w, r);
    w.EndArray();
    w.Key("count");
    w.Uint64(page.size());
    w.Key("total_count");
    w.Int64(summary.count);
    w.Key("limit");
    w.Int64(q.limit);
    w.Key("offset");
    w.Int64(q.offset);
    w.Key("order");
    w.String(q.ascending ? "asc" : "desc");
    auto next = q.offset + static_cast<int64_t>(page.size());
    bool more = next < summary.count;
    w.Key("next_offset");
    if (more)
      w.Int64(next);
    else
      w.Null();
    w.Key("has_more");
    w.Bool(more);
    w.Key("pending_count");
    w.Int64(summary.pending_count);
    w.Key("summary");
    w.StartObject();
    w.Key("count");
    w.Int64(summary.count);
    w.Key("pending_count");
    w.Int64(summary.pending_count);
    w.Key("expired_count");
    w.Int64(summary.expired_count);
    json::write_counts(w, "status_counts", summary.status_counts);
    json::write_counts(w, "policy_action_counts", summary.policy_action_counts);
    w.Key("avg_resolution_ms");
    if (summary.avg_resolution_ms)
      w.Double(std::round(*summary.avg_resolution_ms * 100.0) / 100.0);
    else
      w.Null();
    w.EndObject();
    w.Key("filters");
    w.StartObject();
    for (auto& [k, v] : q.filters) {
      w.Key(k.c_str(), static_cast<rapidjson::SizeType>(k.size()));
      w.String(v);
    }
    w.EndObject();
  });
}

std::string resolution_json(const approval_record& r) {
  return json::object([&](writer& w) {
    w.Key("request_id");
    w.String(r.request_id);
    w.Key("approval_request_id");
    w.String(r.request_id);
    w.Key("status");
    w.String(r.status);
    optional_bool(w, "approved", r.approved);
    json::write_nullable(w, "resolved_at", r.resolved_at);
  });
}

std::string audit_json(const audit_record& r) {
  return json::object([&](writer& w) {
    w.Key("kind");
    w.String(r.kind);
    for (auto [key, v] : {std::pair{"run_id", &r.run_id}, {"session_id", &r.session_id}, {"tenant_key", &r.tenant_key},
                          {"user_key", &r.user_key}}) {
      w.Key(key);
      w.String(*v);
    }
    json::write_nullable(w, "request_id", r.request_id);
    json::write_nullable(w, "tool_call_id", r.tool_call_id);
    w.Key("tool_name");
    w.String(r.tool_name);
    w.Key("tool_args");
    json::write_raw(w, redact_json(r.tool_args));
    w.Key("decision_level");
    w.String(r.decision_level);
    w.Key("decision_reason");
    w.String(r.decision_reason);
    json::write_nullable(w, "pattern_matched", r.pattern_matched);
    json::write_nullable(w, "policy_scope", r.policy_scope);
    json::write_nullable(w, "policy_action", r.policy_action);
    w.Key("policy_matched");
    w.Bool(r.policy_matched);
    optional_bool(w, "approved", r.approved);
    w.Key("duration_ms");
    if (r.duration_ms)
      w.Double(*r.duration_ms);
    else
      w.Null();
    w.Key("result_summary");
    auto redacted = redact_text(r.result_summary); // before the cut, so no part of a secret is left
    auto summary = utf8_prefix(redacted, summary_chars);
    w.String(summary.data(), static_cast<rapidjson::SizeType>(summary.size()));
    w.Key("created_at");
    w.String(r.created_at);
  });
}

} // namespace troupe::protocol
