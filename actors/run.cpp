#include "actors/run.hpp"

#include "actors/errors.hpp"
#include "actors/tool_call.hpp"
#include "protocol/agent_loop.hpp"
#include "protocol/json.hpp"
#include "protocol/timestamp.hpp"
#include "protocol/workspace_path.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <map>

namespace troupe {

namespace {

using clock = std::chrono::steady_clock;
using protocol::json::writer;

void write_usage(writer& w, const protocol::token_usage& u) {
  w.StartObject();
  w.Key("prompt_tokens");
  w.Int64(u.prompt_tokens);
  w.Key("completion_tokens");
  w.Int64(u.completion_tokens);
  w.Key("total_tokens");
  w.Int64(u.total_tokens);
  w.EndObject();
}

struct run_state {
  static inline const char* name = "run";

  run_actor::pointer self = nullptr;
  std::shared_ptr<const run_environment> env;
  run_spec spec;
  std::vector<caf::actor> subscribers;

  std::string workspace_dir;
  std::string model_name;
  std::vector<protocol::tool_schema> visible_tools;
  std::vector<protocol::chat_message> conversation;
  clock::time_point started = clock::now();
  std::string created_at;

  int64_t sequence = 0;
  int step = 0;
  uint64_t model_seq = 0; // tags the inference in flight; stale replies are dropped
  clock::time_point model_started;
  std::shared_ptr<cancel_handle> model_call;
  protocol::token_usage usage_total;
  std::map<std::string, int64_t> tool_name_counts;
  std::vector<std::string> citations;
  std::string latest_step_text;

  // The tool calls of the current step, executed one after another (AS-18).
  std::vector<protocol::tool_call> pending_calls;
  std::size_t next_call = 0;
  tool_call_actor current_tool;

  bool ended = false;   // the attempt reached its end; no more events
  bool stopped = false; // fenced: nothing more is written

  protocol::agent_event make_event(std::string type, std::string content) {
    protocol::agent_event e;
    e.type = std::move(type);
    e.sequence = sequence++;
    e.run_id = spec.run_id;
    e.session_id = spec.request.session_id;
    e.timestamp = protocol::iso_now();
    e.content = std::move(content);
    return e;
  }

  template <class... Ts>
  void publish(const Ts&... xs) {
    for (auto& s : subscribers)
      caf::anon_send(s, xs...);
  }

  // Stores the event, then sends it to the subscribers (AS-90: nothing is seen before it is stored).
  // The store answers in order, so subscribers see the events in sequence.
  void emit(protocol::agent_event e) {
    if (!env->store) {
      publish(event_atom::value, e);
      return;
    }
    stored_event stored{e.sequence, e.type, protocol::to_json(e)};
    self->request(env->store, caf::infinite, append_atom::value, spec.run_id, spec.lease_epoch, std::move(stored))
      .then(
        [this, e = std::move(e)](bool) {
          env->metrics->event(e.type);
          publish(event_atom::value, e);
        },
        [this](caf::error& err) { fenced(err); });
  }

  // The attempt's lease is gone (or the store failed): stop without another write (AS-82).
  void fenced(const caf::error& err) {
    if (stopped)
      return;
    stopped = true;
    spdlog::warn("run {}: attempt {} stops: {}", spec.run_id, spec.attempt, message_of(err));
    env->metrics->attempt_ended("fenced", since_start_ms());
    stop_work();
    ended = true;
    self->quit();
  }

  void stop_work() {
    if (model_call)
      model_call->cancel();
    if (current_tool)
      self->send(current_tool, cancel_atom::value);
  }

  double since_start_ms() const { return protocol::elapsed_ms(started, clock::now()); }

  void start() {
    sequence = spec.first_sequence;
    created_at = protocol::iso_now();
    workspace_dir = protocol::user_workspace_dir(env->workspaces_root, spec.tenant_key, spec.user_key);
    model_name = spec.request.model.value_or(env->default_model);
    if (env->tools)
      visible_tools = env->tools->tools();
    conversation.push_back(protocol::text_message("system", protocol::system_prompt(visible_tools)));
    for (auto& m : protocol::clean_history(spec.request.history))
      conversation.push_back(std::move(m));
    conversation.push_back(protocol::text_message("user", spec.request.query));

    auto e = make_event("session_start", spec.request.query);
    e.metadata = protocol::json::object([&](writer& w) {
      w.Key("skills");
      w.StartArray();
      w.EndArray();
      w.Key("missing_skills");
      w.StartArray();
      w.EndArray();
      w.Key("tool_policy");
      protocol::json::write_raw(w, spec.request.tool_policy);
      w.Key("visible_tools");
      w.StartArray();
      for (auto& t : visible_tools)
        w.String(t.name);
      w.EndArray();
      w.Key("attempt");
      w.Int(spec.attempt);
      w.Key("model");
      w.String(model_name);
      w.Key("timing");
      w.StartObject();
      w.Key("time_to_first_event_ms");
      w.Double(since_start_ms());
      w.EndObject();
    });
    emit(std::move(e));
    infer();
  }

  void infer() {
    ++step;
    protocol::model_request req;
    req.model = model_name;
    req.messages = conversation;
    req.tools = visible_tools;
    req.temperature = spec.request.temperature;
    req.top_p = spec.request.top_p;
    req.max_tokens = spec.request.max_tokens.value_or(env->default_max_tokens);
    req.stream = env->stream;
    auto tag = ++model_seq;
    model_started = clock::now();
    run_actor me = self;
    model_call = env->model->infer(std::move(req), [me, tag](protocol::model_outcome outcome) {
      caf::anon_send(me, model_done_atom::value, tag, std::move(outcome));
    });
  }

  void on_model_done(uint64_t tag, protocol::model_outcome& outcome) {
    if (ended || tag != model_seq)
      return;
    model_call.reset();
    if (outcome.cancelled)
      return; // cancel() already ended the run
    env->metrics->model_call(protocol::elapsed_ms(model_started, clock::now()));
    if (!outcome.ok) {
      fail("LLM call failed: " + outcome.error, "upstream_model_error", outcome.retryable);
      return;
    }
    auto& reply = outcome.reply;
    usage_total += reply.usage;
    for (auto& c : reply.tool_calls)
      c.arguments = protocol::json::parse(c.arguments) ? c.arguments : std::string("{}");
    if (!reply.content.empty()) {
      latest_step_text = reply.content;
      emit(make_event("think", reply.content));
    } else if (!reply.tool_calls.empty()) {
      emit(make_event("think", "Using " + reply.tool_calls.front().name + " tool"));
    }
    for (auto& c : reply.tool_calls) {
      ++tool_name_counts[c.name];
      auto e = make_event("tool_call", "Calling " + c.name);
      e.tool_name = c.name;
      e.tool_args = c.arguments;
      e.tool_call_id = c.id;
      e.metadata = protocol::json::object([&](writer& w) {
        w.Key("call_id");
        w.String(c.id);
      });
      emit(std::move(e));
    }
    auto end = make_event("step_end", reply.content);
    end.metadata = protocol::json::object([&](writer& w) {
      w.Key("step");
      w.Int(step);
      w.Key("has_tool_calls");
      w.Bool(!reply.tool_calls.empty());
      w.Key("llm_usage");
      write_usage(w, reply.usage);
      w.Key("model");
      w.String(reply.model.empty() ? model_name : reply.model);
    });
    emit(std::move(end));

    auto assistant = protocol::text_message("assistant", reply.content);
    assistant.content_null = reply.content.empty() && !reply.tool_calls.empty();
    assistant.tool_calls = reply.tool_calls;
    conversation.push_back(std::move(assistant));
    if (reply.tool_calls.empty()) {
      finish_completed(reply.content.empty() ? latest_step_text : reply.content, "final_answer");
      return;
    }
    pending_calls = std::move(reply.tool_calls);
    next_call = 0;
    run_next_tool();
  }

  void run_next_tool() {
    if (next_call == pending_calls.size()) {
      pending_calls.clear();
      if (step >= env->limits.max_iterations)
        finish_completed("[STOPPED] Task stopped due to maximum iteration limit ("
                           + std::to_string(env->limits.max_iterations) + ").",
                         "max_iterations");
      else
        infer();
      return;
    }
    auto& c = pending_calls[next_call];
    tool_invocation call{spec.run_id, c.id, c.name, c.arguments, workspace_dir, spec.tenant_key, spec.user_key};
    current_tool = spawn_tool_call(self->system(), caf::actor_cast<caf::actor>(self), next_call, env->tools,
                                   std::move(call), env->limits.tool_timeout_seconds);
  }

  void on_tool_result(uint64_t index, tool_outcome& outcome, double duration_ms) {
    if (ended || index != next_call || next_call >= pending_calls.size())
      return;
    current_tool = nullptr;
    env->metrics->tool_call(duration_ms);
    auto& c = pending_calls[next_call];
    auto output = protocol::truncate_tool_output(std::move(outcome.output), env->limits.max_tool_output_chars);
    auto cited = protocol::harvest_citations(output);
    protocol::merge_citations(citations, cited);
    auto e = make_event("tool_result", output);
    e.tool_name = c.name;
    e.tool_args = c.arguments;
    e.tool_call_id = c.id;
    e.duration_ms = duration_ms;
    e.cited_source_ids = std::move(cited);
    e.metadata = protocol::json::object([&](writer& w) {
      w.Key("duration_ms");
      w.Double(duration_ms);
      w.Key("decision_level");
      w.Null();
      w.Key("approved");
      w.Null();
      w.Key("request_id");
      w.Null();
    });
    emit(std::move(e));
    auto tool_msg = protocol::text_message("tool", std::move(output));
    tool_msg.tool_call_id = c.id;
    tool_msg.name = c.name;
    conversation.push_back(std::move(tool_msg));
    ++next_call;
    run_next_tool();
  }

  void finish_completed(std::string answer, const char* stop_reason) {
    auto e = make_event("session_end", answer);
    e.cited_source_ids = citations;
    e.metadata = protocol::json::object([&](writer& w) {
      w.Key("stop_reason");
      w.String(stop_reason);
      w.Key("status");
      w.String("completed");
      w.Key("timing");
      w.StartObject();
      w.Key("time_to_final_ms");
      w.Double(since_start_ms());
      w.EndObject();
      w.Key("llm_usage_total");
      write_usage(w, usage_total);
    });
    emit(std::move(e));
    end("completed", std::move(answer), "");
  }

  // Ends the attempt with an `error` event; a retryable failure of a background run with attempts
  // left is re-queued instead of failing the run (AS-53).
  void fail(std::string message, const char* error_type, bool retryable = false) {
    auto e = make_event("error", message);
    e.duration_ms = since_start_ms();
    e.metadata = protocol::json::object([&](writer& w) {
      w.Key("error_type");
      w.String(error_type);
    });
    emit(std::move(e));
    if (retryable && spec.run_kind != "chat" && spec.attempt < spec.max_attempts) {
      requeue(std::move(message));
      return;
    }
    end(std::string(error_type) == "CancelledError" ? "cancelled" : "failed", "", std::move(message));
  }

  void cancel() {
    if (ended)
      return;
    stop_work();
    fail("Run cancelled", "CancelledError");
  }

  void requeue(std::string error) {
    ended = true;
    if (!env->store) {
      self->quit();
      return;
    }
    run_transition t;
    t.run_id = spec.run_id;
    t.lease_epoch = spec.lease_epoch;
    t.status = "queued";
    t.last_error = std::move(error);
    t.retry_seconds = protocol::retry_delay_seconds(spec.attempt, env->retry_base_seconds, env->retry_max_seconds);
    self->request(env->store, caf::infinite, transition_atom::value, std::move(t))
      .then(
        [this](run_record&) {
          env->metrics->attempt_ended("requeued", since_start_ms());
          self->quit();
        },
        [this](caf::error& err) { fenced(err); });
  }

  // The terminal transition is stored (with the trace) before anyone hears of the end.
  void end(std::string status, std::string answer, std::string error) {
    ended = true;
    run_result result{spec.run_id, spec.request.session_id, status, answer, error, since_start_ms(), sequence,
                      citations};
    if (!env->store) {
      publish(run_end_atom::value, result);
      self->quit();
      return;
    }
    run_transition t;
    t.run_id = spec.run_id;
    t.lease_epoch = spec.lease_epoch;
    t.status = status;
    t.error = std::move(error);
    t.trace.trace_type = spec.run_kind == "chat" ? "chat" : "background_run";
    t.trace.tool_name_counts = tool_name_counts;
    for (auto& [name, n] : tool_name_counts)
      t.trace.tool_call_count += n;
    t.trace.llm_usage_total = usage_total;
    t.trace.final_content = std::move(answer);
    t.trace.cited_source_ids = citations;
    self->request(env->store, caf::infinite, transition_atom::value, std::move(t))
      .then(
        [this, result = std::move(result)](run_record&) {
          save_session(result.status, result.content);
          env->metrics->attempt_ended(result.status, since_start_ms());
          publish(run_end_atom::value, result);
          self->quit();
        },
        [this](caf::error& err) { fenced(err); });
  }

  void save_session(const std::string& status, const std::string& answer) {
    session_record rec;
    rec.tenant_key = spec.tenant_key;
    rec.user_key = spec.user_key;
    rec.session_id = spec.request.session_id;
    rec.updated_at = protocol::iso_now();
    rec.created_at = rec.updated_at;
    rec.last_run_id = spec.run_id;
    rec.last_status = status;
    rec.last_query = spec.request.query;
    rec.last_answer = answer;
    self->send(env->store, save_session_atom::value, std::move(rec));
  }
};

run_actor::behavior_type run_behavior(run_actor::stateful_pointer<run_state> self,
                                      std::shared_ptr<const run_environment> env, run_spec spec,
                                      std::vector<caf::actor> subscribers) {
  auto& st = self->state;
  st.self = self;
  st.env = std::move(env);
  st.spec = std::move(spec);
  st.subscribers = std::move(subscribers);
  return {
    [=](start_atom) {
      if (self->state.created_at.empty())
        self->state.start();
    },
    [=](cancel_atom) { self->state.cancel(); },
    [=](subscribe_atom, caf::actor& subscriber) {
      self->state.subscribers.push_back(std::move(subscriber));
      return true;
    },
    [=](ping_atom) { return true; },
    [=](fenced_atom) { self->state.fenced(make_error(errc::conflict, "the lease keeper lost the run's lease")); },
    [=](model_done_atom, uint64_t tag, protocol::model_outcome& outcome) {
      self->state.on_model_done(tag, outcome);
    },
    [=](tool_result_atom, uint64_t index, tool_outcome& outcome, double ms) {
      self->state.on_tool_result(index, outcome, ms);
    },
  };
}

} // namespace

run_actor spawn_run(caf::actor_system& sys, std::shared_ptr<const run_environment> env, run_spec spec,
                    std::vector<caf::actor> subscribers) {
  return sys.spawn(run_behavior, std::move(env), std::move(spec), std::move(subscribers));
}

} // namespace troupe
