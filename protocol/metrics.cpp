#include "protocol/metrics.hpp"

#include "protocol/agent_event.hpp"
#include "protocol/json.hpp"
#include "protocol/timestamp.hpp"

#include <cmath>

namespace troupe::protocol {

namespace {

using json::writer;

// Averages are shown to 2 decimals, like every `*_ms` of the service.
void optional_number(writer& w, const char* key, const std::optional<double>& v) {
  w.Key(key);
  if (v)
    w.Double(std::round(*v * 100.0) / 100.0);
  else
    w.Null();
}

void integer(writer& w, const char* key, int64_t v) {
  w.Key(key);
  w.Int64(v);
}

int64_t count_of(const std::map<std::string, int64_t>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? 0 : it->second;
}

void pska_digest(writer& w, const pska_digest_stats& d) {
  w.Key("pska_digest");
  w.StartObject();
  integer(w, "run_count", d.run_count);
  integer(w, "write_call_count", d.write_call_count);
  integer(w, "job_context_call_count", d.job_context_call_count);
  integer(w, "tool_budget_exceeded_count", d.tool_budget_exceeded_count);
  w.Key("recent_budget_exceeded");
  w.StartArray();
  for (auto& r : d.recent_budget_exceeded) {
    w.StartObject();
    w.Key("run_id");
    w.String(r.run_id);
    w.Key("session_id");
    w.String(r.session_id);
    w.Key("completed_at");
    w.String(r.completed_at);
    json::write_counts(w, "tool_budget", r.budget.tool_budget);
    integer(w, "write_call_count", r.budget.write_call_count);
    integer(w, "job_context_call_count", r.budget.job_context_call_count);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

} // namespace

std::string metrics_json(const store_stats& s, uint64_t live_count, bool with_paths) {
  return json::object([&](writer& w) {
    w.Key("schema");
    w.String("fastreact.metrics.v1");
    w.Key("service_contract");
    w.String(agent_event_schema);
    w.Key("timestamp");
    w.String(iso_now());
    w.Key("runs");
    w.StartObject();
    integer(w, "live_count", static_cast<int64_t>(live_count));
    integer(w, "trace_count", s.trace_count);
    json::write_counts(w, "status_counts", s.trace_status_counts);
    optional_number(w, "avg_duration_ms", s.avg_duration_ms);
    w.Key("durable");
    w.StartObject();
    integer(w, "total_count", s.run_count);
    json::write_counts(w, "status_counts", s.run_status_counts);
    integer(w, "queued_count", count_of(s.run_status_counts, "queued"));
    integer(w, "ready_queued_count", s.ready_queued_count);
    integer(w, "delayed_queued_count", s.delayed_queued_count);
    integer(w, "running_count", count_of(s.run_status_counts, "running"));
    integer(w, "stale_lease_count", s.stale_lease_count);
    integer(w, "replay_event_count", s.event_count);
    w.EndObject();
    w.EndObject();

    w.Key("events");
    w.StartObject();
    integer(w, "total_count", s.event_count);
    integer(w, "error_count", s.error_event_count);
    w.EndObject();
    w.Key("tools");
    w.StartObject();
    integer(w, "audit_count", s.audit_count);
    optional_number(w, "avg_duration_ms", s.avg_tool_duration_ms);
    w.EndObject();
    w.Key("llm");
    w.StartObject();
    w.Key("usage_total");
    w.StartObject();
    integer(w, "prompt_tokens", s.usage_total.prompt_tokens);
    integer(w, "completion_tokens", s.usage_total.completion_tokens);
    integer(w, "total_tokens", s.usage_total.total_tokens);
    w.EndObject();
    w.EndObject();
    w.Key("integrations");
    w.StartObject();
    pska_digest(w, s.pska_digest);
    w.EndObject();
    w.Key("approvals");
    w.StartObject();
    integer(w, "count", s.approvals.count);
    integer(w, "pending_count", s.approvals.pending_count);
    integer(w, "expired_count", s.approvals.expired_count);
    json::write_counts(w, "status_counts", s.approvals.status_counts);
    optional_number(w, "avg_resolution_ms", s.approvals.avg_resolution_ms);
    w.EndObject();
    w.Key("tasks");
    w.StartObject();
    integer(w, "count", 0);
    w.EndObject();
    w.Key("errors");
    w.StartObject();
    integer(w, "count", s.error_event_count);
    w.Key("recent");
    w.StartArray();
    for (auto& e : s.recent_errors)
      json::write_raw(w, e);
    w.EndArray();
    w.EndObject();
    if (!with_paths)
      return;
    w.Key("store");
    w.StartObject();
    w.Key("root");
    w.String(s.root);
    w.Key("streams");
    w.StartObject();
    int64_t records = 0, bytes = 0;
    for (auto& st : s.streams) {
      w.Key(st.name.c_str(), static_cast<rapidjson::SizeType>(st.name.size()));
      w.StartObject();
      integer(w, "records", st.records);
      integer(w, "bytes", st.bytes);
      w.Key("last_created_at");
      if (st.last_created_at.empty())
        w.Null();
      else
        w.String(st.last_created_at);
      w.EndObject();
      records += st.records;
      bytes += st.bytes;
    }
    w.EndObject();
    integer(w, "total_records", records);
    integer(w, "total_bytes", bytes);
    if (s.postgres) {
      w.Key("pg");
      w.StartObject();
      integer(w, "dead_tuples", s.postgres->dead_tuples);
      w.Key("oldest_xact_age_seconds");
      w.Double(s.postgres->oldest_xact_age_seconds);
      w.EndObject();
    }
    w.EndObject();
  });
}

} // namespace troupe::protocol
