#include "actors/response_run.hpp"

#include "actors/agent_loop.hpp"
#include "actors/errors.hpp"
#include "actors/response_rows.hpp"
#include "actors/search_port.hpp"
#include "actors/tool_router.hpp"
#include "protocol/json.hpp"
#include "protocol/mcp.hpp"
#include "protocol/response_phase.hpp"
#include "protocol/responses_mcp.hpp"
#include "protocol/responses_replay.hpp"
#include "protocol/responses_search.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>

namespace troupe {

namespace rs = protocol::responses;
using rs::response_status;

namespace {

// Batches a foreground run may send ahead before it stops reading the upstream: read and write overlap (RS-39).
constexpr int unacknowledged_window = 8;
// How soon a backlogged streaming client is looked at again.

int64_t epoch_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct run_state {
  std::shared_ptr<const response_environment> env;
  caf::actor registry; // told when the run ends
  bool left = false;   // the registry was told
  response_job job;
  std::unique_ptr<rs::response_stream> stream;
  std::map<std::string, rs::gateway_route> routes; // by model-facing name
  std::vector<rs::upstream_tool> function_tools;
  std::vector<rs::upstream_tool> mcp_tools;
  rs::usage tokens;
  // The dialect before the loop: the loop goes first when the state is torn down.
  std::unique_ptr<loop_dialect> dialect;
  std::unique_ptr<agent_loop> loop;
  rs::run_phase phase = rs::run_phase::waiting;

  // The history window (RS-51): history + input until a compaction replaces it; stream items from `mark` follow.
  std::vector<rs::item> window;
  std::size_t mark = 0;
  std::vector<rs::item> minted; // user messages re-minted by a compaction, stored with the response
  int compacted_before = 0; // the round a compaction already ran before (at most one per round)
  std::vector<rs::item> summarized;
  std::string summary;

  // Delivery.
  caf::actor waiter;             // a foreground response waits for it to take each batch (RS-39)
  std::shared_ptr<event_sink> sink; // the streaming client
  std::vector<caf::actor> followers;
  int unacknowledged = 0;
  uint64_t acknowledged = 0;
  int deferred_resumes = 0; // upstream batches taken while the client was behind
  std::vector<rs::stream_event> log; // a background response's events, for late subscribers
  int64_t delivered = -1;            // the last sequence given to subscribers
  std::vector<caf::response_promise> cancelled; // cancel requests, answered with the stored object

  bool background() const { return job.req.background; }
  bool ended() const { return rs::ended(phase); }
  // Moves to the phase `input` leads to (protocol/response_phase.hpp); false when it does not apply.
  bool go(rs::run_input input) {
    auto next = rs::next_phase(phase, input, background());
    if (next)
      phase = *next;
    return next.has_value();
  }
};

using run_pointer = response_run_actor::stateful_pointer<run_state>;

std::string error_object(const std::string& code, const std::string& message) {
  return protocol::json::object([&](protocol::json::writer& w) {
    w.Key("code");
    w.String(code.c_str());
    w.Key("message");
    w.String(message.c_str(), static_cast<rapidjson::SizeType>(message.size()));
  });
}

std::vector<rs::item> working_history(const run_state& st) {
  auto out = st.window;
  auto produced = st.stream->model_items();
  out.insert(out.end(), produced.begin() + static_cast<std::ptrdiff_t>(st.mark), produced.end());
  return out;
}

std::string snapshot(const run_state& st, response_status status, std::optional<std::string> error = {},
                     std::optional<std::string> reason = {}, bool terminal = false) {
  rs::response_state s;
  s.id = st.job.id;
  s.created_at = st.job.created_at;
  s.status = status;
  s.completed_at = epoch_seconds();
  s.error = std::move(error);
  s.incomplete_reason = std::move(reason);
  s.output = st.stream->output();
  if (terminal)
    s.tokens = st.tokens;
  return rs::response_json(st.job.req, s);
}

void stop_work(run_state& st);

// The registry forgets the run (its conversation is free, the next background response may start)
// before any client can see it end: a client that answers the terminal event at once finds the
// conversation free (RS-54).
void leave_registry(run_pointer self) {
  auto& st = self->state;
  if (!std::exchange(st.left, true))
    caf::anon_send(st.registry, run_ended_atom::value, st.job.id);
}

// RS-42: the foreground client is gone; nothing is stored. A non-streaming client's waiter is told.
void abandon(run_pointer self) {
  auto& st = self->state;
  if (!st.go(rs::run_input::client_left))
    return;
  stop_work(st);
  leave_registry(self);
  if (st.waiter) {
    response_end gone{response_status::cancelled, {}, true, {errc::cancelled, "The client went away."}};
    caf::anon_send(st.waiter, run_end_atom::value, std::move(gone));
  }
  self->quit();
}

void watch_stall(run_pointer self);

// Lets the upstream read go on for every batch taken while the client was behind.
void resume_deferred(run_state& st) {
  if (!st.loop->round_open())
    return;
  for (; st.deferred_resumes > 0; --st.deferred_resumes)
    st.loop->resume();
}

void deliver(run_pointer self, std::vector<rs::stream_event> events) {
  auto& st = self->state;
  if (events.empty())
    return;
  st.delivered = events.back().sequence;
  if (st.background())
    st.log.insert(st.log.end(), events.begin(), events.end());
  for (auto& f : st.followers)
    caf::anon_send(f, event_atom::value, events);
  if (st.sink) {
    if (!st.sink->send(events)) {
      st.sink.reset();
      return abandon(self); // a background response keeps running
    }
    if (!st.sink->backlogged())
      ++st.acknowledged;
    return;
  }
  if (!st.waiter)
    return;
  if (st.background()) {
    caf::anon_send(st.waiter, event_atom::value, std::move(events));
    return;
  }
  ++st.unacknowledged;
  self->request(st.waiter, caf::infinite, event_atom::value, std::move(events))
    .then(
      [self](bool) {
        auto& s = self->state;
        ++s.acknowledged;
        --s.unacknowledged;
        if (s.unacknowledged < unacknowledged_window)
          resume_deferred(s);
      },
      [self](caf::error&) { abandon(self); });
}

// RS-39: a foreground client that took nothing for client_stall_timeout is gone; one timer per period.
void watch_stall(run_pointer self) {
  auto& st = self->state;
  auto period = std::chrono::milliseconds(static_cast<int64_t>(st.env->loop.client_stall_timeout_seconds * 1000));
  self->delayed_send(self, period, stall_atom::value, st.acknowledged);
}

// Sends what the stream released: a background response's events are durable first (RS-55).
void publish(run_pointer self) {
  auto& st = self->state;
  auto events = st.stream->take_events();
  if (events.empty())
    return;
  if (!st.background()) {
    deliver(self, std::move(events));
    return;
  }
  response_commit c;
  c.events_only = true;
  c.response.id = st.job.id;
  for (auto& e : events) {
    c.events.push_back({e.sequence, e.json});
    c.events_only = c.events_only && e.type != "response.output_item.done";
  }
  if (!c.events_only) {
    // RS-55: the snapshot follows each finished item, and the item is stored with it.
    c.response = row_of(st.job, st.window, st.mark, *st.stream, response_status::in_progress,
                        snapshot(st, response_status::in_progress));
    auto& output = st.stream->output();
    for (std::size_t i = 0; i < output.size(); ++i)
      if (st.stream->item_done(i))
        c.items.push_back({output[i].id, rs::to_json(output[i])});
  }
  self->request(st.env->store, caf::infinite, save_response_atom::value, std::move(c))
    .then([self, events = std::move(events)](int64_t) mutable { deliver(self, std::move(events)); },
          [self, events](caf::error& err) mutable {
            spdlog::error("responses: events of {} could not be stored: {}", self->state.job.id, message_of(err));
            deliver(self, std::move(events));
          });
}

void finish(run_pointer self, response_status status, const std::optional<std::string>& reason = {},
            const problem& failure = {});
void announce(run_state& st);

// The router that serves a server label: the request's own servers, else the configured ones.
const std::shared_ptr<tool_router>& serves(const run_state& st, const std::string& label) {
  for (auto& server : st.job.servers)
    if (server.label == label && server.declared)
      return st.job.declared;
  return st.env->tools;
}

// Whether this request offers `tool` of `server_label` (RS-30): one of its servers' tools.
bool offered(const run_state& st, const std::string& server_label, const std::string& tool) {
  return std::any_of(st.routes.begin(), st.routes.end(), [&](const auto& r) {
    return r.second.server_label == server_label && r.second.tool == tool;
  });
}

// The gateway calls the stream has pending, as the loop runs them (RS-25). A call to a tool the
// request does not offer, or its server does not register, has no port: the gate refuses it.
std::vector<loop_call> pending_calls(run_state& st) {
  std::vector<loop_call> calls;
  for (auto& p : st.stream->take_pending()) {
    auto& it = st.stream->output()[p.output_position];
    if (auto kind = rs::search_call_of(p.tool); kind && p.server_label.empty()) {
      auto& port = *kind == rs::item_kind::web_search_call ? st.env->web_search : st.env->file_search;
      calls.push_back(search_call(port, st.job.req, p, it, st.job.id));
      continue;
    }
    loop_call c;
    c.ref = p.output_position;
    auto& tools = serves(st, p.server_label);
    auto name = tools && offered(st, p.server_label, p.tool) ? tools->registered_name(p.server_label, p.tool)
                                                             : std::string();
    if (!name.empty())
      c.port = tools;
    c.invocation.run_id = st.job.id;
    c.invocation.call_id = st.stream->output()[p.output_position].id;
    c.invocation.name = name.empty() ? p.tool : name;
    c.invocation.arguments = std::move(p.arguments);
    c.invocation.tenant_key = "default";
    c.invocation.user_key = "default";
    calls.push_back(std::move(c));
  }
  return calls;
}

void fail(run_pointer self, const std::string& message, int http_status) {
  finish(self, response_status::failed, {}, rs::upstream_failure(message, http_status, self->state.loop->round() <= 1));
}

// An upstream's failure, in the upstream's own words when it gave some, with its Retry-After (RS-43).
void fail_upstream(run_pointer self, const rs::upstream_event& e, const std::string& prefix = {}) {
  auto message = prefix + (e.upstream_message.empty() ? e.text : e.upstream_message);
  finish(self, response_status::failed, {},
         rs::upstream_failure(std::move(message), e.http_status, self->state.loop->round() <= 1, e.retry_after_seconds));
}

// RS-51: a summary call replaces the window before round `round` once the history passed the threshold.
bool compaction_due(run_pointer self, int round) {
  auto& st = self->state;
  auto threshold = st.job.req.compact_threshold;
  if (!threshold || st.compacted_before == round)
    return false;
  auto history = working_history(st);
  if (rs::estimate_tokens(history, st.job.req.instructions.value_or("")) < *threshold)
    return false;
  st.compacted_before = round;
  st.go(rs::run_input::summary_opened);
  st.summary.clear();
  st.summarized = history;
  history.push_back(rs::compaction_request());
  rs::round_request r;
  rs::fill_round(r, st.job.req);
  r.history = std::move(history);
  r.max_output_tokens = st.env->loop.summary_tokens;
  r.stream = false;
  st.deferred_resumes = 0;
  st.loop->open_side_round(r);
  return true;
}

void on_summary(run_pointer self, std::vector<rs::upstream_event>& events) {
  auto& st = self->state;
  for (auto& e : events) {
    using kind = rs::upstream_event::kind;
    if (e.what == kind::text) {
      st.summary += e.text;
    } else if (e.what == kind::failure) {
      return fail_upstream(self, e, "The compaction summary call failed: ");
    } else if (e.what == kind::finish) {
      st.tokens += e.tokens; // summary usage is the response's too (RS-19)
      st.go(rs::run_input::summary_done);
      auto window = rs::compacted_window(st.summarized, st.summary);
      st.stream->add_item(window.back());
      publish(self);
      st.minted.insert(st.minted.end(), window.begin(), window.end() - 1);
      st.window = std::move(window);
      st.mark = st.stream->model_items().size();
      return st.loop->next_round();
    }
  }
  st.loop->resume();
}

void stop_work(run_state& st) { st.loop->stop(); }

// The Responses dialect of the loop (responses.md §4): a round streams into response_stream; client
// function calls and approval requests end the response, gateway calls run inside it and another
// round follows (RS-22); events are rendered as Responses stream events.
struct response_dialect : loop_dialect {
  run_pointer self;
  explicit response_dialect(run_pointer self) : self(self) {}

  bool prepare_round(int round, rs::round_request& r) override {
    auto& st = self->state;
    if (st.ended() || compaction_due(self, round))
      return false;
    st.stream->next_round();
    rs::fill_round(r, st.job.req);
    r.history = working_history(st);
    r.tools = st.function_tools;
    if (st.stream->gateway_budget() != 0)
      r.tools.insert(r.tools.end(), st.mcp_tools.begin(), st.mcp_tools.end());
    r.force_auto = round > 1; // a round after gateway calls (RS-14)
    if (auto cap = st.job.req.max_output_tokens) {
      auto left = *cap - st.tokens.output_tokens;
      if (left < 1) {
        finish(self, response_status::incomplete, "max_output_tokens");
        return false;
      }
      r.max_output_tokens = left;
    }
    st.deferred_resumes = 0;
    return true;
  }

  batch on_batch(std::vector<rs::upstream_event>& events) override {
    auto& st = self->state;
    if (st.phase == rs::run_phase::summarizing) {
      on_summary(self, events);
      return batch::taken;
    }
    for (auto& e : events) {
      if (!st.stream->feed(e)) {
        publish(self);
        if (e.what == rs::upstream_event::kind::failure)
          fail_upstream(self, e);
        else
          fail(self, st.stream->failure(), 0);
        return batch::taken;
      }
    }
    publish(self);
    if (st.ended())
      return batch::taken;
    if (st.stream->round_finished())
      return batch::round_end;
    if (st.stream->held_events() > st.env->loop.held_back_events
        || st.stream->held_bytes() > st.env->loop.held_back_bytes) {
      fail(self, "too much output held back behind a gateway tool call", 0);
      return batch::taken;
    }
    ++st.deferred_resumes; // RS-39: read on once the client has room
    bool client_behind = (st.sink && !st.background() && st.sink->backlogged())
                         || st.unacknowledged >= unacknowledged_window;
    if (!client_behind)
      resume_deferred(st); // batches held back earlier too: there is room now
    return batch::hold;
  }

  bool on_round_end(std::vector<loop_call>& calls, after_calls& then) override {
    auto& st = self->state;
    st.tokens += st.stream->round_usage();
    auto finish_reason = st.stream->finish_reason();
    if (finish_reason == "length" || finish_reason == "content_filter") {
      st.stream->abandon_calls();
      publish(self);
      finish(self, response_status::incomplete, finish_reason == "length" ? "max_output_tokens" : "content_filter");
      return false;
    }
    if (st.stream->client_actions() > 0) {
      then = after_calls::end; // RS-22.2: the client acts next
    } else if (st.stream->gateway_calls() > 0) {
      then = after_calls::next_round;
    } else {
      finish(self, response_status::completed);
      return false;
    }
    calls = pending_calls(st);
    return true;
  }

  // Only an offered tool runs, and only with the arguments the model gave (RS-25): arguments that are
  // not a JSON object are refused, never replaced.
  admission admit_call(const loop_call& call, std::string& refusal) override {
    auto& p = self->state.stream->output()[call.ref];
    if (p.type == rs::item_kind::web_search_call || p.type == rs::item_kind::file_search_call) {
      refusal = search_refusal(call, p);
      return refusal.empty() ? admission::run : admission::refuse;
    }
    if (!call.port) {
      refusal = rs::mcp_call_error("mcp_protocol_error",
                                   "Unknown tool '" + p.name + "' on MCP server '" + p.server_label + "'", -32602);
      return admission::refuse;
    }
    if (auto why = protocol::tool_arguments_error(call.invocation.arguments)) {
      refusal =
        rs::mcp_call_error("mcp_protocol_error", "Invalid arguments for tool '" + p.name + "': " + *why, -32602);
      return admission::refuse;
    }
    return admission::run;
  }

  // Ends the call's item (RS-25, RS-34): its output, else an error object.
  void on_call_end(const loop_call& call, call_result result) override {
    auto& st = self->state;
    auto type = st.stream->output()[call.ref].type;
    if (type == rs::item_kind::web_search_call || type == rs::item_kind::file_search_call) {
      end_search(*st.stream, st.job.req, call, std::move(result), st.env->loop.call_timeout_seconds);
      return publish(self);
    }
    static const std::string marker = "[MCP_ERROR] ";
    std::string output;
    std::string error;
    auto& text = result.outcome.output;
    if (result.refused || result.timed_out) {
      error = std::move(text);
    } else if (text.rfind(marker, 0) == 0) {
      error = rs::mcp_call_error("mcp_tool_execution_error", text.substr(marker.size()));
    } else {
      output = std::move(text);
    }
    st.stream->complete_call(call.ref, std::move(output), std::move(error));
    publish(self);
  }

  void on_done() override { finish(self, response_status::completed); }
  void on_rounds_exhausted() override { finish(self, response_status::incomplete, "max_tool_rounds"); }

  std::string timeout_output(double seconds) const override {
    auto whole = std::to_string(static_cast<int64_t>(seconds));
    return rs::mcp_call_error("mcp_protocol_error", "MCP tool call timed out after " + whole + "s", -32001);
  }
  std::string truncation_notice(std::size_t) const override { return "…[truncated]"; }
};

void end_subscribers(run_pointer self, const response_end& end) {
  auto& st = self->state;
  for (auto& f : st.followers)
    caf::anon_send(f, run_end_atom::value, end);
  if (st.waiter)
    caf::anon_send(st.waiter, run_end_atom::value, end);
  if (st.sink)
    st.sink->finish();
  for (auto& rp : st.cancelled)
    rp.deliver(end.snapshot);
  leave_registry(self);
  st.go(rs::run_input::told);
  self->quit();
}

void finish(run_pointer self, response_status status, const std::optional<std::string>& reason,
            const problem& failure) {
  auto& st = self->state;
  bool waited = st.phase == rs::run_phase::waiting; // cancelled while it waited for its turn (RS-55)
  if (!st.go(rs::run_input::finish))
    return;
  stop_work(st);
  if (waited)
    announce(st);
  if (status == response_status::cancelled || status == response_status::failed)
    st.stream->interrupt();
  std::optional<std::string> error;
  if (status == response_status::failed)
    error = error_object(failure.kind, failure.message);
  auto object = snapshot(st, status, error, reason, true);
  st.stream->terminal(rs::terminal_type(status), object);
  auto events = st.stream->take_events();
  response_end end;
  end.status = status;
  end.snapshot = object;
  end.failed = status == response_status::failed;
  end.error = failure;
  if (!st.job.req.store) {
    leave_registry(self);
    deliver(self, std::move(events));
    return end_subscribers(self, end);
  }
  // RS-53: one commit after the run and before the terminal event.
  auto c = final_commit(st.job, st.minted, row_of(st.job, st.window, st.mark, *st.stream, status, object),
                        *st.stream, status);
  if (st.background())
    for (auto& e : events)
      c.events.push_back({e.sequence, e.json});
  self->request(st.env->store, caf::infinite, save_response_atom::value, std::move(c))
    .then(
      [self, events, end](int64_t) mutable {
        leave_registry(self);
        deliver(self, std::move(events));
        end_subscribers(self, end);
      },
      [self, end](caf::error& err) mutable {
        spdlog::error("responses: {} could not be stored: {}", self->state.job.id, message_of(err));
        end.failed = true;
        // A conflict is a conversation another response moved (RS-54), unless the response itself
        // ended elsewhere meanwhile (CJ-16), which is the server's own fault.
        bool locked = code_of(err) == errc::conflict && problem_of(err).kind != response_already_ended;
        end.error = {locked ? errc::conflict : errc::internal, message_of(err), locked ? "conversation" : "",
                     locked ? "conversation_locked" : "server_error"};
        // RS-40: no consistent terminal object can be produced.
        leave_registry(self);
        deliver(self, {rs::make_event(self->state.delivered + 1, "error", rs::error_members(end.error))});
        end_subscribers(self, end);
      });
}

// response.created, then response.queued for a background response as soon as it waits its turn (RS-37.2).
void announce_created(run_state& st) {
  auto status = st.background() ? response_status::queued : response_status::in_progress;
  st.stream->created(snapshot(st, status), st.background());
}

// response.in_progress, exactly once (RS-37.2): when the run starts, or when it is cancelled while
// still waiting for its turn; a foreground response is created then too.
void announce(run_state& st) {
  if (!st.background())
    announce_created(st);
  st.stream->in_progress(snapshot(st, response_status::in_progress));
}

void start(run_pointer self) {
  auto& st = self->state;
  if (!st.go(rs::run_input::start))
    return;
  if ((st.waiter || st.sink) && !st.background())
    watch_stall(self);
  st.window = st.job.history;
  st.window.insert(st.window.end(), st.job.input.begin(), st.job.input.end());
  announce(st);
  // RS-32: each server listed once per history.
  for (auto& server : st.job.servers) {
    if (server.listed)
      continue;
    st.stream->add_item(rs::list_tools_item(server.label, server.tools, server.error));
    if (!server.error.empty()) {
      publish(self);
      problem e{errc::internal, "Error retrieving tool list from MCP server: '" + server.label + "'.", {},
                "server_error"};
      return finish(self, response_status::failed, {}, e);
    }
  }
  // RS-33: approved calls run before round 1.
  for (auto* r : rs::approved_requests(st.job.history, st.job.input))
    st.stream->open_approved_call(r->server_label, r->name, r->arguments, r->id);
  publish(self);
  st.loop->start(pending_calls(st));
}

response_run_actor::behavior_type response_run(run_pointer self, std::shared_ptr<const response_environment> env,
                                               caf::actor registry, response_job job,
                                               caf::actor waiter, std::shared_ptr<event_sink> sink) {
  auto& st = self->state;
  st.env = std::move(env);
  st.registry = std::move(registry);
  st.job = std::move(job);
  if (auto declared = st.job.declared)
    self->attach_functor([declared] { declared->stop(); });
  st.waiter = std::move(waiter);
  st.sink = std::move(sink);
  if (st.sink) {
    response_run_actor me = self;
    st.sink->on_drained([me] { caf::anon_send(me, drained_atom::value); });
  }
  for (auto& f : st.job.req.functions)
    st.function_tools.push_back({f.name, f.description, f.parameters, f.strict});
  for (auto& server : st.job.servers)
    for (auto& tool : server.tools) {
      auto name = rs::mcp_function_name(server.label, tool.name);
      st.routes[name] = {server.label, tool.name, rs::needs_approval(server.require_approval, tool)};
      st.mcp_tools.push_back({name, tool.description, tool.input_schema, {}});
    }
  // RS-27: each declared search tool is offered as its function, a gateway tool like MCP's.
  for (auto& d : st.job.req.search) {
    auto tool = rs::search_function(d.call);
    st.routes[tool.name] = {{}, tool.name, false, d.call};
    st.mcp_tools.push_back(std::move(tool));
  }
  auto routes = st.routes;
  st.stream = std::make_unique<rs::response_stream>(
    [routes](const std::string& name) -> std::optional<rs::gateway_route> {
      auto it = routes.find(name);
      if (it == routes.end())
        return std::nullopt;
      return it->second;
    },
    st.job.req.max_tool_calls.value_or(-1));
  {
    rs::round_request asked;
    rs::fill_round(asked, st.job.req);
    st.stream->keep_logprobs(rs::wants_logprobs(asked));
  }
  st.dialect = std::make_unique<response_dialect>(self);
  st.loop = std::make_unique<agent_loop>(self, st.env->model, st.env->loop, *st.dialect);
  self->set_down_handler([self](caf::down_msg& down) { self->state.loop->on_down(down); });
  if (st.background()) {
    announce_created(st);
    publish(self);
  }
  return {
    [=](start_atom) { start(self); },
    [=](cancel_atom) -> caf::result<std::string> {
      auto& s = self->state;
      if (s.ended() && s.cancelled.empty())
        return make_error(errc::conflict, "the response already ended");
      // The cancelled object is the answer once it is stored (RS-9).
      s.cancelled.push_back(self->make_response_promise<std::string>());
      auto rp = s.cancelled.back();
      finish(self, response_status::cancelled);
      return rp;
    },
    [=](disconnect_atom) { abandon(self); },
    [=](stall_atom, uint64_t acknowledged_then) {
      auto& s = self->state;
      if (s.ended())
        return;
      bool waiting = s.unacknowledged > 0 || (s.sink && s.sink->backlogged());
      if (waiting && s.acknowledged == acknowledged_then)
        return abandon(self);
      watch_stall(self);
    },
    [=](drained_atom) {
      auto& s = self->state;
      if (s.ended() || !s.sink || s.deferred_resumes == 0 || s.sink->backlogged())
        return; // nothing waits, or the sink tells again once it drains
      ++s.acknowledged;
      resume_deferred(s);
    },
    [=](subscribe_atom, caf::actor who, int64_t after) {
      auto& s = self->state;
      std::vector<rs::stream_event> backlog;
      for (auto& e : s.log)
        if (e.sequence > after)
          backlog.push_back(e);
      if (!backlog.empty())
        caf::anon_send(who, event_atom::value, std::move(backlog));
      s.followers.push_back(std::move(who));
      return true;
    },
    [=](snapshot_atom) {
      auto& s = self->state;
      bool waiting = s.loop->round() == 0 && s.background();
      return snapshot(s, waiting ? response_status::queued : response_status::in_progress);
    },
    [=](upstream_atom, uint64_t tag, std::vector<rs::upstream_event>& events) {
      self->state.loop->on_upstream(tag, events);
    },
    [=](tool_result_atom, uint64_t key, call_result& result) { self->state.loop->on_tool_result(key, result); },
  };
}

} // namespace

response_run_actor spawn_response_run(caf::actor_system& sys, std::shared_ptr<const response_environment> env,
                                      caf::actor registry, response_job job, caf::actor waiter,
                                      std::shared_ptr<event_sink> sink) {
  return sys.spawn(response_run, std::move(env), std::move(registry), std::move(job), std::move(waiter),
                   std::move(sink));
}

} // namespace troupe
