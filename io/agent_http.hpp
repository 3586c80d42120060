// What every agent-service route shares: its error responses, who may call it (AS-1, AS-3..AS-8)
// and the run a caller's request asks for.
#pragma once

#include "actors/messages.hpp"
#include "actors/store.hpp"
#include "io/http_types.hpp"
#include "protocol/chat_request.hpp"
#include "protocol/config.hpp"
#include "protocol/errors.hpp"
#include "protocol/identity.hpp"
#include "protocol/tenant_scope.hpp"

#include <caf/actor_system.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <variant>

namespace troupe::io {

// {"detail": ...} with the status of `code`.
http_response agent_error(errc code, std::string_view detail);
// `p` in the agent service's dialect (AS-2's 422 list when it has issues).
http_response agent_error(const problem& p);

// Operator and control endpoints: the service token (AS-3); with none configured, open only in
// service_token mode.
bool operator_allowed(const protocol::config& config, const http_request& req);

http_response unauthorized();

// A caller endpoint's 401/500 from the request's head alone (AS-2: before the body is read or parsed).
std::optional<http_response> caller_refusal(const protocol::config& config, const http_request& req);
// The same caller, identified by the request's head alone: its identity (`service_token` set for the
// operator credential, which spans tenants, AS-84), or the 401/500.
std::variant<protocol::identity, http_response> identify_caller(const protocol::config& config,
                                                                const http_request& req);

// A control endpoint's caller (AS-84): whose records it may see (every tenant's with the service
// token, else its own tenant's), or the 401/500 of identify_caller.
std::variant<protocol::tenant_scope, http_response> control_scope(const protocol::config& config,
                                                                  const http_request& req);

// The headers `req` may assert about its caller (protocol::caller_headers: trusted identity headers
// only from auth.trusted_proxies). `req` must outlive the lookup.
protocol::header_lookup caller_headers(const protocol::config& config, const http_request& req);

// Who may use the Responses gateway (RS-3, one rule with AS-3 and WS-59): the caller, or the refusal.
std::variant<protocol::responses_caller, problem> admit_responses_caller(const protocol::config& config,
                                                                                      const http_request& req);

// A caller endpoint's request (POST /v1/chat/completions, POST /v1/runs: `kind`), admitted in the
// order of AS-2: identity (401/500), body validation (422), allow/block lists (403), the rate limit
// (429, counted in `store`), then the body's other errors (400). `proceed` gets the run to start: its
// id (metadata.run_id, else a fresh UUID), the caller's identity and the AS-7 metadata.
void admit_caller(caf::actor_system& sys, store_actor store, const protocol::config& config, http_request& req,
                  protocol::request_kind kind, std::shared_ptr<http_exchange> ex,
                  std::function<void(run_spec spec, std::shared_ptr<http_exchange> ex)> proceed);

} // namespace troupe::io
