#include "io/responses_routes.hpp"

#include "actors/errors.hpp"
#include "io/agent_http.hpp"
#include "io/mcp_http_transport.hpp"
#include "io/responses_sse.hpp"
#include "io/route_ask.hpp"
#include "protocol/ids.hpp"
#include "protocol/json.hpp"
#include "protocol/model_routing.hpp"
#include "protocol/query_string.hpp"
#include "protocol/responses_search.hpp"
#include "protocol/utf8.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <optional>
#include <variant>

namespace troupe::io {

namespace {

namespace rs = protocol::responses;

struct context {
  caf::actor_system* sys = nullptr;
  response_registry_actor registry;
  response_store_actor store;
  protocol::config config;
  std::shared_ptr<const model_catalog> models; // Appendix A
};
using ctx_ptr = std::shared_ptr<const context>;
using exchange_ptr = std::shared_ptr<http_exchange>;

int64_t epoch_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

http_response api_response(const problem& e) {
  return error_response(protocol::dialect::openai, e);
}

// Asks `dest` and answers the exchange with `on_value(reply)`, or with the problem the reply carries.
template <class T, class Dest, class OnValue, class... Ts>
void ask(const context& ctx, exchange_ptr ex, Dest dest, OnValue on_value, Ts... xs) {
  ctx.sys->spawn(
    [](caf::event_based_actor* self, exchange_ptr ex, Dest dest, OnValue on_value, Ts... xs) {
      self->request(dest, caf::infinite, xs...)
        .then([=](T& value) { ex->respond(on_value(value)); },
              [=](caf::error& err) { ex->respond(api_response(problem_of(err))); });
    },
    std::move(ex), std::move(dest), std::move(on_value), std::move(xs)...);
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

// Wraps a handler with the RS-3 check.
http_handler guarded(ctx_ptr ctx, http_handler handler) {
  return [ctx, handler](http_request& req, exchange_ptr ex) {
    auto admitted = admit_responses_caller(ctx->config, req);
    if (auto refused = std::get_if<problem>(&admitted))
      return ex->respond(api_response(protocol::responses_refusal(std::move(*refused))));
    handler(req, std::move(ex));
  };
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

http_response conversation_response(conversation_row& c) {
  return json_response(200, conversation_json(c));
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
std::variant<page_request, problem> page_of(const http_request& req) {
  page_request p;
  if (auto it = req.query.find("limit"); it != req.query.end()) {
    char* end = nullptr;
    auto n = std::strtoll(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || n < 1 || n > 100)
      return problem{errc::bad_request,
                     "Invalid 'limit': expected an integer between 1 and 100, but got '" + it->second + "'.", "limit",
                     "invalid_value"};
    p.limit = n;
  }
  if (auto it = req.query.find("order"); it != req.query.end()) {
    if (it->second != "asc" && it->second != "desc")
      return problem{errc::bad_request, "Invalid value for 'order': '" + it->second + "'.", "order", "invalid_value"};
    p.ascending = it->second == "asc";
  }
  if (auto it = req.query.find("after"); it != req.query.end())
    p.after = it->second;
  return p;
}

// RS-5, RS-8, RS-12: `include[]` on a GET is checked as on create.
std::optional<problem> bad_include(const http_request& req) {
  auto q = req.target.find('?');
  if (q == std::string::npos)
    return std::nullopt;
  return rs::check_include_query(protocol::query_pairs(std::string_view(req.target).substr(q + 1)));
}

// A page of items (RS-8); an `after` naming no item is that parameter's fault.
void answer_page(const context& ctx, exchange_ptr ex, const http_request& req, const std::string& id,
                 bool conversation) {
  if (auto err = bad_include(req))
    return ex->respond(api_response(*err));
  auto page = page_of(req);
  if (auto err = std::get_if<problem>(&page))
    return ex->respond(api_response(*err));
  auto owner = owner_of(ctx, req);
  auto p = std::get<page_request>(page);
  spawn_task(*ctx.sys, [=, store = ctx.store](caf::event_based_actor* self) {
    auto on_page = [=](item_page& page) { ex->respond(json_response(200, list_json(page.items, page.has_more))); };
    auto on_error = [=](caf::error& err) {
      auto e = conversation ? conversation_failure(err, id) : store_failure(err);
      if (problem_of(err).kind == missing_item)
        e.param = "after";
      ex->respond(api_response(e));
    };
    if (conversation)
      self->request(store, ask_timeout, list_conversation_items_atom::value, id, owner, p).then(on_page, on_error);
    else
      self->request(store, ask_timeout, input_items_atom::value, id, owner, p).then(on_page, on_error);
  });
}

// ---- /v1/responses ----

// RS-2: a model no upstream serves is refused before any run starts, so a stream:true request gets
// plain JSON (RS-1).
std::optional<problem> unroutable(const context& ctx, const std::string& model) {
  if (ctx.models->route(model))
    return std::nullopt;
  return protocol::model_not_found(model);
}

void create_response(ctx_ptr ctx, http_request& req, exchange_ptr ex) {
  auto parsed = rs::parse_request(req.body, ctx->config.responses.compact_default_threshold);
  if (auto err = std::get_if<problem>(&parsed))
    return ex->respond(api_response(*err));
  auto& search = ctx->config.search; // RS-27: a search tool without a provider stays refused
  if (auto err = rs::check_search_tools(std::get<rs::request>(parsed), search.web_search.configured(),
                                        search.file_search.configured()))
    return ex->respond(api_response(*err));
  if (auto err = unroutable(*ctx, std::get<rs::request>(parsed).model))
    return ex->respond(api_response(*err));
  response_job job;
  job.req = std::move(std::get<rs::request>(parsed));
  job.input = job.req.input;
  job.id = protocol::uuid7_id("resp_");
  job.created_at = epoch_seconds();
  job.owner = owner_of(*ctx, req).key;
  auto limit = ctx->config.responses.outbound_queue_events;
  sink_opener open_sink = [ex, limit] { return open_response_sink(*ex, limit); };
  ex->on_disconnect([registry = ctx->registry, id = job.id] { caf::anon_send(registry, disconnect_atom::value, id); });
  spawn_task(*ctx->sys, [=, registry = ctx->registry](caf::event_based_actor* self) mutable {
    self->request(registry, caf::infinite, create_response_atom::value, std::move(job), std::move(open_sink))
      .then(
        [=](response_answer& a) {
          if (!a.streamed) // a streaming client got everything through its sink
            ex->respond(a.end.failed ? api_response(a.end.error) : json_response(200, a.end.snapshot));
        },
        [=](caf::error& err) { ex->respond(api_response(problem_of(err))); });
  });
}

void get_response(ctx_ptr ctx, http_request& req, exchange_ptr ex) {
  if (auto err = bad_include(req))
    return ex->respond(api_response(*err));
  auto id = req.params["id"];
  auto owner = owner_of(*ctx, req);
  auto s = req.query.find("stream");
  if (s == req.query.end() || s->second != "true")
    return ask<std::string>(
      *ctx, ex, ctx->registry, [](std::string& object) { return json_response(200, std::move(object)); },
      get_response_atom::value, id, owner);
  int64_t after = -1;
  if (auto it = req.query.find("starting_after"); it != req.query.end()) {
    char* end = nullptr;
    after = std::strtoll(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || after < -1)
      return ex->respond(api_response({errc::bad_request, "Invalid value for 'starting_after': '" + it->second + "'.",
                                       "starting_after", "invalid_value"}));
  }
  // RS-6: the relay follows a live run; a finished one's events are written here.
  auto relay = spawn_response_relay(*ctx->sys, ex, after);
  spawn_task(*ctx->sys, [=, registry = ctx->registry](caf::event_based_actor* self) {
    self->request(registry, caf::infinite, subscribe_atom::value, id, owner, after, relay)
      .then(
        [=](response_replay& replay) {
          if (replay.following)
            return caf::anon_send(relay, start_atom::value);
          caf::anon_send_exit(relay, caf::exit_reason::user_shutdown);
          write_response_events(*ex, replay.events);
        },
        [=](caf::error& err) {
          caf::anon_send_exit(relay, caf::exit_reason::user_shutdown);
          ex->respond(api_response(problem_of(err)));
        });
  });
}

// ---- conversations (RS-11, RS-12) ----

std::vector<stored_item> to_stored(const std::vector<rs::item>& items) {
  std::vector<stored_item> out;
  for (auto& it : items)
    out.push_back({it.id, rs::to_json(it)});
  return out;
}

// A conversation reply, or its problem with the conversation's own 404 wording.
template <class T, class OnValue, class... Ts>
void ask_conversation(const context& ctx, exchange_ptr ex, const std::string& id, OnValue on_value, Ts... xs) {
  spawn_task(*ctx.sys, [=, store = ctx.store](caf::event_based_actor* self) {
    self->request(store, ask_timeout, xs...)
      .then([=](T& value) { ex->respond(on_value(value)); },
            [=](caf::error& err) { ex->respond(api_response(conversation_failure(err, id))); });
  });
}

// A JSON object body (rs::parse_json_body), or why not.
std::variant<protocol::json::document, problem> object_body(std::string_view text) {
  auto parsed = rs::parse_json_body(text);
  if (auto err = std::get_if<problem>(&parsed))
    return *err;
  auto& doc = std::get<protocol::json::document>(parsed);
  if (!doc.IsObject())
    return problem{errc::bad_request, "We could not parse the JSON body of your request.", {}, "invalid_json"};
  return std::move(doc);
}

void create_conversation(ctx_ptr ctx, http_request& req, exchange_ptr ex) {
  auto body = object_body(req.body.empty() ? "{}" : req.body);
  if (auto err = std::get_if<problem>(&body))
    return ex->respond(api_response(*err));
  auto& doc = std::get<protocol::json::document>(body);
  std::vector<rs::item> items;
  if (auto v = protocol::json::member(doc, "items"); v && !v->IsNull()) {
    auto parsed = rs::parse_conversation_items(*v, 0);
    if (auto err = std::get_if<problem>(&parsed))
      return ex->respond(api_response(*err));
    items = std::get<std::vector<rs::item>>(parsed);
  }
  auto metadata = rs::conversation_metadata(doc);
  if (auto err = std::get_if<problem>(&metadata))
    return ex->respond(api_response(*err));
  conversation_row row;
  row.id = protocol::uuid7_id("conv_");
  row.created_at = epoch_seconds();
  row.owner = owner_of(*ctx, req).key;
  row.metadata = std::get<std::optional<std::string>>(metadata).value_or("{}");
  ask<conversation_row>(*ctx, ex, ctx->store, conversation_response, create_conversation_atom::value, row,
                        to_stored(items));
}

void update_conversation(ctx_ptr ctx, http_request& req, exchange_ptr ex) {
  auto id = req.params["id"];
  auto body = object_body(req.body);
  if (auto err = std::get_if<problem>(&body))
    return ex->respond(api_response(*err));
  auto metadata = rs::conversation_metadata(std::get<protocol::json::document>(body));
  if (auto err = std::get_if<problem>(&metadata))
    return ex->respond(api_response(*err));
  auto& given = std::get<std::optional<std::string>>(metadata);
  if (!given) // RS-11: a body without metadata changes nothing
    return ask_conversation<conversation_row>(*ctx, ex, id, conversation_response, get_conversation_atom::value, id,
                                              owner_of(*ctx, req));
  ask_conversation<conversation_row>(*ctx, ex, id, conversation_response, update_conversation_atom::value, id,
                                     owner_of(*ctx, req), *given);
}

void add_conversation_items(ctx_ptr ctx, http_request& req, exchange_ptr ex) {
  auto id = req.params["id"];
  auto body = object_body(req.body);
  if (auto err = std::get_if<problem>(&body))
    return ex->respond(api_response(*err));
  auto v = protocol::json::member(std::get<protocol::json::document>(body), "items");
  if (!v)
    return ex->respond(
      api_response({errc::bad_request, "Missing required parameter: 'items'.", "items", "missing_required_parameter"}));
  auto parsed = rs::parse_conversation_items(*v, 1);
  if (auto err = std::get_if<problem>(&parsed))
    return ex->respond(api_response(*err));
  ask<std::vector<stored_item>>(
    *ctx, ex, ctx->registry, [](std::vector<stored_item>& items) { return json_response(200, list_json(items, false)); },
    add_conversation_items_atom::value, id, owner_of(*ctx, req), to_stored(std::get<std::vector<rs::item>>(parsed)));
}

void get_conversation_item(ctx_ptr ctx, http_request& req, exchange_ptr ex) {
  if (auto err = bad_include(req))
    return ex->respond(api_response(*err));
  auto id = req.params["id"];
  auto item_id = req.params["item_id"];
  auto owner = owner_of(*ctx, req);
  spawn_task(*ctx->sys, [=, store = ctx->store](caf::event_based_actor* self) {
    self->request(store, ask_timeout, conversation_items_atom::value, id, owner)
      .then(
        [=](conversation_row&, std::vector<stored_item>& items) {
          for (auto& it : items)
            if (it.id == item_id)
              return ex->respond(json_response(200, it.json));
          ex->respond(api_response(rs::not_found("No item found with id '" + item_id + "'")));
        },
        [=](caf::error& err) { ex->respond(api_response(conversation_failure(err, id))); });
  });
}

// The members of OpenAI's model object (RS-13); the configured models exist since this process started.
void write_model(protocol::json::writer& w, const std::string& name, int64_t started) {
  w.Key("id");
  w.String(name.c_str(), static_cast<rapidjson::SizeType>(name.size()));
  w.Key("object");
  w.String("model");
  w.Key("created");
  w.Int64(started);
  w.Key("owned_by");
  w.String("troupe");
}

void list_models(ctx_ptr ctx, int64_t started, exchange_ptr ex) {
  auto body = protocol::json::object([&](protocol::json::writer& w) {
    w.Key("object");
    w.String("list");
    w.Key("data");
    w.StartArray();
    for (auto& name : ctx->models->listed()) {
      w.StartObject();
      write_model(w, name, started);
      w.EndObject();
    }
    w.EndArray();
  });
  ex->respond(json_response(200, body));
}

// GET /v1/models/{model}: a model a request may name, or model_not_found. Ids may hold '/'
// (`Qwen/Qwen3.6-35B-A3B`), so the route takes the rest of the path.
void get_model(ctx_ptr ctx, const std::string& name, int64_t started, exchange_ptr ex) {
  if (auto err = unroutable(*ctx, name))
    return ex->respond(api_response(*err));
  ex->respond(json_response(200, protocol::json::object([&](protocol::json::writer& w) { write_model(w, name, started); })));
}

} // namespace

void add_responses_routes(router& routes, caf::actor_system& sys, response_registry_actor registry,
                          response_store_actor store, std::shared_ptr<const model_catalog> models,
                          const protocol::config& config) {
  auto ctx = std::make_shared<context>();
  ctx->sys = &sys;
  ctx->registry = std::move(registry);
  ctx->store = std::move(store);
  ctx->config = config;
  ctx->models = std::move(models);
  ctx_ptr c = ctx;
  auto on = [&](const char* method, const char* pattern, auto fn) {
    routes.add(method, pattern, guarded(c, [c, fn](http_request& req, exchange_ptr ex) { fn(c, req, std::move(ex)); }));
  };
  on("POST", "/v1/responses", create_response);
  on("POST", "/v1/responses/compact", [](ctx_ptr ctx, http_request& req, exchange_ptr ex) {
    auto parsed = rs::parse_compact_request(req.body);
    if (auto err = std::get_if<problem>(&parsed))
      return ex->respond(api_response(*err));
    if (auto err = unroutable(*ctx, std::get<rs::request>(parsed).model))
      return ex->respond(api_response(*err));
    ask<std::string>(
      *ctx, ex, ctx->registry, [](std::string& object) { return json_response(200, std::move(object)); },
      compact_atom::value, std::move(std::get<rs::request>(parsed)), owner_of(*ctx, req));
  });
  on("GET", "/v1/responses/{id}", get_response);
  on("DELETE", "/v1/responses/{id}", [](ctx_ptr ctx, http_request& req, exchange_ptr ex) {
    auto id = req.params["id"];
    ask<bool>(
      *ctx, ex, ctx->registry, [id](bool) { return json_response(200, deleted_json(id, "response")); },
      delete_response_atom::value, id, owner_of(*ctx, req));
  });
  on("POST", "/v1/responses/{id}/cancel", [](ctx_ptr ctx, http_request& req, exchange_ptr ex) {
    ask<std::string>(
      *ctx, ex, ctx->registry, [](std::string& object) { return json_response(200, std::move(object)); },
      cancel_atom::value, req.params["id"], owner_of(*ctx, req));
  });
  on("GET", "/v1/responses/{id}/input_items",
     [](ctx_ptr ctx, http_request& req, exchange_ptr ex) { answer_page(*ctx, ex, req, req.params["id"], false); });
  on("POST", "/v1/conversations", create_conversation);
  on("GET", "/v1/conversations/{id}", [](ctx_ptr ctx, http_request& req, exchange_ptr ex) {
    auto id = req.params["id"];
    ask_conversation<conversation_row>(*ctx, ex, id, conversation_response, get_conversation_atom::value, id,
                                       owner_of(*ctx, req));
  });
  on("POST", "/v1/conversations/{id}", update_conversation);
  on("DELETE", "/v1/conversations/{id}", [](ctx_ptr ctx, http_request& req, exchange_ptr ex) {
    auto id = req.params["id"];
    ask_conversation<bool>(
      *ctx, ex, id, [id](bool) { return json_response(200, deleted_json(id, "conversation.deleted")); },
      delete_conversation_atom::value, id, owner_of(*ctx, req));
  });
  on("POST", "/v1/conversations/{id}/items", add_conversation_items);
  on("GET", "/v1/conversations/{id}/items",
     [](ctx_ptr ctx, http_request& req, exchange_ptr ex) { answer_page(*ctx, ex, req, req.params["id"], true); });
  on("GET", "/v1/conversations/{id}/items/{item_id}", get_conversation_item);
  on("DELETE", "/v1/conversations/{id}/items/{item_id}", [](ctx_ptr ctx, http_request& req, exchange_ptr ex) {
    ask<conversation_row>(*ctx, ex, ctx->registry, conversation_response, remove_conversation_item_atom::value,
                          req.params["id"], owner_of(*ctx, req), req.params["item_id"]);
  });
  auto started = epoch_seconds(); // the list and each model say the same `created`
  on("GET", "/v1/models", [started](ctx_ptr ctx, http_request&, exchange_ptr ex) {
    list_models(ctx, started, std::move(ex));
  });
  on("GET", "/v1/models/{model...}", [started](ctx_ptr ctx, http_request& req, exchange_ptr ex) {
    // A decoded path may hold any bytes; only valid UTF-8 reaches a body.
    get_model(ctx, protocol::utf8_repaired(req.params["model"]), started, std::move(ex));
  });
}

response_registry_options registry_options(const protocol::config& config) {
  response_registry_options o;
  o.max_active_background = static_cast<std::size_t>(config.responses.background_max_active);
  o.mcp_connect_timeout_seconds = config.mcp.connect_timeout_seconds;
  o.mcp_call_timeout_seconds = config.mcp.call_timeout_seconds;
  o.mcp = config.mcp;
  o.declared_transport = [](const protocol::mcp_server_config& c) { return make_mcp_http_transport(c); };
  return o;
}

} // namespace troupe::io
