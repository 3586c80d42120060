#include "io/responses_routes.hpp"

#include "actors/errors.hpp"
#include "actors/tool_router.hpp"
#include "io/agent_http.hpp"
#include "io/http_client.hpp"
#include "io/mcp_http_transport.hpp"
#include "io/route_ask.hpp"
#include "protocol/auth.hpp"
#include "protocol/ids.hpp"
#include "protocol/json.hpp"
#include "protocol/model_routing.hpp"
#include "protocol/responses_replay.hpp"
#include "protocol/sse.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <optional>
#include <set>
#include <sstream>
#include <variant>

namespace troupe::io {

namespace {

namespace rs = protocol::responses;

struct context {
  caf::actor_system* sys = nullptr;
  std::shared_ptr<const response_environment> env;
  std::shared_ptr<live_responses> live;
  protocol::config config;
  std::shared_ptr<const model_catalog> models; // Appendix A
};
using ctx_ptr = std::shared_ptr<const context>;

// Runs `fn(self)` in a short-lived actor. `fn` travels as the spawn argument: CAF 0.17 binds a null
// empty tuple to a function spawned without arguments (UBSan reports it).
template <class F>
void spawn_task(caf::actor_system& sys, F fn) {
  sys.spawn([](caf::event_based_actor* self, F f) { f(self); }, std::move(fn));
}

int64_t epoch_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

http_response api_response(const rs::api_error& e) {
  return json_response(e.status, rs::error_json(e));
}

rs::api_error store_failure(const caf::error& err) {
  auto code = code_of(err);
  if (code == errc::not_found)
    return rs::not_found(message_of(err));
  if (code == errc::conflict)
    return {400, message_of(err), {}, {}};
  return {500, message_of(err), {}, "server_error"};
}

rs::api_error response_not_found(const std::string& id) {
  return rs::not_found("Response with id '" + id + "' not found.");
}

rs::api_error conversation_locked(const std::string& id) {
  return {409, "Another response is in progress for conversation '" + id + "'.", "conversation", "conversation_locked"};
}


// Who owns what this caller stores and may see it (issue 15 finding 9), as admission names it
// (protocol::admit_responses_caller): each API key and each service token is its own owner, an
// identity (JWT, trusted headers) is its tenant and user, and an open troupe has one owner, "", which
// is also the owner of rows stored before owners existed.
response_owner owner_of(const context& ctx, const http_request& req) {
  auto admitted = admit_responses_caller(ctx.config, req);
  if (auto caller = std::get_if<protocol::responses_caller>(&admitted))
    return {caller->owner};
  return {"refused"}; // guarded() let no refused caller through; this owner holds nothing
}

// RS-2: a model no upstream serves is refused before any run starts, so a stream:true request gets
// plain JSON (RS-1).
std::optional<rs::api_error> unroutable(const context& ctx, const std::string& model) {
  if (ctx.models->route(model))
    return std::nullopt;
  return protocol::model_not_found(model);
}

// Wraps a handler with the RS-3 check.
http_handler guarded(ctx_ptr ctx, http_handler handler) {
  return [ctx, handler](http_request& req, std::shared_ptr<http_exchange> ex) {
    auto admitted = admit_responses_caller(ctx->config, req);
    if (auto refused = std::get_if<protocol::auth_error>(&admitted))
      return ex->respond(api_response({refused->status(), refused->detail, {},
                                       refused->code == errc::unauthorized ? "invalid_api_key" : "server_error"}));
    handler(req, std::move(ex));
  };
}

std::vector<rs::item> parse_items(const std::vector<stored_item>& stored) {
  std::vector<rs::item> out;
  for (auto& s : stored)
    if (auto it = rs::item_from_json(s.json))
      out.push_back(std::move(*it));
  return out;
}

std::string list_json(const std::vector<stored_item>& items, bool has_more) {
  return protocol::json::object([&](protocol::json::writer& w) {
    w.Key("object");
    w.String("list");
    w.Key("data");
    w.StartArray();
    for (auto& it : items)
      protocol::json::write_raw(w, it.json);
    w.EndArray();
    protocol::json::write_nullable(w, "first_id", items.empty() ? std::string() : items.front().id);
    protocol::json::write_nullable(w, "last_id", items.empty() ? std::string() : items.back().id);
    w.Key("has_more");
    w.Bool(has_more);
  });
}

std::string conversation_json(const conversation_row& c) {
  return protocol::json::object([&](protocol::json::writer& w) {
    w.Key("id");
    w.String(c.id.c_str());
    w.Key("object");
    w.String("conversation");
    w.Key("created_at");
    w.Int64(c.created_at);
    w.Key("metadata");
    protocol::json::write_raw(w, c.metadata);
  });
}

std::string deleted_json(const std::string& id, const char* object) {
  return protocol::json::object([&](protocol::json::writer& w) {
    w.Key("id");
    w.String(id.c_str());
    w.Key("object");
    w.String(object);
    w.Key("deleted");
    w.Bool(true);
  });
}

// RS-8 paging parameters: limit 1..100 (20), order asc|desc (desc), after.
std::variant<page_request, rs::api_error> page_of(const http_request& req) {
  page_request p;
  if (auto it = req.query.find("limit"); it != req.query.end()) {
    char* end = nullptr;
    auto n = std::strtoll(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || n < 1 || n > 100)
      return rs::api_error{400, "Invalid 'limit': expected an integer between 1 and 100, but got '" + it->second + "'.",
                           "limit", "invalid_value"};
    p.limit = n;
  }
  if (auto it = req.query.find("order"); it != req.query.end()) {
    if (it->second != "asc" && it->second != "desc")
      return rs::api_error{400, "Invalid value for 'order': '" + it->second + "'.", "order", "invalid_value"};
    p.ascending = it->second == "asc";
  }
  if (auto it = req.query.find("after"); it != req.query.end())
    p.after = it->second;
  return p;
}

// ---- SSE delivery ----

// The SSE frames of the events after sequence `last`, which moves to the last one written: the
// frames of a batch leave in one write.
std::string frames_after(const std::vector<rs::stream_event>& events, int64_t& last) {
  std::string frames;
  for (auto& e : events) {
    if (e.sequence <= last)
      continue;
    last = e.sequence;
    frames += protocol::sse_frame(std::nullopt, e.type, e.json);
  }
  return frames;
}

// Writes a running background response's events to a client that resumed its stream (RS-6). The
// run never waits on it (RS-55); a client too slow for service.max_stream_buffer_bytes is dropped.
struct relay_state {
  static inline const char* name = "responses_relay";
  std::shared_ptr<event_stream> stream;
  int64_t last = -1; // sequences already written (the backlog and live events may overlap)
};

caf::behavior sse_relay(caf::stateful_actor<relay_state>* self, std::shared_ptr<event_stream> stream,
                        int64_t after) {
  self->state.stream = std::move(stream);
  self->state.last = after;
  return {
    [=](event_atom, std::vector<rs::stream_event>& events) {
      auto& st = self->state;
      auto frames = frames_after(events, st.last);
      if (!frames.empty() && !st.stream->send(std::move(frames)))
        self->quit();
    },
    [=](run_end_atom, const response_end&) {
      self->state.stream->finish();
      self->quit();
    },
  };
}

// A streaming client as the run's sink: its queue holds `limit` events (RS-39).
class sse_sink : public event_sink, public std::enable_shared_from_this<sse_sink> {
public:
  sse_sink(std::shared_ptr<event_stream> stream, int64_t limit) : stream_(std::move(stream)), limit_(limit) {}

  bool send(const std::vector<rs::stream_event>& events) override {
    return stream_->send(frames_after(events, last_), static_cast<int64_t>(events.size()));
  }
  bool backlogged() const override {
    // Set before looking, and cleared only by the notice: a write that makes room after this call
    // always tells on_drained (at worst once more than needed).
    full_ = true;
    return stream_->queued_events() >= limit_ || stream_->backlogged();
  }
  void on_drained(std::function<void()> drained) override {
    std::weak_ptr<sse_sink> self = weak_from_this();
    stream_->on_events_written([self, drained = std::move(drained)] {
      auto sink = self.lock();
      if (sink && sink->full_ && sink->stream_->queued_events() < sink->limit_ && !sink->stream_->backlogged()
          && sink->full_.exchange(false))
        drained();
    });
  }
  void finish() override { stream_->finish(); }

private:
  std::shared_ptr<event_stream> stream_;
  const int64_t limit_;
  mutable std::atomic<bool> full_{false}; // backlogged() was asked, and nobody was told of room since
  int64_t last_ = -1;
};

// A non-streaming POST: the object once the run ended (RS-4, RS-43).
caf::behavior json_waiter(caf::event_based_actor* self, std::shared_ptr<http_exchange> ex) {
  return {
    [](event_atom, const std::vector<rs::stream_event>&) { return true; },
    [=](run_end_atom, const response_end& end) {
      if (end.failed)
        ex->respond(api_response(end.error));
      else
        ex->respond(json_response(200, end.snapshot));
      self->quit();
    },
  };
}

std::shared_ptr<event_stream> open_stream(http_exchange& ex) {
  return ex.open_event_stream({}); // the server sets Cache-Control: no-cache on every event stream (RS-35)
}

void write_events(event_stream& stream, const std::vector<rs::stream_event>& events, int64_t after) {
  for (auto& e : events)
    if (e.sequence > after && !stream.send(protocol::sse_frame(std::nullopt, e.type, e.json)))
      return;
}

// ---- POST /v1/responses ----

struct creation {
  ctx_ptr ctx;
  std::shared_ptr<http_exchange> ex;
  response_job job;
  bool claimed = false;
};
using creation_ptr = std::shared_ptr<creation>;

void reject(creation_ptr c, const rs::api_error& e) {
  if (c->claimed)
    c->ctx->live->release_conversation({c->job.owner}, c->job.req.conversation_id);
  c->ex->respond(api_response(e));
}

// `allowed_tools` (RS-30): names, or {tool_names?, read_only?}.
bool allowed(const std::string& filter, const protocol::mcp_tool& tool) {
  if (filter.empty())
    return true;
  auto doc = protocol::json::parse(filter);
  if (!doc)
    return true;
  auto named = [&](const protocol::json::value& names) {
    for (auto& n : names.GetArray())
      if (n.IsString() && tool.name == n.GetString())
        return true;
    return false;
  };
  if (doc->IsArray())
    return named(*doc);
  if (auto names = protocol::json::member(*doc, "tool_names"); names && names->IsArray() && !named(*names))
    return false;
  if (auto ro = protocol::json::get_bool(*doc, "read_only"); ro && *ro != tool.read_only)
    return false;
  return true;
}

constexpr std::size_t max_request_tools = 128; // MCP tools per request (RS-30)

// A request-declared server (RS-30) as troupe reaches it, when this server allows it: an http server
// at `server_url`, sent the request's `headers` and `authorization`.
std::variant<protocol::mcp_server_config, rs::api_error> declared_server(const protocol::mcp_config& mcp,
                                                                         const rs::mcp_declaration& d,
                                                                         const std::string& at) {
  auto bad = [&](std::string message, const std::string& field) {
    return rs::api_error{400, std::move(message), at + "." + field, "invalid_value"};
  };
  if (!mcp.allow_request_servers)
    return bad("Request-declared MCP servers are not enabled on this server (mcp.allow_request_servers).",
               "server_url");
  auto url = parse_http_url(d.server_url, "/?#");
  if (url.problem != url_problem::none)
    return bad("Invalid 'server_url' for MCP server '" + d.server_label + "': " + describe(url.problem) + ".",
               "server_url");
  if (!mcp.allowed_hosts.empty()
      && std::find(mcp.allowed_hosts.begin(), mcp.allowed_hosts.end(), url.host) == mcp.allowed_hosts.end())
    return bad("MCP server host '" + url.host + "' is not allowed on this server (mcp.allowed_hosts).", "server_url");
  protocol::mcp_server_config config;
  config.name = d.server_label;
  config.transport = "http";
  config.url = d.server_url;
  auto header_safe = [](const std::string& text, bool name) {
    for (unsigned char ch : text)
      if (ch == '\r' || ch == '\n' || ch == 0 || (name && (ch <= ' ' || ch == ':' || ch >= 0x7f)))
        return false;
    return !(name && text.empty());
  };
  if (!d.headers.empty()) {
    auto doc = protocol::json::parse(d.headers);
    for (auto& m : doc->GetObject()) {
      std::string name(m.name.GetString(), m.name.GetStringLength());
      if (!m.value.IsString())
        return bad("Invalid header '" + name + "': expected a string.", "headers." + name);
      std::string value(m.value.GetString(), m.value.GetStringLength());
      if (!header_safe(name, true) || !header_safe(value, false))
        return bad("Invalid header '" + name + "': not a valid HTTP header name and value.", "headers." + name);
      config.headers.emplace_back(std::move(name), std::move(value));
    }
  }
  if (!d.authorization.empty()) {
    if (!header_safe(d.authorization, false))
      return bad("Invalid 'authorization': not a valid HTTP header value.", "authorization");
    config.headers.emplace_back("Authorization", "Bearer " + d.authorization);
  }
  return config;
}

// A server's tools as the request filters them, or why the request cannot use it.
std::optional<rs::api_error> bind_tools(mcp_binding& b, const mcp_server_status& status, const rs::mcp_declaration& d,
                                        const std::vector<rs::item>& history) {
  b.tools.clear();
  for (auto& t : status.tools)
    if (allowed(d.allowed_tools, t))
      b.tools.push_back(t);
  if (status.tools.size() && b.tools.empty())
    return rs::api_error{400, "'allowed_tools' leaves no tool of MCP server '" + d.server_label + "'.",
                         "tools[" + std::to_string(d.index) + "].allowed_tools", "invalid_value"};
  if (!status.alive)
    b.error = status.error.empty() ? "the server is not running" : status.error;
  for (auto& it : history)
    if (it.type == "mcp_list_tools" && it.server_label == b.label && it.error.empty())
      b.listed = true;
  return std::nullopt;
}

std::optional<rs::api_error> check_tool_count(const response_job& job) {
  std::size_t tools = 0;
  for (auto& b : job.servers)
    tools += b.tools.size();
  if (tools <= max_request_tools)
    return std::nullopt;
  return rs::api_error{400, "The MCP servers of this request offer " + std::to_string(tools) + " tools; at most "
                              + std::to_string(max_request_tools) + " are allowed. Narrow them with 'allowed_tools'.",
                       "tools", "invalid_value"};
}

// RS-30: each declared MCP server is a configured one, bound now, or the request's own, started
// here (its status reaches `waiter`) and bound once discovered.
std::optional<rs::api_error> bind_servers(creation& c, const caf::actor& waiter) {
  auto& req = c.job.req;
  if (req.mcp.empty())
    return std::nullopt;
  auto& ctx = *c.ctx;
  std::vector<mcp_server_status> statuses;
  if (ctx.env->tools)
    statuses = ctx.env->tools->servers();
  for (auto& d : req.mcp) {
    auto at = "tools[" + std::to_string(d.index) + "]";
    auto status = std::find_if(statuses.begin(), statuses.end(), [&](auto& s) { return s.name == d.server_label; });
    mcp_binding b;
    b.label = d.server_label;
    b.require_approval = d.require_approval;
    if (!d.server_url.empty()) {
      if (status != statuses.end())
        return rs::api_error{400, "MCP server '" + d.server_label + "' is configured on this server; omit 'server_url'.",
                             at + ".server_url", "invalid_value"};
      auto config = declared_server(ctx.config.mcp, d, at);
      if (auto err = std::get_if<rs::api_error>(&config))
        return *err;
      if (!c.job.declared)
        c.job.declared = std::make_shared<tool_router>(*ctx.sys, nullptr);
      mcp_server_options o;
      o.config = std::move(std::get<protocol::mcp_server_config>(config));
      o.call_timeout_seconds = ctx.config.mcp.call_timeout_seconds;
      o.start_timeout_seconds = ctx.config.mcp.connect_timeout_seconds;
      o.on_status = [waiter](const mcp_server_status&) { caf::anon_send(waiter, status_atom::value); };
      c.job.declared->add_server(std::move(o), [](const protocol::mcp_server_config& config) {
        return make_mcp_http_transport(config);
      });
      b.declared = true;
      c.job.servers.push_back(std::move(b));
      continue;
    }
    if (status == statuses.end())
      return rs::api_error{400, "Unknown MCP server '" + d.server_label + "': name one of mcp.servers or give 'server_url'.",
                           at + ".server_label", "invalid_value"};
    if (auto err = bind_tools(b, *status, d, c.job.history))
      return err;
    c.job.servers.push_back(std::move(b));
  }
  return std::nullopt;
}

void launch(creation_ptr c);

// RS-30: the request's own servers are listed before its run starts. A server that neither lists
// its tools nor fails within mcp.connect_timeout fails its listing (RS-32).
void await_discovery(caf::event_based_actor* self, creation_ptr c) {
  auto settle = [self, c](bool out_of_time) {
    auto statuses = c->job.declared->servers();
    // A server has listed its tools, or failed; until then its error reads "starting".
    auto discovered = [&](const std::string& label) -> const mcp_server_status* {
      for (auto& s : statuses)
        if (s.name == label && (s.alive || (!s.error.empty() && s.error != "starting")))
          return &s;
      return nullptr;
    };
    for (auto& b : c->job.servers)
      if (b.declared && !discovered(b.label) && !out_of_time)
        return;
    mcp_server_status late;
    std::ostringstream within;
    within << c->ctx->config.mcp.connect_timeout_seconds;
    late.error = "no tool list within " + within.str() + " s (mcp.connect_timeout)";
    auto& req = c->job.req;
    for (auto& b : c->job.servers) {
      if (!b.declared)
        continue;
      auto d = std::find_if(req.mcp.begin(), req.mcp.end(), [&](auto& m) { return m.server_label == b.label; });
      auto status = discovered(b.label);
      if (auto err = bind_tools(b, status ? *status : late, *d, c->job.history)) {
        c->job.declared->stop();
        return reject(c, *err);
      }
    }
    if (auto err = check_tool_count(c->job)) {
      c->job.declared->stop();
      return reject(c, *err);
    }
    launch(c);
    self->quit();
  };
  self->become([=](status_atom) { settle(false); }, [=](timeout_atom) { settle(true); });
  self->delayed_send(self, std::chrono::milliseconds(static_cast<int64_t>(c->ctx->config.mcp.connect_timeout_seconds * 1000)),
                     timeout_atom::value);
  settle(false); // every status may have come already
}

void launch(creation_ptr c) {
  auto& ctx = *c->ctx;
  auto& sys = *ctx.sys;
  bool streaming = c->job.req.stream;
  bool background = c->job.req.background;
  if (!background) {
    caf::actor waiter;
    std::shared_ptr<event_sink> sink;
    if (streaming)
      sink = std::make_shared<sse_sink>(open_stream(*c->ex), c->ctx->config.responses.outbound_queue_events);
    else
      waiter = sys.spawn(json_waiter, c->ex);
    auto run = spawn_response_run(sys, ctx.env, ctx.live, std::move(c->job), waiter, sink);
    c->ex->on_disconnect([run] { caf::anon_send(run, disconnect_atom::value); });
    caf::anon_send(run, start_atom::value);
    return;
  }
  // RS-55: a background response is stored, queued, before anything else.
  response_commit commit;
  commit.response = queued_row(c->job);
  for (auto& it : c->job.input)
    commit.items.push_back({it.id, rs::to_json(it)});
  auto snapshot = commit.response.snapshot;
  spawn_task(sys, [c, commit = std::move(commit), snapshot, streaming](caf::event_based_actor* self) mutable {
    auto& ctx = *c->ctx;
    self->request(ctx.env->store, ask_timeout, save_response_atom::value, std::move(commit))
      .then(
        [=](int64_t) {
          auto& ctx = *c->ctx;
          std::shared_ptr<event_sink> sink;
          if (streaming)
            sink = std::make_shared<sse_sink>(open_stream(*c->ex), c->ctx->config.responses.outbound_queue_events);
          auto id = c->job.id;
          auto run = spawn_response_run(*ctx.sys, ctx.env, ctx.live, std::move(c->job), caf::actor{}, sink);
          if (!streaming)
            c->ex->respond(json_response(200, snapshot));
          ctx.live->start_background(id, run);
        },
        [=](caf::error& err) { reject(c, store_failure(err)); });
  });
}

// The history checks and the MCP servers, then the run.
void admit(caf::event_based_actor* self, creation_ptr c) {
  if (auto err = rs::check_history(c->job.history, c->job.input, c->job.req.mcp))
    return reject(c, *err);
  if (auto err = bind_servers(*c, caf::actor_cast<caf::actor>(self))) {
    if (c->job.declared)
      c->job.declared->stop();
    return reject(c, *err);
  }
  if (c->job.declared)
    return await_discovery(self, c);
  if (auto err = check_tool_count(c->job))
    return reject(c, *err);
  launch(c);
  self->quit();
}

// Input items whose id is stored are used by reference (RS-14). Only ids the client gave can be
// stored ones, so input without them costs no store round trip.
void resolve_input(caf::event_based_actor* self, creation_ptr c) {
  if (!c->job.req.input_has_ids)
    return admit(self, c);
  std::vector<std::string> ids;
  for (auto& it : c->job.input)
    ids.push_back(it.id);
  self->request(c->ctx->env->store, ask_timeout, get_items_atom::value, ids, response_owner{c->job.owner})
    .then(
      [=](std::vector<stored_item>& found) {
        std::map<std::string, std::string> stored;
        for (auto& s : found)
          stored[s.id] = s.json;
        auto& input = c->job.input;
        for (std::size_t i = 0; i < input.size(); ++i) {
          auto hit = stored.find(input[i].id);
          if (hit != stored.end()) {
            if (auto it = rs::item_from_json(hit->second))
              input[i] = std::move(*it);
          } else if (input[i].type == "item_reference") {
            return reject(c, {400, "No item found with id '" + input[i].id + "'.",
                              "input[" + std::to_string(i) + "].id", "invalid_value"});
          }
        }
        admit(self, c);
      },
      [=](caf::error& err) { reject(c, store_failure(err)); });
}

// RS-20: the history a response continues, from one stored list.
void rehydrate(caf::event_based_actor* self, creation_ptr c) {
  auto& req = c->job.req;
  auto store = c->ctx->env->store;
  if (!req.previous_response_id.empty()) {
    auto prev = req.previous_response_id;
    self->request(store, ask_timeout, get_response_atom::value, prev, response_owner{c->job.owner})
      .then(
        [=](response_row& row) {
          if (row.status == "queued" || row.status == "in_progress")
            return reject(c, {400, "Previous response with id '" + prev + "' is still in progress.",
                              "previous_response_id", "invalid_value"});
          self->request(store, ask_timeout, get_items_atom::value, row.history_item_ids,
                        response_owner{c->job.owner})
            .then(
              [=](std::vector<stored_item>& items) {
                c->job.history = parse_items(items);
                resolve_input(self, c);
              },
              [=](caf::error& err) { reject(c, store_failure(err)); });
        },
        [=](caf::error& err) {
          if (code_of(err) != errc::not_found)
            return reject(c, store_failure(err));
          reject(c, {400, "Previous response with id '" + prev + "' not found.", "previous_response_id",
                     "previous_response_not_found"});
        });
    return;
  }
  if (!req.conversation_id.empty()) {
    auto conv = req.conversation_id;
    if (!c->ctx->live->claim_conversation({c->job.owner}, conv, c->job.id))
      return reject(c, conversation_locked(conv));
    c->claimed = true;
    self->request(store, ask_timeout, conversation_items_atom::value, conv, response_owner{c->job.owner})
      .then(
        [=](conversation_row& row, std::vector<stored_item>& items) {
          c->job.conversation_revision = row.revision;
          c->job.history = parse_items(items);
          resolve_input(self, c);
        },
        [=](caf::error& err) {
          reject(c, code_of(err) == errc::not_found
                      ? rs::not_found("Conversation with id '" + conv + "' not found.", "conversation")
                      : store_failure(err));
        });
    return;
  }
  resolve_input(self, c);
}

void create_response(ctx_ptr ctx, http_request& req, std::shared_ptr<http_exchange> ex) {
  auto parsed = rs::parse_request(req.body, ctx->config.responses.compact_default_threshold);
  if (auto err = std::get_if<rs::api_error>(&parsed))
    return ex->respond(api_response(*err));
  if (auto err = unroutable(*ctx, std::get<rs::request>(parsed).model))
    return ex->respond(api_response(*err));
  auto c = std::make_shared<creation>();
  c->ctx = ctx;
  c->ex = std::move(ex);
  c->job.req = std::move(std::get<rs::request>(parsed));
  c->job.input = c->job.req.input;
  c->job.id = protocol::uuid7_id("resp_");
  c->job.created_at = epoch_seconds();
  c->job.owner = owner_of(*ctx, req).key;
  spawn_task(*ctx->sys, [c](caf::event_based_actor* self) { rehydrate(self, c); });
}

// ---- GET /v1/responses/{id} ----

void replay(ctx_ptr ctx, std::shared_ptr<http_exchange> ex, const std::string& id, const response_owner& owner,
            int64_t after) {
  spawn_task(*ctx->sys, [=](caf::event_based_actor* self) {
    auto store = ctx->env->store;
    self->request(store, ask_timeout, get_response_atom::value, id, owner)
      .then(
        [=](response_row& row) {
          if (!row.background) {
            auto stream = open_stream(*ex);
            write_events(*stream, rs::canonical_replay(row.snapshot), after);
            stream->finish();
            return;
          }
          if (auto run = ctx->live->find(id)) {
            // RS-6: the run sends what it delivered after `after`, then follows.
            auto relay = ctx->sys->spawn(sse_relay, open_stream(*ex), after);
            caf::anon_send(run, subscribe_atom::value, relay, after);
            return;
          }
          self->request(store, ask_timeout, response_events_atom::value, id, after)
            .then(
              [=](std::vector<response_event>& events) {
                auto stream = open_stream(*ex);
                for (auto& e : events) {
                  auto doc = protocol::json::parse(e.json);
                  auto type = doc ? protocol::json::get_string(*doc, "type") : std::string();
                  if (!stream->send(protocol::sse_frame(std::nullopt, type, e.json)))
                    break;
                }
                stream->finish();
              },
              [=](caf::error& err) { ex->respond(api_response(store_failure(err))); });
        },
        [=](caf::error& err) {
          ex->respond(api_response(code_of(err) == errc::not_found ? response_not_found(id) : store_failure(err)));
        });
  });
}

void get_response(ctx_ptr ctx, http_request& req, std::shared_ptr<http_exchange> ex) {
  auto id = req.params["id"];
  auto owner = owner_of(*ctx, req);
  if (auto s = req.query.find("stream"); s != req.query.end() && s->second == "true") {
    int64_t after = -1;
    if (auto it = req.query.find("starting_after"); it != req.query.end()) {
      char* end = nullptr;
      after = std::strtoll(it->second.c_str(), &end, 10);
      if (it->second.empty() || *end != '\0' || after < -1)
        return ex->respond(api_response({400, "Invalid value for 'starting_after': '" + it->second + "'.",
                                         "starting_after", "invalid_value"}));
    }
    return replay(ctx, std::move(ex), id, owner, after);
  }
  spawn_task(*ctx->sys, [=](caf::event_based_actor* self) {
    self->request(ctx->env->store, ask_timeout, get_response_atom::value, id, owner)
      .then(
        [=](response_row& row) {
          auto run = row.background ? ctx->live->find(id) : response_run_actor{};
          if (!run)
            return ex->respond(json_response(200, row.snapshot));
          // RS-5: a running response as it stands.
          self->request(run, ask_timeout, snapshot_atom::value)
            .then([=](std::string& snapshot) { ex->respond(json_response(200, snapshot)); },
                  [=](caf::error&) { ex->respond(json_response(200, row.snapshot)); });
        },
        [=](caf::error& err) {
          ex->respond(api_response(code_of(err) == errc::not_found ? response_not_found(id) : store_failure(err)));
        });
  });
}

void delete_response(ctx_ptr ctx, http_request& req, std::shared_ptr<http_exchange> ex) {
  auto id = req.params["id"];
  auto owner = owner_of(*ctx, req);
  spawn_task(*ctx->sys, [=](caf::event_based_actor* self) {
    auto store = ctx->env->store;
    self->request(store, ask_timeout, get_response_atom::value, id, owner)
      .then(
        [=](response_row& row) {
          if (row.status == "queued" || row.status == "in_progress")
            return ex->respond(
              api_response({400, "Cannot delete a response that is still in progress; cancel it first.", {}, {}}));
          self->request(store, ask_timeout, delete_response_atom::value, id, owner)
            .then([=](bool) { ex->respond(json_response(200, deleted_json(id, "response"))); },
                  [=](caf::error& err) { ex->respond(api_response(store_failure(err))); });
        },
        [=](caf::error& err) {
          ex->respond(api_response(code_of(err) == errc::not_found ? response_not_found(id) : store_failure(err)));
        });
  });
}

void cancel_response(ctx_ptr ctx, http_request& req, std::shared_ptr<http_exchange> ex) {
  auto id = req.params["id"];
  auto owner = owner_of(*ctx, req);
  static const rs::api_error foreground{400, "Only responses created with background=true can be cancelled.", {}, {}};
  spawn_task(*ctx->sys, [=](caf::event_based_actor* self) {
    self->request(ctx->env->store, ask_timeout, get_response_atom::value, id, owner)
      .then(
        [=](response_row& row) {
          if (!row.background)
            return ex->respond(api_response(foreground));
          if (row.status == "cancelled")
            return ex->respond(json_response(200, row.snapshot));
          auto run = ctx->live->find(id);
          if ((row.status != "queued" && row.status != "in_progress") || !run) {
            if (row.status == "queued" || row.status == "in_progress")
              return ex->respond(json_response(200, row.snapshot));
            return ex->respond(api_response({400, "Cannot cancel a " + row.status + " response.", {}, {}}));
          }
          self->request(run, ask_timeout, cancel_atom::value)
            .then([=](std::string& snapshot) { ex->respond(json_response(200, snapshot)); },
                  [=](caf::error&) {
                    // The run ended meanwhile: what it stored is the answer.
                    self->request(ctx->env->store, ask_timeout, get_response_atom::value, id, owner)
                      .then(
                        [=](response_row& now) {
                          if (now.status == "cancelled")
                            return ex->respond(json_response(200, now.snapshot));
                          ex->respond(api_response({400, "Cannot cancel a " + now.status + " response.", {}, {}}));
                        },
                        [=](caf::error& err) { ex->respond(api_response(store_failure(err))); });
                  });
        },
        [=](caf::error& err) {
          if (code_of(err) == errc::not_found && ctx->live->find(id, owner))
            return ex->respond(api_response(foreground));
          ex->respond(api_response(code_of(err) == errc::not_found ? response_not_found(id) : store_failure(err)));
        });
  });
}

void input_items(ctx_ptr ctx, http_request& req, std::shared_ptr<http_exchange> ex) {
  auto page = page_of(req);
  if (auto err = std::get_if<rs::api_error>(&page))
    return ex->respond(api_response(*err));
  auto id = req.params["id"];
  auto owner = owner_of(*ctx, req);
  auto p = std::get<page_request>(page);
  spawn_task(*ctx->sys, [=](caf::event_based_actor* self) {
    self->request(ctx->env->store, ask_timeout, input_items_atom::value, id, owner, p)
      .then([=](item_page& page) { ex->respond(json_response(200, list_json(page.items, page.has_more))); },
            [=](caf::error& err) {
              auto e = store_failure(err);
              if (code_of(err) == errc::not_found && message_of(err).rfind("No item", 0) == 0)
                e.param = "after";
              ex->respond(api_response(e));
            });
  });
}

// ---- POST /v1/responses/compact (RS-52) ----

struct compaction_state {
  static inline const char* name = "responses_compaction";
  ctx_ptr ctx;
  std::shared_ptr<http_exchange> ex;
  rs::request req;
  response_owner owner;
  std::vector<rs::item> history;
  std::string summary;
  rs::usage tokens;
  std::shared_ptr<upstream_round> upstream;
};

void summarize(caf::stateful_actor<compaction_state>* self) {
  auto& st = self->state;
  auto history = st.history;
  history.insert(history.end(), st.req.input.begin(), st.req.input.end());
  st.history = history;
  history.push_back(rs::compaction_request());
  rs::round_request r;
  r.req = &st.req;
  r.history = std::move(history);
  r.max_output_tokens = st.ctx->env->limits.max_summary_tokens;
  r.stream = false;
  if (st.req.instructions)
    r.system_override = st.req.instructions;
  caf::actor me = caf::actor_cast<caf::actor>(self);
  st.upstream = st.ctx->env->upstream->open(r, [me](std::vector<rs::upstream_event> events) {
    caf::anon_send(me, upstream_atom::value, uint64_t{0}, std::move(events));
  });
}

void compacted(caf::stateful_actor<compaction_state>* self) {
  auto& st = self->state;
  auto output = rs::compacted_window(st.history, st.summary);
  auto id = protocol::uuid7_id("resp_");
  auto created = epoch_seconds();
  auto snapshot = protocol::json::object([&](protocol::json::writer& w) {
    w.Key("id");
    w.String(id.c_str());
    w.Key("object");
    w.String("response.compaction");
    w.Key("created_at");
    w.Int64(created);
    w.Key("output");
    w.StartArray();
    for (auto& it : output)
      rs::write_item(w, it);
    w.EndArray();
    w.Key("usage");
    rs::write_usage(w, st.tokens);
  });
  response_commit c;
  c.response.id = id;
  c.response.created_at = created;
  c.response.status = "completed";
  c.response.model = st.req.model;
  c.response.snapshot = snapshot;
  for (auto& it : output) {
    c.response.history_item_ids.push_back(it.id);
    c.items.push_back({it.id, rs::to_json(it)});
  }
  c.response.input_count = static_cast<int64_t>(output.size());
  c.response.previous_response_id = st.req.previous_response_id;
  c.response.owner = st.owner.key;
  auto ex = st.ex;
  self->request(st.ctx->env->store, ask_timeout, save_response_atom::value, std::move(c))
    .then(
      [=](int64_t) {
        ex->respond(json_response(200, snapshot));
        self->quit(); // a live actor would keep the actor system, and so shutdown, waiting
      },
      [=](caf::error& err) {
        ex->respond(api_response(store_failure(err)));
        self->quit();
      });
}

caf::behavior compaction(caf::stateful_actor<compaction_state>* self, ctx_ptr ctx, std::shared_ptr<http_exchange> ex,
                         rs::request req, response_owner owner) {
  auto& st = self->state;
  st.ctx = std::move(ctx);
  st.ex = std::move(ex);
  st.req = std::move(req);
  st.owner = std::move(owner);
  auto store = st.ctx->env->store;
  if (st.req.previous_response_id.empty()) {
    summarize(self);
  } else {
    auto prev = st.req.previous_response_id;
    self->request(store, ask_timeout, get_response_atom::value, prev, st.owner)
      .then(
        [=](response_row& row) {
          self->request(store, ask_timeout, get_items_atom::value, row.history_item_ids, self->state.owner)
            .then(
              [=](std::vector<stored_item>& items) {
                self->state.history = parse_items(items);
                summarize(self);
              },
              [=](caf::error& err) {
                self->state.ex->respond(api_response(store_failure(err)));
                self->quit();
              });
        },
        [=](caf::error&) {
          self->state.ex->respond(api_response({400, "Previous response with id '" + prev + "' not found.",
                                                "previous_response_id", "previous_response_not_found"}));
          self->quit();
        });
  }
  return {
    [=](upstream_atom, uint64_t, std::vector<rs::upstream_event>& events) {
      auto& st = self->state;
      for (auto& e : events) {
        using kind = rs::upstream_event::kind;
        if (e.what == kind::text)
          st.summary += e.text;
        else if (e.what == kind::finish)
          st.tokens += e.tokens;
        else if (e.what == kind::failure) {
          st.ex->respond(api_response({e.http_status >= 400 && e.http_status < 500 ? 400 : 502,
                                       "The summary call failed: " + e.text, {}, "server_error"}));
          return self->quit();
        }
        if (e.what == kind::finish) {
          compacted(self);
          return;
        }
      }
      if (st.upstream)
        st.upstream->resume();
    },
  };
}

void compact(ctx_ptr ctx, http_request& req, std::shared_ptr<http_exchange> ex) {
  auto parsed = rs::parse_compact_request(req.body);
  if (auto err = std::get_if<rs::api_error>(&parsed))
    return ex->respond(api_response(*err));
  if (auto err = unroutable(*ctx, std::get<rs::request>(parsed).model))
    return ex->respond(api_response(*err));
  auto owner = owner_of(*ctx, req);
  ctx->sys->spawn(compaction, ctx, std::move(ex), std::move(std::get<rs::request>(parsed)), std::move(owner));
}

// ---- Conversations (RS-11, RS-12) ----

std::vector<stored_item> to_stored(const std::vector<rs::item>& items) {
  std::vector<stored_item> out;
  for (auto& it : items)
    out.push_back({it.id, rs::to_json(it)});
  return out;
}

rs::api_error conversation_failure(const caf::error& err, const std::string& id) {
  if (code_of(err) == errc::not_found && message_of(err).rfind("Conversation", 0) == 0)
    return rs::not_found("Conversation with id '" + id + "' not found.");
  if (code_of(err) == errc::conflict)
    return {400, message_of(err), "items", "item_already_in_conversation"};
  return store_failure(err);
}

template <class T, class OnValue, class... Ts>
void ask_conversation(ctx_ptr ctx, std::shared_ptr<http_exchange> ex, const std::string& id, OnValue on_value,
                      Ts... xs) {
  spawn_task(*ctx->sys, [=](caf::event_based_actor* self) {
    self->request(ctx->env->store, ask_timeout, xs...)
      .then([=](T& value) { ex->respond(on_value(value)); },
            [=](caf::error& err) { ex->respond(api_response(conversation_failure(err, id))); });
  });
}

// A JSON object body (rs::parse_json_body), or the answer refusing it.
std::variant<protocol::json::document, http_response> object_body(std::string_view text) {
  auto parsed = rs::parse_json_body(text);
  if (auto err = std::get_if<rs::api_error>(&parsed))
    return api_response(*err);
  auto& doc = std::get<protocol::json::document>(parsed);
  if (!doc.IsObject())
    return api_response({400, "We could not parse the JSON body of your request.", {}, "invalid_json"});
  return std::move(doc);
}

void create_conversation(ctx_ptr ctx, http_request& req, std::shared_ptr<http_exchange> ex) {
  auto body = object_body(req.body.empty() ? "{}" : req.body);
  if (auto refused = std::get_if<http_response>(&body))
    return ex->respond(std::move(*refused));
  auto doc = &std::get<protocol::json::document>(body);
  std::vector<rs::item> items;
  if (auto v = protocol::json::member(*doc, "items"); v && !v->IsNull()) {
    auto parsed = rs::parse_conversation_items(*v, 0);
    if (auto err = std::get_if<rs::api_error>(&parsed))
      return ex->respond(api_response(*err));
    items = std::get<std::vector<rs::item>>(parsed);
  }
  conversation_row row;
  row.id = protocol::uuid7_id("conv_");
  row.created_at = epoch_seconds();
  row.owner = owner_of(*ctx, req).key;
  if (auto v = protocol::json::member(*doc, "metadata"); v && !v->IsNull()) {
    if (auto err = rs::check_metadata(*v, "metadata"))
      return ex->respond(api_response(*err));
    row.metadata = protocol::json::serialize(*v);
  }
  ask_conversation<conversation_row>(
    ctx, ex, row.id, [](conversation_row& c) { return json_response(200, conversation_json(c)); },
    create_conversation_atom::value, row, to_stored(items));
}

void add_conversation_items(ctx_ptr ctx, http_request& req, std::shared_ptr<http_exchange> ex) {
  auto id = req.params["id"];
  auto body = object_body(req.body);
  if (auto refused = std::get_if<http_response>(&body))
    return ex->respond(std::move(*refused));
  auto doc = &std::get<protocol::json::document>(body);
  auto v = protocol::json::member(*doc, "items");
  if (!v)
    return ex->respond(api_response({400, "Missing required parameter: 'items'.", "items", "missing_required_parameter"}));
  auto parsed = rs::parse_conversation_items(*v, 1);
  if (auto err = std::get_if<rs::api_error>(&parsed))
    return ex->respond(api_response(*err));
  auto owner = owner_of(*ctx, req);
  if (ctx->live->conversation_busy(owner, id))
    return ex->respond(api_response(conversation_locked(id)));
  ask_conversation<std::vector<stored_item>>(
    ctx, ex, id, [](std::vector<stored_item>& items) { return json_response(200, list_json(items, false)); },
    add_conversation_items_atom::value, id, owner, to_stored(std::get<std::vector<rs::item>>(parsed)));
}

} // namespace

void add_responses_routes(router& routes, caf::actor_system& sys, std::shared_ptr<const response_environment> env,
                          std::shared_ptr<live_responses> live, std::shared_ptr<const model_catalog> models,
                          const protocol::config& config) {
  auto ctx = std::make_shared<context>();
  ctx->sys = &sys;
  ctx->env = std::move(env);
  ctx->live = std::move(live);
  ctx->config = config;
  ctx->models = std::move(models);
  ctx_ptr c = ctx;
  auto on = [&](const char* method, const char* pattern, auto fn) {
    routes.add(method, pattern, guarded(c, [c, fn](http_request& req, std::shared_ptr<http_exchange> ex) {
                 fn(c, req, std::move(ex));
               }));
  };
  on("POST", "/v1/responses", create_response);
  on("POST", "/v1/responses/compact", compact);
  on("GET", "/v1/responses/{id}", get_response);
  on("DELETE", "/v1/responses/{id}", delete_response);
  on("POST", "/v1/responses/{id}/cancel", cancel_response);
  on("GET", "/v1/responses/{id}/input_items", input_items);
  on("POST", "/v1/conversations", create_conversation);
  on("GET", "/v1/conversations/{id}", [](ctx_ptr ctx, http_request& req, std::shared_ptr<http_exchange> ex) {
    auto id = req.params["id"];
    ask_conversation<conversation_row>(
      ctx, ex, id, [](conversation_row& c) { return json_response(200, conversation_json(c)); },
      get_conversation_atom::value, id, owner_of(*ctx, req));
  });
  on("POST", "/v1/conversations/{id}", [](ctx_ptr ctx, http_request& req, std::shared_ptr<http_exchange> ex) {
    auto id = req.params["id"];
    auto body = object_body(req.body);
    if (auto refused = std::get_if<http_response>(&body))
      return ex->respond(std::move(*refused));
    auto doc = &std::get<protocol::json::document>(body);
    std::string metadata = "{}";
    if (auto v = protocol::json::member(*doc, "metadata"); v && !v->IsNull()) {
      if (auto err = rs::check_metadata(*v, "metadata"))
        return ex->respond(api_response(*err));
      metadata = protocol::json::serialize(*v);
    }
    ask_conversation<conversation_row>(
      ctx, ex, id, [](conversation_row& c) { return json_response(200, conversation_json(c)); },
      update_conversation_atom::value, id, owner_of(*ctx, req), metadata);
  });
  on("DELETE", "/v1/conversations/{id}", [](ctx_ptr ctx, http_request& req, std::shared_ptr<http_exchange> ex) {
    auto id = req.params["id"];
    ask_conversation<bool>(
      ctx, ex, id, [id](bool) { return json_response(200, deleted_json(id, "conversation.deleted")); },
      delete_conversation_atom::value, id, owner_of(*ctx, req));
  });
  on("POST", "/v1/conversations/{id}/items", add_conversation_items);
  on("GET", "/v1/conversations/{id}/items", [](ctx_ptr ctx, http_request& req, std::shared_ptr<http_exchange> ex) {
    auto page = page_of(req);
    if (auto err = std::get_if<rs::api_error>(&page))
      return ex->respond(api_response(*err));
    auto id = req.params["id"];
    auto owner = owner_of(*ctx, req);
    spawn_task(*ctx->sys, [=](caf::event_based_actor* self) {
      self->request(ctx->env->store, ask_timeout, list_conversation_items_atom::value, id, owner,
                    std::get<page_request>(page))
        .then([=](item_page& p) { ex->respond(json_response(200, list_json(p.items, p.has_more))); },
              [=](caf::error& err) {
                auto e = conversation_failure(err, id);
                if (code_of(err) == errc::not_found && message_of(err).rfind("No item", 0) == 0)
                  e.param = "after";
                ex->respond(api_response(e));
              });
    });
  });
  on("GET", "/v1/conversations/{id}/items/{item_id}",
     [](ctx_ptr ctx, http_request& req, std::shared_ptr<http_exchange> ex) {
       auto id = req.params["id"];
       auto item_id = req.params["item_id"];
       auto owner = owner_of(*ctx, req);
       spawn_task(*ctx->sys, [=](caf::event_based_actor* self) {
         self->request(ctx->env->store, ask_timeout, conversation_items_atom::value, id, owner)
           .then(
             [=](conversation_row&, std::vector<stored_item>& items) {
               for (auto& it : items)
                 if (it.id == item_id)
                   return ex->respond(json_response(200, it.json));
               ex->respond(api_response(rs::not_found("No item found with id '" + item_id + "'")));
             },
             [=](caf::error& err) { ex->respond(api_response(conversation_failure(err, id))); });
       });
     });
  on("DELETE", "/v1/conversations/{id}/items/{item_id}",
     [](ctx_ptr ctx, http_request& req, std::shared_ptr<http_exchange> ex) {
       auto id = req.params["id"];
       auto owner = owner_of(*ctx, req);
       if (ctx->live->conversation_busy(owner, id))
         return ex->respond(api_response(conversation_locked(id)));
       ask_conversation<conversation_row>(
         ctx, ex, id, [](conversation_row& c) { return json_response(200, conversation_json(c)); },
         remove_conversation_item_atom::value, id, owner, req.params["item_id"]);
     });
  on("GET", "/v1/models", [started = epoch_seconds()](ctx_ptr ctx, http_request&, std::shared_ptr<http_exchange> ex) {
    auto body = protocol::json::object([&](protocol::json::writer& w) {
      w.Key("object");
      w.String("list");
      w.Key("data");
      w.StartArray();
      for (auto& name : ctx->models->listed()) {
        w.StartObject();
        w.Key("id");
        w.String(name.c_str());
        w.Key("object");
        w.String("model");
        w.Key("created");
        w.Int64(started); // the configured models exist since this process started
        w.Key("owned_by");
        w.String("troupe");
        w.EndObject();
      }
      w.EndArray();
    });
    ex->respond(json_response(200, body));
  });
}

void fail_unfinished_responses(caf::actor_system& sys, response_store_actor store) {
  caf::scoped_actor self{sys};
  std::vector<response_row> rows;
  self->request(store, ask_timeout, unfinished_atom::value)
    .receive([&](std::vector<response_row>& r) { rows = std::move(r); },
             [&](caf::error& err) { spdlog::error("responses: cannot read unfinished responses: {}", message_of(err)); });
  static const std::string restarted =
    R"({"code":"server_error","message":"The server restarted before the response finished."})";
  for (auto& row : rows) {
    std::vector<std::string> logged;
    self->request(store, ask_timeout, response_events_atom::value, row.id, int64_t{-1})
      .receive(
        [&](std::vector<response_event>& events) {
          for (auto& e : events)
            logged.push_back(std::move(e.json));
        },
        [&](caf::error&) {});
    response_commit c;
    for (auto& e : rs::failed_ending(logged, row.snapshot, restarted, row.snapshot))
      c.events.push_back({e.sequence, std::move(e.json)});
    row.status = "failed";
    c.response = row;
    self->request(store, ask_timeout, save_response_atom::value, std::move(c))
      .receive([](int64_t) {}, [&](caf::error& err) {
        spdlog::error("responses: cannot fail {}: {}", row.id, message_of(err));
      });
  }
  if (!rows.empty())
    spdlog::warn("responses: {} response(s) were unfinished at the last stop and are now failed", rows.size());
}

} // namespace troupe::io
