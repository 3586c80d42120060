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

constexpr const char* approval_not_found = "Approval request not found";
// What resolving a missing approval answers (the approval registry's words, AS-48).
constexpr const char* unresolvable = "Approval request not found or already resolved";

// Resolves an approval (AS-48) the caller may see: for a caller confined to its tenant, another
// tenant's approval is not found and stays as it is (AS-84).
void resolve_visible(const std::shared_ptr<context>& ctx, std::shared_ptr<http_exchange> ex,
                     const protocol::tenant_scope& scope, std::string id, bool approve, std::string reason) {
  auto resolve = [ctx, id, approve, reason](std::shared_ptr<http_exchange> ex) {
    ask<protocol::approval_record>(
      *ctx->sys, std::move(ex), ctx->approvals,
      [](protocol::approval_record& r) { return json_response(200, protocol::resolution_json(r)); },
      resolve_atom::value, id, approve, reason);
  };
  if (!scope.tenant)
    return resolve(std::move(ex));
  spawn_task(*ctx->sys, [ex = std::move(ex), ctx, scope, id, resolve](caf::event_based_actor* self) {
    self->request(ctx->store, ask_timeout, get_approval_atom::value, id)
      .then(
        [=](protocol::approval_record& r) {
          if (!scope.sees(r.tenant_key))
            return ex->respond(agent_error(errc::not_found, unresolvable));
          resolve(ex);
        },
        [=](caf::error& err) {
          ex->respond(code_of(err) == errc::not_found ? agent_error(errc::not_found, unresolvable)
                                                      : error_response(err));
        });
  });
}

} // namespace

void add_policy_routes(router& routes, caf::actor_system& sys, approval_registry_actor approvals, store_actor store,
                       const protocol::config& config) {
  auto ctx = std::make_shared<context>(context{&sys, std::move(approvals), std::move(store), config});
  // Operator endpoints: the service token applies (AS-1, AS-3).
  auto guarded = [ctx](auto handler) {
    return [ctx, handler](http_request& req, std::shared_ptr<http_exchange> ex) {
      if (!operator_allowed(ctx->config, req))
        return ex->respond(unauthorized());
      handler(req, std::move(ex));
    };
  };
  // Control endpoints (AS-84): the service token sees every tenant's approvals, a caller identified
  // per auth.mode its own tenant's.
  auto scoped = [ctx](auto handler) {
    return [ctx, handler](http_request& req, std::shared_ptr<http_exchange> ex) {
      auto scope = control_scope(ctx->config, req);
      if (auto refused = std::get_if<http_response>(&scope))
        return ex->respond(std::move(*refused));
      handler(req, std::move(ex), std::get<protocol::tenant_scope>(scope));
    };
  };
  using scope_ref = const protocol::tenant_scope&;
  routes.add("GET", "/v1/policy", guarded([ctx](http_request&, std::shared_ptr<http_exchange> ex) {
    ex->respond(json_response(200, protocol::policy_document_json(ctx->config.policy)));
  }));
  routes.add("POST", "/v1/policy/check", guarded([ctx](http_request& req, std::shared_ptr<http_exchange> ex) {
    auto out = protocol::policy_check(ctx->config.policy, ctx->config.safety, req.body);
    if (auto err = std::get_if<protocol::request_error>(&out))
      return ex->respond(agent_error(err->what));
    ex->respond(json_response(200, std::get<std::string>(out)));
  }));
  routes.add("GET", "/v1/approvals", scoped([ctx](http_request& req, auto ex, scope_ref scope) {
    auto q = protocol::parse_approval_query(req.query);
    if (auto err = std::get_if<protocol::request_error>(&q))
      return ex->respond(agent_error(err->what));
    auto query = std::get<protocol::approval_query>(q);
    query.tenant_key = scope.tenant; // filtered in the store, counts included
    ask<approval_list>(
      *ctx->sys, std::move(ex), ctx->store,
      [query](approval_list& l) { return json_response(200, protocol::approvals_page_json(l.page, query, l.summary)); },
      list_approvals_atom::value, query);
  }));
  routes.add("GET", "/v1/approvals/{id}", scoped([ctx](http_request& req, auto ex, scope_ref scope) {
    ask<protocol::approval_record>(
      *ctx->sys, std::move(ex), ctx->store,
      [scope](protocol::approval_record& r) {
        if (!scope.sees(r.tenant_key)) // AS-84: another tenant's approval is a missing one
          return agent_error(errc::not_found, approval_not_found);
        return json_response(200, "{\"approval\":" + protocol::approval_json(r) + "}");
      },
      get_approval_atom::value, req.params["id"]);
  }));
  for (auto [verb, approve] : {std::pair{"approve", true}, {"deny", false}}) {
    routes.add("POST", std::string("/v1/approvals/{id}/") + verb,
               scoped([ctx, approve = approve](http_request& req, auto ex, scope_ref scope) {
                 auto reason = reason_of(req.body);
                 if (auto err = std::get_if<http_response>(&reason))
                   return ex->respond(std::move(*err));
                 resolve_visible(ctx, std::move(ex), scope, req.params["id"], approve, std::get<std::string>(reason));
               }));
  }
}

} // namespace troupe::io
