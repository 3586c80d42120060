// What every agent-service route shares: its error responses, the service-token check (AS-3) and
// the run a request asks for (AS-4).
#pragma once

#include "actors/messages.hpp"
#include "io/http_types.hpp"
#include "protocol/config.hpp"
#include "protocol/errors.hpp"

#include <string_view>

namespace troupe::io {

// {"detail": ...} with the status of `code`.
http_response agent_error(errc code, std::string_view detail);

// With service tokens configured, a request must present one of them.
bool service_authorized(const protocol::config& config, const http_request& req);

http_response unauthorized();

// The run of a validated chat-shaped body: its id (metadata.run_id, else a fresh UUID), the caller's
// user and tenant keys (body, then header, then "anonymous" / the user key's prefix).
run_spec run_spec_of(const http_request& req, protocol::chat_request chat);

} // namespace troupe::io
