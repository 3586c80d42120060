// troupe's error codes and the one table that maps each to an HTTP status and a body per dialect.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

enum class errc : uint8_t {
  none = 0,
  bad_request,
  unauthorized,
  forbidden,
  not_found,
  method_not_allowed,
  conflict,
  payload_too_large,
  validation_failed,
  rate_limited,
  unavailable,
  internal,
  upstream_failed,
  cancelled,
  unsupported_media_type,
  misdirected,
};

const char* to_string(errc code);

namespace protocol {

// Which surface's error shape a response takes.
enum class dialect { agent, openai };

// One entry of a 422 `detail` list (AS-2): where, what, and a machine-readable kind.
struct validation_issue {
  std::vector<std::string> loc; // e.g. {"body", "messages", "0", "content"}; digits become numbers
  std::string msg;
  std::string type;
};

int http_status(errc code);

// The error body of `code` in `d`: {"detail":"..."} for the agent service, OpenAI's error object for
// the Responses gateway.
std::string error_body(dialect d, errc code, std::string_view message);

// The agent service's 422 body: {"detail":[{"loc","msg","type"}...]}.
std::string validation_body(const std::vector<validation_issue>& issues);

// Which dialect a request path speaks.
dialect dialect_for_path(std::string_view path);

} // namespace protocol
} // namespace troupe
