#include "protocol/run_events.hpp"

#include "protocol/json.hpp"
#include "protocol/timestamp.hpp"

namespace troupe::protocol {

void write_usage(json::writer& w, const char* key, const token_usage& u) {
  w.Key(key);
  w.StartObject();
  w.Key("prompt_tokens");
  w.Int64(u.prompt_tokens);
  w.Key("completion_tokens");
  w.Int64(u.completion_tokens);
  w.Key("total_tokens");
  w.Int64(u.total_tokens);
  w.EndObject();
}

namespace {

using json::writer;

void write_timing(writer& w, const char* key, double ms) {
  w.Key("timing");
  w.StartObject();
  w.Key(key);
  w.Double(ms);
  w.EndObject();
}

// The call an event is about.
void name_call(agent_event& e, const std::string& name, const std::string& arguments, const std::string& call_id) {
  e.tool_name = name;
  e.tool_args = arguments;
  e.tool_call_id = call_id;
}

// Fills an event's type, fields and metadata from one run event. Key order is part of the wire
// (the conformance suite pins it).
struct renderer {
  agent_event& e;

  void operator()(const run_events::session_start& s) {
    e.type = "session_start";
    e.content = s.query;
    e.metadata = json::object([&](writer& w) {
      json::write_strings(w, "skills", s.skills);
      json::write_strings(w, "missing_skills", s.missing_skills);
      w.Key("tool_policy");
      json::write_raw(w, s.tool_policy);
      w.Key("visible_tools");
      w.StartArray();
      for (auto& t : s.visible_tools)
        w.String(t);
      w.EndArray();
      w.Key("attempt");
      w.Int(s.attempt);
      w.Key("model");
      w.String(s.model);
      write_timing(w, "time_to_first_event_ms", s.time_to_first_event_ms);
    });
  }

  void operator()(const run_events::think& t) {
    e.type = "think";
    e.content = t.content;
    if (t.compressed) {
      auto& c = *t.compressed;
      e.metadata = json::object([&](writer& w) {
        w.Key("compression_event");
        w.Bool(true);
        w.Key("compression");
        w.StartObject();
        w.Key("original_message_count");
        w.Uint64(c.original_message_count);
        w.Key("kept_message_count");
        w.Uint64(c.kept_message_count);
        w.Key("estimated_tokens_before");
        w.Int64(c.estimated_tokens_before);
        w.Key("estimated_tokens_after");
        w.Int64(c.estimated_tokens_after);
        w.Key("budget_tokens");
        w.Int64(c.budget_tokens);
        w.EndObject();
      });
      return;
    }
    if (!t.budget_denied)
      return;
    e.metadata = json::object([&](writer& w) {
      w.Key("tool_budget_denied");
      w.Bool(true);
      w.Key("tool_name");
      w.String(t.budget_denied->tool_name);
      w.Key("call_id");
      w.String(t.budget_denied->call_id);
    });
  }

  void operator()(const run_events::tool_call& c) {
    e.type = "tool_call";
    e.content = "Calling " + c.name;
    name_call(e, c.name, c.arguments, c.call_id);
    e.metadata = json::object([&](writer& w) {
      w.Key("call_id");
      w.String(c.call_id);
      if (c.denial || c.scoped) {
        w.Key(c.denial ? "tool_policy_denied" : "tool_policy_scope_applied");
        w.Bool(true);
        w.Key("tool_policy");
        json::write_raw(w, c.tool_policy);
      }
      if (c.denial) {
        w.Key("denial_reason");
        w.String(*c.denial);
      }
    });
  }

  void operator()(const run_events::step_end& s) {
    e.type = "step_end";
    e.content = s.content;
    e.metadata = json::object([&](writer& w) {
      w.Key("step");
      w.Int(s.step);
      w.Key("has_tool_calls");
      w.Bool(s.has_tool_calls);
      write_usage(w, "llm_usage", s.usage);
      w.Key("model");
      w.String(s.model);
    });
  }

  void operator()(const run_events::ask_user& a) {
    auto& r = a.approval;
    e.type = "ask_user";
    e.content = r.reason;
    name_call(e, r.tool_name, r.tool_args, r.tool_call_id);
    e.approval_request_id = r.request_id;
    e.metadata = json::object([&](writer& w) {
      w.Key("request_id");
      w.String(r.request_id);
      w.Key("decision_level");
      w.String("danger");
      json::write_nullable(w, "pattern_matched", r.pattern_matched);
      w.Key("timeout_seconds");
      w.Double(r.timeout_seconds);
      w.Key("expires_at");
      w.String(r.expires_at);
      json::write_nullable(w, "policy_scope", r.policy_scope);
      json::write_nullable(w, "policy_action", r.policy_action);
      w.Key("policy_matched");
      w.Bool(r.policy_matched);
    });
  }

  void operator()(const run_events::tool_result& t) {
    e.type = "tool_result";
    e.content = t.output;
    name_call(e, t.name, t.arguments, t.call_id);
    e.duration_ms = t.duration_ms;
    e.cited_source_ids = t.cited_source_ids;
    e.metadata = json::object([&](writer& w) {
      w.Key("duration_ms");
      w.Double(t.duration_ms);
      w.Key("decision_level");
      w.String(t.decision_level);
      w.Key("approved");
      if (t.approved)
        w.Bool(*t.approved);
      else
        w.Null();
      json::write_nullable(w, "request_id", t.request_id);
      if (t.denial) {
        w.Key("tool_policy_denied");
        w.Bool(true);
        w.Key("denial_reason");
        w.String(*t.denial);
      }
      if (t.digest_validation_error) {
        w.Key("digest_validation_error");
        w.Bool(true);
      }
    });
  }

  void operator()(const run_events::session_end& s) {
    e.type = "session_end";
    e.content = s.answer;
    e.cited_source_ids = s.cited_source_ids;
    e.metadata = json::object([&](writer& w) {
      w.Key("stop_reason");
      w.String(s.stop_reason);
      w.Key("status");
      w.String("completed");
      write_timing(w, "time_to_final_ms", s.time_to_final_ms);
      write_usage(w, "llm_usage_total", s.usage_total);
    });
  }

  void operator()(const run_events::error& x) {
    e.type = "error";
    e.content = x.message;
    e.duration_ms = x.duration_ms;
    e.metadata = json::object([&](writer& w) {
      w.Key("error_type");
      w.String(x.error_type);
    });
  }
};

} // namespace

namespace run_events {

think compression_notice(const compression& c) {
  return think{"[CONTEXT_COMPRESSION] Sliding-window context compression applied", std::nullopt, c};
}

} // namespace run_events

agent_event render_event(std::string run_id, std::string session_id, int64_t sequence, const run_event& event) {
  agent_event e;
  e.sequence = sequence;
  e.run_id = std::move(run_id);
  e.session_id = std::move(session_id);
  e.timestamp = iso_now();
  std::visit(renderer{e}, event);
  return e;
}

} // namespace troupe::protocol
