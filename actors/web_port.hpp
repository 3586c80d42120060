// The port through which an actor calls a JSON API over HTTP (PSKA's, troupe's own public one): one
// request, its whole answer. The adapter (io/web_client) picks no meaning for a status: a 4xx or 5xx
// is an answer; only a transport failure or a timeout is an error.
#pragma once

#include "actors/atoms.hpp"

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <string>
#include <utility>
#include <vector>

namespace troupe {

using web_atom = caf::atom_constant<caf::atom("web")>;

struct web_request {
  std::string method;
  std::string url; // http:// or https://
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  double timeout_seconds = 30;
};

struct web_response {
  int status = 0;
  std::string body;
  double retry_after_seconds = 0; // from Retry-After in seconds, 0 when absent
};

using web_port_actor = caf::typed_actor<caf::replies_to<web_atom, web_request>::with<web_response>>;

} // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::web_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::web_response)
