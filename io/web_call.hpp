// The web port's requests (actors/web_port.hpp) made from a plain thread, for a command-line client
// such as `troupe run`: each call drives its own connection on the calling thread until it ends.
// HTTP/1.1 and HTTPS (the system's CA certificates, host names checked), through io/http_client.
#pragma once

#include "actors/web_port.hpp"

#include <functional>
#include <string>
#include <string_view>

namespace troupe::io {

// An answer, or why there is none ("cannot connect: Connection refused", "timed out").
struct web_call_result {
  web_response response;
  std::string error; // "" on an answer
};

// One request, its whole answer (up to 32 MiB), within `req.timeout_seconds`.
web_call_result web_call(const web_request& req);

// One request whose answer is a stream: `on_bytes` gets the status and each chunk of the body as it
// arrives, and returns false to stop reading. The call fails as "timed out" when no byte arrives for
// `req.timeout_seconds` (the time `on_bytes` itself takes is not counted). An answer that is not 2xx
// is read whole (bounded) into the result's body instead.
web_call_result web_stream(const web_request& req, const std::function<bool(std::string_view bytes)>& on_bytes);

} // namespace troupe::io
