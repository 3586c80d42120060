#include "protocol/agent_event.hpp"

#include "protocol/json.hpp"
#include "protocol/run_events.hpp"
#include "protocol/sse.hpp"

namespace troupe::protocol {

namespace {

void optional_string(json::writer& w, const char* key, const std::optional<std::string>& v) {
  w.Key(key);
  if (v)
    w.String(*v);
  else
    w.Null();
}

std::string event_id(const std::string& run_id, int64_t sequence) {
  return run_id + ":" + std::to_string(sequence);
}

} // namespace

agent_event error_event(std::string run_id, std::string session_id, int64_t sequence, std::string message,
                        std::string_view error_type) {
  return render_event(std::move(run_id), std::move(session_id), sequence,
                      run_events::error{std::move(message), std::string(error_type), std::nullopt});
}

std::string to_json(const agent_event& e) {
  rapidjson::StringBuffer buf;
  json::writer w(buf);
  w.StartObject();
  w.Key("schema");
  w.String(agent_event_schema);
  w.Key("type");
  w.String(e.type);
  w.Key("event_id");
  w.String(event_id(e.run_id, e.sequence));
  w.Key("sequence");
  w.Int64(e.sequence);
  w.Key("parent_event_id");
  if (e.sequence > 0)
    w.String(event_id(e.run_id, e.sequence - 1));
  else
    w.Null();
  w.Key("run_id");
  w.String(e.run_id);
  w.Key("session_id");
  w.String(e.session_id);
  w.Key("timestamp");
  w.String(e.timestamp);
  w.Key("content");
  w.String(e.content);
  optional_string(w, "tool_name", e.tool_name);
  w.Key("tool_args");
  if (e.tool_args)
    json::write_raw(w, *e.tool_args);
  else
    w.Null();
  optional_string(w, "tool_call_id", e.tool_call_id);
  w.Key("duration_ms");
  if (e.duration_ms)
    w.Double(*e.duration_ms);
  else
    w.Null();
  w.Key("cited_source_ids");
  w.StartArray();
  for (auto& id : e.cited_source_ids)
    w.String(id);
  w.EndArray();
  optional_string(w, "approval_request_id", e.approval_request_id);
  w.Key("metadata");
  json::write_raw(w, e.metadata);
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

std::string to_sse_frame(const agent_event& e) {
  return sse_frame(e.sequence, e.type, to_json(e));
}

} // namespace troupe::protocol
