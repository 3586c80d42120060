#include "io/agent_http.hpp"

#include "protocol/auth.hpp"
#include "protocol/ids.hpp"

namespace troupe::io {

http_response agent_error(errc code, std::string_view detail) {
  return json_response(protocol::http_status(code), protocol::error_body(protocol::dialect::agent, code, detail));
}

bool service_authorized(const protocol::config& config, const http_request& req) {
  auto& tokens = config.service.service_tokens;
  if (tokens.empty())
    return true;
  return protocol::token_accepted(tokens, protocol::presented_token(req.header("authorization"),
                                                                    req.header("x-fastreact-service-token")));
}

http_response unauthorized() {
  return agent_error(errc::unauthorized, "FastReAct service token required");
}

run_spec run_spec_of(const http_request& req, protocol::chat_request chat) {
  run_spec spec;
  spec.run_id = chat.run_id.empty() ? protocol::uuid4() : chat.run_id;
  // AS-4: body, then header, then "anonymous"; the tenant is explicit, else the user key's prefix.
  spec.user_key = !chat.user_key.empty() ? chat.user_key
                  : !req.header("x-fastreact-user-key").empty() ? req.header("x-fastreact-user-key")
                                                                 : "anonymous";
  spec.tenant_key = !chat.tenant_key.empty() ? chat.tenant_key
                    : !req.header("x-fastreact-tenant-key").empty() ? req.header("x-fastreact-tenant-key")
                                                                     : protocol::infer_tenant(spec.user_key);
  spec.request_body = req.body;
  spec.request = std::move(chat);
  return spec;
}

} // namespace troupe::io
