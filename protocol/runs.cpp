#include "protocol/runs.hpp"

#include "protocol/agent_event.hpp"
#include "protocol/json.hpp"
#include "protocol/run_events.hpp"

#include <algorithm>
#include <cmath>

namespace troupe::protocol {

namespace {

using json::writer;

constexpr int64_t max_page = 1000;
constexpr std::size_t preview_chars = 500;

void raw_or_null(writer& w, const char* key, const std::string& v) {
  w.Key(key);
  if (v.empty())
    w.Null();
  else
    json::write_raw(w, v);
}

void write_snapshot(writer& w, const run_record& r) {
  w.Key("run_id");
  w.String(r.run_id);
  w.Key("session_id");
  w.String(r.session_id);
  w.Key("status");
  w.String(r.status);
  w.Key("created_at");
  w.String(r.created_at);
  json::write_nullable(w, "started_at", r.started_at);
  json::write_nullable(w, "completed_at", r.completed_at);
  json::write_nullable(w, "cancelled_at", r.cancelled_at);
  w.Key("duration_ms");
  if (r.duration_ms)
    w.Double(*r.duration_ms);
  else
    w.Null();
  w.Key("event_count");
  w.Int64(r.event_count);
  json::write_nullable(w, "error", r.error);
  raw_or_null(w, "metadata", r.metadata);
  raw_or_null(w, "generation_options", r.generation_options);
  w.Key("attempts");
  w.Int(r.attempts);
  w.Key("max_attempts");
  w.Int(r.max_attempts);
  json::write_nullable(w, "lease_expires_at", r.lease_expires_at);
  json::write_nullable(w, "retry_after", r.retry_after);
  json::write_nullable(w, "worker_id", r.worker_id);
  json::write_nullable(w, "last_error", r.last_error);
  w.Key("lease_epoch");
  w.Int64(r.lease_epoch);
  w.Key("run_kind");
  w.String(r.run_kind);
  w.Key("tenant_key");
  w.String(r.tenant_key);
  w.Key("user_key");
  w.String(r.user_key);
  w.Key("updated_at");
  w.String(r.updated_at);
}

void list_tail(writer& w, std::size_t count, int64_t total_count, int64_t limit) {
  w.Key("count");
  w.Uint64(count);
  w.Key("total_count");
  w.Int64(total_count);
  w.Key("limit");
  w.Int64(limit);
  w.Key("has_more");
  w.Bool(static_cast<int64_t>(count) < total_count);
}

} // namespace

bool is_terminal(std::string_view status) {
  return status == "completed" || status == "failed" || status == "cancelled";
}

std::string run_snapshot_json(const run_record& r) {
  return json::object([&](writer& w) {
    w.Key("type");
    w.String("run");
    write_snapshot(w, r);
  });
}

std::variant<page_query, request_error> parse_page_query(const std::string& limit, const std::string& after_sequence) {
  page_query q;
  if (!limit.empty()) {
    auto v = parse_query_integer("limit", limit);
    if (auto err = std::get_if<request_error>(&v))
      return std::move(*err);
    auto n = std::get<int64_t>(v);
    if (n < 0)
      return bad_request("limit must be >= 0");
    q.limit = std::min(n, max_page);
  }
  if (!after_sequence.empty()) {
    auto v = parse_query_integer("after_sequence", after_sequence);
    if (auto err = std::get_if<request_error>(&v))
      return std::move(*err);
    q.after_sequence = std::max<int64_t>(std::get<int64_t>(v), -1);
  }
  return q;
}

std::variant<int64_t, request_error> parse_list_limit(const std::string& limit) {
  // One rule with the events page (AS-51): the lists' own requirements (AS-50, AS-55) set none.
  auto q = parse_page_query(limit, "");
  if (auto err = std::get_if<request_error>(&q))
    return std::move(*err);
  return std::get<page_query>(q).limit;
}

std::string events_page_json(const run_record& run, const page_query& q, const std::vector<stored_event>& events,
                             bool with_run) {
  return json::object([&](writer& w) {
    w.Key("run_id");
    w.String(run.run_id);
    if (with_run) {
      w.Key("session_id");
      w.String(run.session_id);
      w.Key("status");
      w.String(run.status);
    }
    w.Key("events");
    w.StartArray();
    for (auto& e : events)
      json::write_raw(w, e.json);
    w.EndArray();
    w.Key("count");
    w.Uint64(events.size());
    w.Key("event_count");
    w.Int64(run.event_count);
    w.Key("total_event_count");
    w.Int64(run.event_count);
    w.Key("after_sequence");
    w.Int64(q.after_sequence);
    auto next = events.empty() ? q.after_sequence : events.back().sequence;
    w.Key("next_after_sequence");
    w.Int64(next);
    w.Key("has_more");
    w.Bool(next + 1 < run.event_count);
  });
}

std::string runs_list_json(const std::vector<run_record>& runs, int64_t total_count, int64_t limit) {
  return json::object([&](writer& w) {
    w.Key("runs");
    w.StartArray();
    for (auto& r : runs) {
      w.StartObject();
      w.Key("type");
      w.String("run");
      write_snapshot(w, r);
      w.EndObject();
    }
    w.EndArray();
    list_tail(w, runs.size(), total_count, limit);
  });
}

attempt_end cancelled_end() {
  return {"Run cancelled", "CancelledError"};
}

lapse_ends lapsed_lease_ends() {
  return {{"Recovered stale running lease", "lease_expired"}, {"Run lease expired and no attempts remain", "lease_expired"}};
}

attempt_end handed_back_end(const std::string& node_id) {
  return {"Handed back by draining node " + node_id, "handed_back"};
}

stored_event closing_event(const run_record& run, const attempt_end& end) {
  auto e = error_event(run.run_id, run.session_id, run.event_count, end.message, end.error_type);
  return {e.sequence, e.type, to_json(e)};
}

attempt_log interrupted_attempt(int64_t first_sequence, int64_t event_count, std::string_view last_event_type) {
  if (event_count <= first_sequence)
    return attempt_log::unwritten;
  if (last_event_type == "session_end")
    return attempt_log::finished;
  return last_event_type == "error" ? attempt_log::ended : attempt_log::open;
}

trace_facts unfinished_trace_facts(const run_record& run) {
  trace_facts f;
  f.trace_type = run.run_kind == "chat" ? "chat" : "background_run";
  return f;
}

std::string trace_json(const run_record& run, const trace_facts& facts) {
  return json::object([&](writer& w) {
    w.Key("trace_type");
    w.String(facts.trace_type);
    w.Key("run_id");
    w.String(run.run_id);
    w.Key("session_id");
    w.String(run.session_id);
    w.Key("tenant_key");
    w.String(run.tenant_key);
    w.Key("user_key");
    w.String(run.user_key);
    w.Key("status");
    w.String(run.status);
    w.Key("created_at");
    w.String(run.created_at);
    json::write_nullable(w, "completed_at", run.completed_at);
    w.Key("duration_ms");
    if (run.duration_ms)
      w.Double(*run.duration_ms);
    else
      w.Null();
    w.Key("event_count");
    w.Int64(run.event_count);
    w.Key("attempts");
    w.Int(run.attempts);
    w.Key("tool_call_count");
    w.Int64(facts.tool_call_count);
    w.Key("tool_name_counts");
    w.StartObject();
    for (auto& [name, n] : facts.tool_name_counts) {
      w.Key(name.c_str(), static_cast<rapidjson::SizeType>(name.size()));
      w.Int64(n);
    }
    w.EndObject();
    w.Key("approval_count");
    w.Int(0);
    w.Key("compression_count");
    w.Int64(facts.compression_count);
    write_usage(w, "llm_usage_total", facts.llm_usage_total);
    w.Key("final_content");
    w.String(facts.final_content);
    auto truncated = facts.final_content.size() > preview_chars;
    w.Key("final_content_preview");
    w.String(truncated ? facts.final_content.substr(0, preview_chars) : facts.final_content);
    w.Key("final_content_truncated");
    w.Bool(truncated);
    w.Key("final_content_length");
    w.Uint64(facts.final_content.size());
    json::write_nullable(w, "error", run.error);
    raw_or_null(w, "metadata", run.metadata);
    raw_or_null(w, "generation_options", run.generation_options);
    json::write_nullable(w, "policy_snapshot_hash", run.policy_snapshot_hash);
    w.Key("cited_source_ids");
    w.StartArray();
    for (auto& id : facts.cited_source_ids)
      w.String(id);
    w.EndArray();
    write_digest_budget(w, "pska_digest_tool_budget", facts.pska_digest);
  });
}

std::string traces_list_json(const std::vector<std::string>& traces, int64_t total_count, int64_t limit) {
  return json::object([&](writer& w) {
    w.Key("traces");
    w.StartArray();
    for (auto& t : traces)
      json::write_raw(w, t);
    w.EndArray();
    list_tail(w, traces.size(), total_count, limit);
  });
}

std::string generation_options_json(const chat_request& request) {
  return json::object([&](writer& w) {
    w.Key("model");
    if (request.model)
      w.String(*request.model);
    else
      w.Null();
    w.Key("temperature");
    if (request.temperature)
      w.Double(*request.temperature);
    else
      w.Null();
    w.Key("top_p");
    if (request.top_p)
      w.Double(*request.top_p);
    else
      w.Null();
    w.Key("max_tokens");
    if (request.max_tokens)
      w.Int64(*request.max_tokens);
    else
      w.Null();
  });
}

double retry_delay_seconds(int attempts, double base_seconds, double max_seconds) {
  auto exponent = std::clamp(attempts - 1, 0, 62);
  return std::min(max_seconds, base_seconds * std::ldexp(1.0, exponent));
}

} // namespace troupe::protocol
