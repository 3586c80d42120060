// troupe's error codes and the one table that maps each to an HTTP status and a body per dialect.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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
  upgrade_required,
};

const char* to_string(errc code);
// The code `to_string` names, as a store keeps it; nullopt for a name no code has.
std::optional<errc> errc_named(std::string_view name);

// One entry of a validation failure: where, what, and a machine-readable kind (AS-2's 422 `detail`
// list, WS-37's pydantic-style list).
struct validation_issue {
  std::vector<std::string> loc; // e.g. {"body", "messages", "0", "content"}; digits become numbers
  std::string msg;
  std::string type;
};

// What went wrong, as protocol/, actors/ and the stores report it: a code from the one table, a
// sentence for the caller, the request field it concerns, a machine word the caller can branch on
// (OpenAI's `code`, e.g. "previous_response_not_found"; a reflexr rejection's `type`), and for a
// validation failure its issues. Only the edge turns it into a status and a body
// (protocol::render_error), per the dialect of the mount.
struct problem {
  problem(errc code = errc::internal, std::string message = {}, std::string param = {}, std::string kind = {},
          std::vector<validation_issue> issues = {})
    : code(code), message(std::move(message)), param(std::move(param)), kind(std::move(kind)),
      issues(std::move(issues)) {}

  errc code;
  std::string message;
  std::string param; // "" = none
  std::string kind;  // "" = none
  std::vector<validation_issue> issues;
  // When the caller may try again, in seconds (the edge's Retry-After); -1 = not said.
  int64_t retry_after_seconds = -1;
};

namespace protocol {

// Which surface's error shape a response takes.
enum class dialect { agent, openai, reflexr };

using troupe::validation_issue;

int http_status(errc code);
// OpenAI's error `type` for `code` (RS-1).
const char* openai_error_type(errc code);

// An error as the edge answers it.
struct rendered_error {
  int status = 500;
  std::string body;
};

// `p` in dialect `d`. The agent service: {"detail":"..."}, or with issues AS-2's 422 list
// {"detail":[{"loc","msg","type"}...]}. The Responses gateway: OpenAI's error object (RS-1), `type`
// from the code (4xx invalid_request_error, 429 rate_limit_error, 5xx server_error), `param` and
// `code` from the problem's param and kind (null when empty). Workspaces: {"detail": <rejection>}
// (WS-61) when the kind names one, {"detail":"..."} when none does, and without a message WS-37's
// list {"detail":[{"type","loc","msg"}...]}.
rendered_error render_error(dialect d, const problem& p);

// reflexr's rejection object (WS-26) of `p`: its kind as `type`, its message, and for
// validation_failed its issues as `errors`.
std::string rejection_object(const problem& p);

// The error body of `code` in `d`, its machine word the code's name.
std::string error_body(dialect d, errc code, std::string_view message);

// The agent service's 422: its issues, rendered as {"detail":[{"loc","msg","type"}...]}.
problem invalid(std::vector<validation_issue> issues);

// Which dialect a request path speaks.
dialect dialect_for_path(std::string_view path);

} // namespace protocol
} // namespace troupe
