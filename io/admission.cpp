#include "io/admission.hpp"

#include "io/agent_http.hpp"
#include "protocol/errors.hpp"
#include "protocol/tenant_scope.hpp"
#include "protocol/workspace_commands.hpp"

#include <chrono>
#include <cstdlib>
#include <string_view>

namespace troupe::io {

namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool is_workspace_path(std::string_view path) {
  return starts_with(path, "/v1/workspaces/") || starts_with(path, "/v1/rules") || starts_with(path, "/v1/schedules");
}

} // namespace

std::function<std::optional<http_response>(const http_request& head)>
head_admission(const protocol::config& config, std::shared_ptr<const workspace_surface> workspaces) {
  return [config, workspaces](const http_request& head) -> std::optional<http_response> {
    if (protocol::dialect_for_path(head.path) == protocol::dialect::openai) {
      auto admitted = admit_responses_caller(config, head);
      if (auto refused = std::get_if<problem>(&admitted))
        return error_response(protocol::dialect::openai, protocol::responses_refusal(std::move(*refused)));
      return std::nullopt;
    }
    if (is_workspace_path(head.path)) {
      if (workspaces && !protocol::reflexr::authenticate(head.header("authorization"), workspaces->config,
                                                         workspaces->service_tokens, workspaces->open))
        return json_response(401, R"({"detail":"unauthorized"})");
      return std::nullopt;
    }
    if (head.method == "POST" && (head.path == "/v1/chat/completions" || head.path == "/v1/runs"))
      return caller_refusal(config, head);
    // The jobs API and the control endpoints admit any identified caller and confine it to its
    // tenant (CJ-30, AS-84).
    if (head.path == "/v1/jobs" || starts_with(head.path, "/v1/jobs/")
        || protocol::is_control_endpoint(head.method, head.path))
      return caller_refusal(config, head);
    if (!operator_allowed(config, head))
      return unauthorized();
    return std::nullopt;
  };
}

} // namespace troupe::io
