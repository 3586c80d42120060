#include "io/policy_routes.hpp"

#include "io/agent_http.hpp"
#include "io/route_ask.hpp"
#include "protocol/approvals.hpp"
#include "protocol/chat_request.hpp"
#include "protocol/json.hpp"
#include "protocol/policy.hpp"

namespace troupe::io {

namespace {

struct context {
  caf::actor_system* sys;
  approval_registry_actor approvals;
  store_actor store;
  protocol::config config;
};

// The approve / deny body: an optional {"reason": "..."}; "" when absent.
std::variant<std::string, http_response> reason_of(const std::string& body) {
  if (body.find_first_not_of(" \t\r\n") == std::string::npos)
    return std::string();
  auto parsed = protocol::json::parse_body(body);
  if (auto failure = std::get_if<protocol::json::parse_failure>(&parsed)) {
    return agent_error(protocol::body_refusal(*failure).what);
  }
  auto doc = &std::get<protocol::json::document>(parsed);
  if (!doc->IsObject())
    return agent_error(protocol::invalid({{{"body"}, "Input should be a valid dictionary", "dict_type"}}));
  auto reason = protocol::json::member(*doc, "reason");
  if (reason && !reason->IsNull() && !reason->IsString())
    return agent_error(protocol::invalid({{{"body", "reason"}, "Input should be a valid string", "string_type"}}));
  return protocol::json::get_string(*doc, "reason");
}

} // namespace

void add_policy_routes(router& routes, caf::actor_system& sys, approval_registry_actor approvals, store_actor store,
                       const protocol::config& config) {
  auto ctx = std::make_shared<context>(context{&sys, std::move(approvals), std::move(store), config});
  // Operator and control endpoints: the service token applies (AS-1, AS-3).
  auto guarded = [ctx](auto handler) {
    return [ctx, handler](http_request& req, std::shared_ptr<http_exchange> ex) {
      if (!operator_allowed(ctx->config, req))
        return ex->respond(unauthorized());
      handler(req, std::move(ex));
    };
  };
  routes.add("GET", "/v1/policy", guarded([ctx](http_request&, std::shared_ptr<http_exchange> ex) {
    ex->respond(json_response(200, protocol::policy_document_json(ctx->config.policy)));
  }));
  routes.add("POST", "/v1/policy/check", guarded([ctx](http_request& req, std::shared_ptr<http_exchange> ex) {
    auto out = protocol::policy_check(ctx->config.policy, ctx->config.safety, req.body);
    if (auto err = std::get_if<protocol::request_error>(&out))
      return ex->respond(agent_error(err->what));
    ex->respond(json_response(200, std::get<std::string>(out)));
  }));
  routes.add("GET", "/v1/approvals", guarded([ctx](http_request& req, std::shared_ptr<http_exchange> ex) {
    auto q = protocol::parse_approval_query(req.query);
    if (auto err = std::get_if<protocol::request_error>(&q))
      return ex->respond(agent_error(err->what));
    auto query = std::get<protocol::approval_query>(q);
    ask<approval_list>(
      *ctx->sys, std::move(ex), ctx->store,
      [query](approval_list& l) { return json_response(200, protocol::approvals_page_json(l.page, query, l.summary)); },
      list_approvals_atom::value, query);
  }));
  routes.add("GET", "/v1/approvals/{id}", guarded([ctx](http_request& req, std::shared_ptr<http_exchange> ex) {
    ask<protocol::approval_record>(
      *ctx->sys, std::move(ex), ctx->store,
      [](protocol::approval_record& r) { return json_response(200, "{\"approval\":" + protocol::approval_json(r) + "}"); },
      get_approval_atom::value, req.params["id"]);
  }));
  for (auto [verb, approve] : {std::pair{"approve", true}, {"deny", false}}) {
    routes.add("POST", std::string("/v1/approvals/{id}/") + verb,
               guarded([ctx, approve = approve](http_request& req, std::shared_ptr<http_exchange> ex) {
                 auto reason = reason_of(req.body);
                 if (auto err = std::get_if<http_response>(&reason))
                   return ex->respond(std::move(*err));
                 ask<protocol::approval_record>(
                   *ctx->sys, std::move(ex), ctx->approvals,
                   [](protocol::approval_record& r) { return json_response(200, protocol::resolution_json(r)); },
                   resolve_atom::value, req.params["id"], approve, std::get<std::string>(reason));
               }));
  }
}

} // namespace troupe::io
