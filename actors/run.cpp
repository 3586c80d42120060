#include "actors/run.hpp"

#include "actors/agent_loop.hpp"
#include "actors/errors.hpp"
#include "protocol/agent_loop.hpp"
#include "protocol/context_window.hpp"
#include "protocol/digest_guard.hpp"
#include "protocol/json.hpp"
#include "protocol/redaction.hpp"
#include "protocol/model_round.hpp"
#include "protocol/round_reply.hpp"
#include "protocol/run_events.hpp"
#include "protocol/skills.hpp"
#include "protocol/timestamp.hpp"
#include "protocol/workspace_path.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <map>

namespace troupe {

namespace {

using clock = std::chrono::steady_clock;

std::string format_seconds(double s) {
  if (std::floor(s) == s)
    return std::to_string(static_cast<int64_t>(s));
  auto text = std::to_string(s);
  text.erase(text.find_last_not_of('0') + 1);
  return text;
}

// The agent service's dialect of the loop: a round's reply is one step — its text, then its calls
// run one after another (AS-18), each behind the run's tool policy, the service policy and, for a
// `danger` call, its approval — rendered as fastreact.agent_event.v1 events that are stored before
// anyone sees them.
struct run_state : loop_dialect {
  static inline const char* name = "run";

  run_actor::pointer self = nullptr;
  std::shared_ptr<const run_environment> env;
  run_spec spec;
  std::vector<caf::actor> subscribers;
  run_slots_actor slots;
  bool slot_released = false; // given back to the registry while an approval is awaited

  std::string workspace_dir;
  std::string model_name;
  std::vector<protocol::tool_schema> visible_tools;
  std::string instructions; // every round's system message (AS-19)
  std::vector<protocol::responses::item> history; // the item model; the model reads chat messages of it
  std::vector<protocol::responses::upstream_tool> offered;
  clock::time_point started = clock::now();
  std::string created_at;

  int64_t sequence = 0;
  std::unique_ptr<agent_loop> loop;
  clock::time_point model_started;
  protocol::reply_assembler assembler; // the round in flight, folded into one reply
  protocol::token_usage usage_total;
  std::map<std::string, int64_t> tool_name_counts;
  int64_t compression_count = 0; // rounds sent with less than the whole conversation (AS-24)
  std::vector<std::string> citations;
  std::string latest_step_text;

  protocol::run_tool_policy tool_policy; // AS-30, normalized once
  std::optional<protocol::digest_guard> digest; // AS-70, AS-71: a PSKA digest run's guards

  // How one call of the current step was decided (AS-32, AS-35, AS-44).
  struct gate {
    std::optional<std::string> policy_denial; // the run's tool_policy refuses it
    protocol::decision decision;
    std::optional<bool> approved;
    std::string request_id;
    protocol::digest_verdict digest; // AS-70, AS-71: a denied or rejected call does not run
  };

  // The tool calls of the current step, by the loop call's ref.
  std::vector<protocol::tool_call> pending_calls;
  std::vector<gate> gates;

  bool ended = false;   // the attempt reached its end; no more events
  bool stopped = false; // fenced: nothing more is written

  template <class... Ts>
  void publish(const Ts&... xs) {
    for (auto& s : subscribers)
      caf::anon_send(s, xs...);
  }

  // Renders the event as the run's next one, stores it, then sends it to the subscribers (AS-90:
  // nothing is seen before it is stored). The store answers in order, so subscribers see the events
  // in sequence. Secrets in its text are masked first (AS-85): the model saw the real text, the log
  // and every client see the masked one.
  void emit(const protocol::run_event& event) {
    auto e = protocol::render_event(spec.run_id, spec.request.session_id, sequence++, event);
    e.content = protocol::redact_text(e.content);
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
        [this](caf::error& err) { refused(err); });
  }

  // The attempt's lease is gone (or the store failed): stop without another write (AS-82).
  // A store write failed: refused by the lease epoch (counted, CJ-17), or the store is unreachable.
  void refused(const caf::error& err) {
    if (code_of(err) == errc::conflict)
      env->metrics->fenced_write();
    fenced(err);
  }

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

  void stop_work() { loop->stop(); }

  void append(const protocol::chat_message& m) {
    for (auto& it : protocol::responses::items_of({m}))
      history.push_back(std::move(it));
  }

  double since_start_ms() const { return protocol::elapsed_ms(started, clock::now()); }

  void start() {
    sequence = spec.first_sequence;
    created_at = protocol::iso_now();
    workspace_dir = protocol::user_workspace_dir(env->workspaces_root, spec.tenant_key, spec.user_key);
    model_name = spec.request.model.value_or(env->default_model);
    tool_policy = protocol::normalize_tool_policy(spec.request.tool_policy);
    digest = protocol::digest_guard::for_run(spec.request.metadata);
    if (env->tools)
      for (auto& t : env->tools->tools())
        if (tool_policy.visible(t.name)) // AS-31: hidden tools are never offered
          visible_tools.push_back(std::move(t));
    for (auto& t : visible_tools)
      offered.push_back({t.name, t.description, t.parameters, {}});
    history = protocol::responses::items_of(protocol::clean_history(spec.request.history));
    append(protocol::text_message("user", spec.request.query));

    protocol::run_events::session_start e{spec.request.query, tool_policy.json(), {}, spec.attempt, model_name,
                                          since_start_ms()};
    instructions = system_message(e);
    for (auto& t : visible_tools)
      e.visible_tools.push_back(t.name);
    emit(e);
    loop->start();
  }

  // AS-19, AS-25: one system message of the safety layer, the workspace's AGENTS.md and SOUL.md, the
  // tools and the skills the request selects, which the session_start names.
  std::string system_message(protocol::run_events::session_start& start) {
    protocol::prompt_layers layers;
    run_prompt_files files;
    if (env->prompts)
      files = env->prompts->load(workspace_dir);
    auto chosen = protocol::select_skills(files.skills, spec.request.skills, spec.request.query);
    for (auto& s : chosen.selected)
      start.skills.push_back(s.name);
    start.missing_skills = std::move(chosen.missing);
    layers.agents_md = std::move(files.agents_md);
    layers.soul_md = std::move(files.soul_md);
    layers.tools = visible_tools;
    layers.skills = std::move(chosen.selected);
    return protocol::system_prompt(layers);
  }

  // AS-23, AS-24: a conversation over the budget sends the system message, the first user message
  // and the last messages; the notice says so and the history itself stays whole.
  void fit_to_budget(protocol::responses::round_request& r) {
    auto messages = protocol::responses::chat_messages(history);
    messages.insert(messages.begin(), protocol::text_message("system", instructions));
    auto budget = protocol::context_budget(spec.request.max_context_tokens, env->loop.max_context_tokens,
                                           spec.request.max_tokens, env->default_max_tokens);
    auto fit = protocol::fit_context(std::move(messages), budget, env->loop.sliding_window_size);
    if (!fit.compressed)
      return;
    ++compression_count;
    fit.messages.erase(fit.messages.begin()); // the system message: the round's instructions
    r.history = protocol::responses::items_of(fit.messages);
    emit(protocol::run_events::compression_notice({fit.original_message_count, fit.kept_message_count,
                                                   fit.estimated_tokens_before, fit.estimated_tokens_after,
                                                   fit.budget_tokens}));
  }

  bool prepare_round(int, protocol::responses::round_request& r) override {
    r.model = model_name;
    r.instructions = instructions;
    r.temperature = spec.request.temperature;
    r.top_p = spec.request.top_p;
    r.history = history;
    fit_to_budget(r);
    r.tools = offered;
    r.max_output_tokens = spec.request.max_tokens.value_or(env->default_max_tokens);
    r.stream = env->stream;
    r.name_tool_messages = true;   // AS-19
    r.keep_unoffered_calls = true; // AS-31: the gate refuses them
    model_started = clock::now();
    assembler = {};
    return true;
  }

  batch on_batch(std::vector<protocol::responses::upstream_event>& events) override {
    for (auto& e : events)
      assembler.feed(e);
    return assembler.ended() ? batch::round_end : batch::more;
  }

  // The step's reply: its events, then its calls for the loop to run (none ends the run).
  bool on_round_end(std::vector<loop_call>& calls, after_calls& then) override {
    env->metrics->model_call(protocol::elapsed_ms(model_started, clock::now()));
    auto outcome = assembler.outcome();
    if (!outcome.ok) {
      fail("LLM call failed: " + outcome.error, "upstream_model_error", outcome.retryable);
      return false;
    }
    auto& reply = outcome.reply;
    usage_total += reply.usage;
    if (!reply.content.empty()) {
      latest_step_text = reply.content;
      emit(protocol::run_events::think{reply.content});
    } else if (!reply.tool_calls.empty()) {
      emit(protocol::run_events::think{"Using " + reply.tool_calls.front().name + " tool"});
    }
    gates.assign(reply.tool_calls.size(), gate{});
    for (std::size_t i = 0; i < reply.tool_calls.size(); ++i) {
      auto& c = reply.tool_calls[i];
      // AS-32, AS-33: a denied call is still recorded; an allowed pska_* call runs with the scope.
      auto denial = tool_policy.denial(c.name);
      bool scoped = false;
      if (!denial)
        if (auto args = protocol::apply_scope(tool_policy, c.name, c.arguments)) {
          c.arguments = std::move(*args);
          scoped = true;
        }
      gates[i].policy_denial = denial;
      // AS-70: a call over a digest run's budget shows as a notice, never as a tool_call.
      if (digest && !denial)
        gates[i].digest = digest->judge(c.name, c.arguments);
      if (gates[i].digest.what == protocol::digest_verdict::kind::denied) {
        emit(protocol::run_events::think{gates[i].digest.output, protocol::run_events::budget_denial{c.name, c.id}});
        continue;
      }
      ++tool_name_counts[c.name];
      // AS-85: the event shows the arguments masked
      emit(protocol::run_events::tool_call{c.name, protocol::redact_json(c.arguments), c.id, denial, scoped,
                                           denial || scoped ? tool_policy.json() : "null"});
    }
    emit(protocol::run_events::step_end{reply.content, loop->round(), !reply.tool_calls.empty(), reply.usage,
                                        model_name});

    auto assistant = protocol::text_message("assistant", reply.content);
    assistant.tool_calls = reply.tool_calls;
    append(assistant);
    if (reply.tool_calls.empty()) {
      finish_completed(reply.content.empty() ? latest_step_text : reply.content, "final_answer");
      return false;
    }
    pending_calls = std::move(reply.tool_calls);
    for (std::size_t i = 0; i < pending_calls.size(); ++i) {
      auto& c = pending_calls[i];
      loop_call call;
      call.ref = i;
      call.port = env->tools;
      call.invocation = {spec.run_id, c.id, c.name, c.arguments, workspace_dir, spec.tenant_key, spec.user_key};
      calls.push_back(std::move(call));
    }
    then = after_calls::next_round;
    return true;
  }

  // Every step with calls is followed by another round (then = next_round), so this is a backstop.
  void on_done() override { finish_completed(latest_step_text, "final_answer"); }

  void on_rounds_exhausted() override {
    finish_completed("[STOPPED] Task stopped due to maximum iteration limit ("
                       + std::to_string(env->loop.max_rounds) + ").",
                     "max_iterations");
  }

  // The gate before each call: the run's tool policy (AS-32), then the service policy (AS-35); a
  // `danger` call waits for its approval (AS-44). A call that does not run gets the outcome marker.
  admission admit_call(const loop_call& call, std::string& refusal) override {
    auto& c = pending_calls[call.ref];
    auto& g = gates[call.ref];
    if (g.digest.what != protocol::digest_verdict::kind::run) { // AS-70, AS-71: it does not run
      g.decision.level = protocol::decision_level::forbidden;
      g.decision.reason = g.digest.output;
      g.approved = false;
      refusal = g.digest.output;
      return admission::refuse;
    }
    if (g.policy_denial) {
      g.decision.level = protocol::decision_level::forbidden;
      g.decision.reason = *g.policy_denial;
      g.decision.policy_scope = "run_tool_policy";
      g.approved = false;
      refusal = "[TOOL_POLICY_DENIED] " + *g.policy_denial;
      return admission::refuse;
    }
    auto args = protocol::json::parse(c.arguments);
    g.decision = protocol::decide(env->policy, env->safety, c.name, *args, spec.user_key, spec.tenant_key);
    switch (g.decision.level) {
    case protocol::decision_level::forbidden:
      g.approved = false;
      refusal = "[SAFETY_BLOCKED] " + g.decision.reason;
      return admission::refuse;
    case protocol::decision_level::danger:
      if (!env->approvals) {
        g.approved = false;
        refusal = "[SAFETY_DENIED] " + g.decision.reason + " (no approval service)";
        return admission::refuse;
      }
      ask_approval(call);
      return admission::wait;
    default:
      if (!call.port) {
        refusal = "[ERROR] Tool " + c.name + " is not available";
        return admission::refuse;
      }
      return admission::run;
    }
  }

  // AS-46: the call waits for its approval without blocking anything; a retried attempt finds the
  // approval its earlier attempt opened (AS-81).
  void ask_approval(const loop_call& call) {
    auto& c = pending_calls[call.ref];
    auto& d = gates[call.ref].decision;
    protocol::approval_record r;
    r.run_id = spec.run_id;
    r.session_id = spec.request.session_id;
    r.tenant_key = spec.tenant_key;
    r.user_key = spec.user_key;
    r.task_id = task_id();
    r.tool_call_id = c.id;
    r.tool_name = c.name;
    r.tool_args = protocol::redact_record_json(c.arguments); // AS-85: stored; the call runs with c.arguments
    r.reason = d.reason;
    r.pattern_matched = d.pattern_matched.value_or("");
    r.policy_scope = d.policy_scope.value_or("");
    r.policy_action = d.policy_action.value_or("");
    r.policy_matched = d.policy_matched;
    r.timeout_seconds = env->approval_timeout_seconds;
    auto key = call.key;
    auto index = call.ref;
    self->request(env->approvals, caf::infinite, open_approval_atom::value, std::move(r))
      .then(
        [this, key, index](protocol::approval_record& opened) {
          if (ended)
            return;
          gates[index].request_id = opened.request_id;
          if (opened.status != "pending") {
            on_approval(key, index, opened);
            return;
          }
          emit_ask_user(opened);
          audit_approval_request(index, opened);
          release_slot();
          self->request(env->approvals, caf::infinite, await_atom::value, opened.request_id)
            .then(
              [this, key, index](protocol::approval_record& resolved) {
                with_slot([this, key, index, resolved] { on_approval(key, index, resolved); });
              },
              [this](caf::error& err) { fenced(err); });
        },
        [this](caf::error& err) { fenced(err); });
  }

  // AS-53: a run waiting on a person holds no concurrency slot, so waiting runs never stall the others.
  void release_slot() {
    if (!slots || slot_released)
      return;
    slot_released = true;
    self->send(slots, release_slot_atom::value, spec.run_id);
  }

  // Runs `next` once the attempt holds its slot again (at once when it never gave it back).
  void with_slot(std::function<void()> next) {
    if (!slot_released) {
      next();
      return;
    }
    self->request(slots, caf::infinite, acquire_slot_atom::value, spec.run_id)
      .then(
        [this, next = std::move(next)](bool) {
          slot_released = false;
          next();
        },
        [this](caf::error& err) { fenced(err); });
  }

  // The caller's metadata.task_id, which approvals record (AS-42).
  std::string task_id() const {
    auto doc = protocol::json::parse(spec.request.metadata);
    return doc ? protocol::json::get_string(*doc, "task_id") : std::string();
  }

  void emit_ask_user(const protocol::approval_record& r) {
    protocol::run_events::ask_user e{r};
    e.approval.tool_args = protocol::redact_json(r.tool_args); // AS-85
    emit(e);
  }

  void on_approval(uint64_t key, std::size_t index, const protocol::approval_record& r) {
    if (ended)
      return;
    auto& g = gates[index];
    g.request_id = r.request_id;
    g.approved = r.status == "approved";
    if (*g.approved)
      loop->admit(key);
    else
      loop->refuse(key, "[SAFETY_DENIED] Approval " + r.status + ": " + r.resolution_reason);
  }

  void audit_approval_request(std::size_t index, const protocol::approval_record& r) {
    auto a = audit_of(pending_calls[index], gates[index]);
    a.kind = "approval_request";
    a.request_id = r.request_id;
    a.approved.reset();
    self->send(env->store, audit_atom::value, std::move(a));
  }

  protocol::audit_record audit_of(const protocol::tool_call& c, const gate& g) const {
    protocol::audit_record a;
    a.run_id = spec.run_id;
    a.session_id = spec.request.session_id;
    a.tenant_key = spec.tenant_key;
    a.user_key = spec.user_key;
    a.request_id = g.request_id;
    a.tool_call_id = c.id;
    a.tool_name = c.name;
    a.tool_args = c.arguments;
    a.decision_level = protocol::to_string(g.decision.level);
    a.decision_reason = g.decision.reason;
    a.pattern_matched = g.decision.pattern_matched.value_or("");
    a.policy_scope = g.decision.policy_scope.value_or("");
    a.policy_action = g.decision.policy_action.value_or("");
    a.policy_matched = g.decision.policy_matched;
    a.approved = g.approved;
    a.created_at = protocol::iso_now();
    return a;
  }

  void on_call_end(const loop_call& call, call_result result) override {
    auto& c = pending_calls[call.ref];
    auto& g = gates[call.ref];
    auto output = std::move(result.outcome.output);
    if (g.digest.what == protocol::digest_verdict::kind::denied) {
      answer_call(c, std::move(output)); // AS-95: only the model sees the budget-denied call answered
      return;
    }
    env->metrics->tool_call(result.duration_ms);
    auto cited = protocol::harvest_citations(output);
    protocol::merge_citations(citations, cited);
    // AS-13: a policy-denied or rejected result names its call, which reference consumers rely on.
    bool rejected = g.digest.what == protocol::digest_verdict::kind::rejected;
    emit(protocol::run_events::tool_result{output, c.name, protocol::redact_json(c.arguments), c.id,
                                           result.duration_ms, std::move(cited),
                                           protocol::to_string(g.decision.level), g.approved,
                                           g.policy_denial || rejected ? c.id : g.request_id, g.policy_denial,
                                           rejected});
    if (env->store) {
      auto a = audit_of(c, g);
      a.kind = "execution";
      a.duration_ms = result.duration_ms;
      a.result_summary = output;
      self->send(env->store, audit_atom::value, std::move(a));
    }
    answer_call(c, std::move(output));
  }

  // The tool message that answers a call in the history the model reads (AS-19).
  void answer_call(const protocol::tool_call& c, std::string output) {
    auto tool_msg = protocol::text_message("tool", std::move(output));
    tool_msg.tool_call_id = c.id;
    append(tool_msg);
  }

  std::string timeout_output(double seconds) const override {
    return "[ERROR] Tool timed out after " + format_seconds(seconds) + " seconds";
  }
  std::string truncation_notice(std::size_t dropped) const override { return protocol::truncation_notice(dropped); }

  void finish_completed(std::string answer, const char* stop_reason) {
    answer = protocol::redact_text(answer); // AS-85: the answer is stored in the event, trace and session
    emit(protocol::run_events::session_end{answer, citations, stop_reason, since_start_ms(), usage_total});
    end("completed", std::move(answer), "");
  }

  // Ends the attempt with an `error` event; a retryable failure of a background run with attempts
  // left is re-queued instead of failing the run (AS-53).
  void fail(std::string message, const char* error_type, bool retryable = false) {
    emit(protocol::run_events::error{message, error_type, since_start_ms()});
    if (retryable && spec.run_kind != "chat" && spec.attempt - spec.handoffs < spec.max_attempts) {
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
    stop_work();
    if (!env->store) {
      self->quit();
      return;
    }
    run_transition t;
    t.run_id = spec.run_id;
    t.lease_epoch = spec.lease_epoch;
    t.status = "queued";
    t.last_error = protocol::redact_text(error);
    t.retry_seconds = protocol::retry_delay_seconds(spec.attempt, env->retry_base_seconds, env->retry_max_seconds);
    self->request(env->store, caf::infinite, transition_atom::value, std::move(t))
      .then(
        [this](run_record&) {
          env->metrics->attempt_ended("requeued", since_start_ms());
          self->quit();
        },
        [this](caf::error& err) { refused(err); });
  }

  // The terminal transition is stored (with the trace) before anyone hears of the end.
  void end(std::string status, std::string answer, std::string error) {
    ended = true;
    stop_work();
    if (env->approvals) // AS-81: what the run still waited for is denied
      self->send(env->approvals, run_ended_atom::value, spec.run_id,
                 std::string(status == "cancelled" ? "run_cancelled" : "run_terminated"));
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
    t.error = protocol::redact_text(error);
    t.trace.trace_type = spec.run_kind == "chat" ? "chat" : "background_run";
    t.trace.tool_name_counts = tool_name_counts;
    t.trace.compression_count = compression_count;
    for (auto& [name, n] : tool_name_counts)
      t.trace.tool_call_count += n;
    t.trace.llm_usage_total = usage_total;
    t.trace.final_content = std::move(answer);
    t.trace.cited_source_ids = citations;
    if (digest)
      t.trace.pska_digest = digest->report();
    self->request(env->store, caf::infinite, transition_atom::value, std::move(t))
      .then(
        [this, result = std::move(result)](run_record&) {
          save_session(result.status, result.content);
          env->metrics->attempt_ended(result.status, since_start_ms());
          publish(run_end_atom::value, result);
          self->quit();
        },
        [this](caf::error& err) { refused(err); });
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
    rec.last_query = protocol::redact_text(spec.request.query);
    rec.last_answer = answer;
    self->send(env->store, save_session_atom::value, std::move(rec));
  }
};

run_actor::behavior_type run_behavior(run_actor::stateful_pointer<run_state> self,
                                      std::shared_ptr<const run_environment> env, run_spec spec,
                                      std::vector<caf::actor> subscribers, run_slots_actor slots) {
  auto& st = self->state;
  st.self = self;
  st.env = std::move(env);
  st.spec = std::move(spec);
  st.subscribers = std::move(subscribers);
  st.slots = std::move(slots);
  st.loop = std::make_unique<agent_loop>(self, st.env->model, st.env->loop, st);
  self->set_down_handler([self](caf::down_msg& down) { self->state.loop->on_down(down); });
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
    [=](fenced_atom) { self->state.fenced(make_error(errc::conflict, "the run's lease is no longer held")); },
    [=](upstream_atom, uint64_t tag, std::vector<protocol::responses::upstream_event>& events) {
      self->state.loop->on_upstream(tag, events);
    },
    [=](tool_result_atom, uint64_t key, call_result& result) { self->state.loop->on_tool_result(key, result); },
  };
}

} // namespace

run_actor spawn_run(caf::actor_system& sys, std::shared_ptr<const run_environment> env, run_spec spec,
                    std::vector<caf::actor> subscribers, run_slots_actor slots) {
  return sys.spawn(run_behavior, std::move(env), std::move(spec), std::move(subscribers), std::move(slots));
}

} // namespace troupe
