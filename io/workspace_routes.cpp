#include "io/workspace_routes.hpp"

#include "actors/errors.hpp"
#include "io/route_ask.hpp"
#include "protocol/json.hpp"
#include "protocol/timestamp.hpp"
#include "protocol/workspace_events.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>
#include <utility>

namespace troupe::io {

namespace {

namespace rx = protocol::reflexr;

constexpr auto command_timeout = std::chrono::seconds(60);

// Every refusal of the workspace surface, in reflexr's dialect.
http_response reflexr_error(const problem& p) {
  return error_response(protocol::dialect::reflexr, p);
}

http_response server_fault(const std::string& what) {
  return reflexr_error({errc::internal, what});
}

// Hands a parsed command to its log and answers with what the log answered (WS-62, WS-63).
void submit(std::shared_ptr<const workspace_surface> s, workspace_command command, std::shared_ptr<http_exchange> ex) {
  spawn_task(*s->sys, [s, command = std::move(command), ex](caf::event_based_actor* self) mutable {
    auto id = command.request.command_id;
    self->request(s->logs, command_timeout, command_atom::value, std::move(command))
      .then([ex](workspace_outcome& o) { ex->respond(json_response(protocol::http_status(o.code), std::move(o.body))); },
            [ex, id](caf::error& err) {
              // WS-42: a fault is not remembered, so the same key may be retried; an owner that did
              // not answer (CJ-29) says so with a 503 and Retry-After.
              auto p = problem_of(err);
              if (p.kind == owner_unreachable)
                return ex->respond(reflexr_error({errc::unavailable, std::move(p.message)}));
              ex->respond(server_fault(id.empty() ? "the events could not be published"
                                                  : "command " + id + " failed on the server"));
            });
  });
}

std::string raw_query(const http_request& req) {
  auto q = req.target.find('?');
  return q == std::string::npos ? std::string() : req.target.substr(q + 1);
}

// POST …/commands and POST …/events: the same admission and submission around their own parser.
template <class Parse>
void post(std::shared_ptr<const workspace_surface> s, http_request& req, std::shared_ptr<http_exchange> ex,
          Parse parse) {
  std::optional<http_response> refusal;
  auto& ws = req.params["workspace_id"];
  auto caller = admit(*s, req, ws, refusal);
  if (!caller)
    return ex->respond(std::move(*refusal));
  auto parsed = parse(req.body, *s->types);
  if (auto bad = std::get_if<rx::problems>(&parsed))
    return ex->respond(reflexr_error(rx::invalid_frame(std::move(*bad))));
  submit(s, address_command(*s, *caller, {caller->tenant, ws}, std::get<rx::command_request>(std::move(parsed)),
                            req.header("traceparent")),
         ex);
}

void get_events(std::shared_ptr<const workspace_surface> s, http_request& req, std::shared_ptr<http_exchange> ex) {
  std::optional<http_response> refusal;
  auto& ws = req.params["workspace_id"];
  auto caller = admit(*s, req, ws, refusal);
  if (!caller)
    return ex->respond(std::move(*refusal));
  auto parsed = rx::parse_event_query(raw_query(req), s->types->known_types());
  if (auto bad = std::get_if<rx::query_error>(&parsed))
    return ex->respond(reflexr_error(bad->problems.empty() ? rx::validation_failed(bad->message).what
                                                     : rx::invalid_frame(std::move(bad->problems))));
  auto& q = std::get<rx::event_query>(parsed);
  workspace_read r;
  r.after_seq = q.after_seq;
  r.before_seq = q.before_seq.value_or(0);
  r.types = q.types;
  r.from_end = q.last.has_value();
  r.limit = q.last ? *q.last : q.limit.value_or(r.limit); // the port's default bounds an open read
  if (q.before_seq && *q.before_seq == 0) // nothing lies below seq 0
    return ex->respond(json_response(200, "[]"));
  workspace_key key{caller->tenant, ws};
  spawn_task(*s->sys, [s, key, r, ex](caf::event_based_actor* self) {
    self->request(s->logs, command_timeout, read_atom::value, key, r)
      .then(
        [ex](workspace_slice& slice) {
          std::string body = "[";
          for (std::size_t i = 0; i < slice.envelopes.size(); ++i)
            body += (i ? "," : "") + slice.envelopes[i];
          ex->respond(json_response(200, body + "]"));
        },
        [ex](caf::error&) { ex->respond(server_fault("the log could not be read")); });
  });
}

} // namespace

workspace_command address_command(const workspace_surface& s, const rx::workspace_caller& caller,
                                  const workspace_key& key, rx::command_request request, std::string_view traceparent) {
  workspace_command c;
  c.key = key;
  c.participant = protocol::participant(caller.actor);
  c.request = std::move(request);
  c.context.workspace_id = key.workspace;
  c.context.actor = caller.actor;
  c.context.now = protocol::utc_timestamp(std::chrono::system_clock::now());
  c.context.traceparent = rx::append_traceparent(traceparent);
  c.context.max_depth = s.config.max_depth;
  c.context.types = s.types;
  return c;
}

std::optional<rx::workspace_caller> admit(const workspace_surface& s, const http_request& req,
                                          const std::string& workspace_id, std::optional<http_response>& refusal) {
  auto caller = rx::authenticate(req.header("authorization"), s.config, s.service_tokens, s.open);
  if (!caller) {
    refusal = reflexr_error({errc::unauthorized, "unauthorized"});
    refusal->headers.emplace_back("WWW-Authenticate", "Bearer");
    return std::nullopt;
  }
  if (!rx::is_workspace_id(workspace_id)) {
    refusal = reflexr_error(
      rx::validation_failed("workspace id '" + workspace_id + "' must match ^[a-z0-9][a-z0-9_-]{0,63}$").what);
    return std::nullopt;
  }
  if (!rx::may_use(*caller, workspace_id)) {
    refusal = reflexr_error(rx::forbidden(rx::not_yours_message).what);
    return std::nullopt;
  }
  return caller;
}

void add_workspace_routes(router& routes, std::shared_ptr<const workspace_surface> surface) {
  auto s = std::move(surface);
  routes.add("POST", "/v1/workspaces/{workspace_id}/commands",
             [s](http_request& req, std::shared_ptr<http_exchange> ex) { post(s, req, std::move(ex), rx::parse_command_frame); });
  routes.add("POST", "/v1/workspaces/{workspace_id}/events",
             [s](http_request& req, std::shared_ptr<http_exchange> ex) { post(s, req, std::move(ex), rx::parse_publish_body); });
  routes.add("GET", "/v1/workspaces/{workspace_id}/events",
             [s](http_request& req, std::shared_ptr<http_exchange> ex) { get_events(s, req, std::move(ex)); });
  routes.add("GET", "/v1/workspaces/{workspace_id}/stream",
             [s](http_request& req, std::shared_ptr<http_exchange> ex) { open_workspace_stream(s, req, std::move(ex)); });
}

} // namespace troupe::io
