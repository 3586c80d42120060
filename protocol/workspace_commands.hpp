// reflexr.v1 commands (workspace-stream.md §3): parsing frames and bodies, carrying a command out
// against a log, rejections, outcomes and `command_result`; and who may use a workspace (§5.1).
#pragma once

#include "protocol/json.hpp"
#include "protocol/json_schema.hpp"
#include "protocol/workspace_actor.hpp"
#include "protocol/workspace_config.hpp"
#include "protocol/workspace_events.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::protocol::reflexr {

using problems = std::vector<json_schema::problem>;

// WS-26: a refused command. Its problem's kind is the rejection's type (not_found | invalid_state |
// validation_failed | forbidden | depth_exceeded | unsupported_protocol), its code the status
// (WS-27) from the one table, and a validation failure's issues are its `errors`.
struct rejection {
  troupe::problem what;
  std::string entity; // not_found
  std::string id;     // not_found
  int64_t depth = 0;  // depth_exceeded
  int64_t limit = 0;  // depth_exceeded
};

rejection not_found(std::string entity, std::string id); // `<entity> <id> does not exist`
rejection validation_failed(std::string message, problems errors = {});
rejection forbidden(std::string message);

int http_status(const rejection& r); // WS-27
std::string rejection_json(const rejection& r);
// `{"detail": <rejection>}` (WS-61).
std::string rejection_detail(const rejection& r);
// WS-37's 422: `{"detail":[{"type","loc","msg"},…]}` as protocol::render_error writes it for reflexr.
troupe::problem invalid_frame(problems p);
// `<loc joined by '.'>: <msg>` of the first problem, for the WebSocket's error frame (WS-55).
std::string first_problem(const problems& p);

// A command as it reaches the log: one from a command frame, or a REST publish body (WS-63).
struct command_request {
  std::string command_id; // "" for a REST publish body, which is not deduplicated by key
  std::shared_ptr<const json::document> body; // a `Command`, or the publish body
  bool publish_body = false;
};

// WS-23/WS-37: a command frame, or the problems that make it none. Events of declared types are
// checked here (WS-13).
std::variant<command_request, problems> parse_command_frame(std::string_view text, const event_registry& types);

// WS-63: `{"event","id"?}` or `{"events":[…],"correlation_id"?}`, or the problems.
std::variant<command_request, problems> parse_publish_body(std::string_view text, const event_registry& types);

// Where a command runs: who sends it and what the log reads as (the store supplies `log_reader`
// inside the command's transaction).
struct command_context {
  std::string workspace_id;
  workspace_actor actor;
  std::string now; // utc_timestamp
  std::string traceparent;
  int max_depth = 8;
  std::shared_ptr<const event_registry> types;
};

struct chain_link {
  int64_t seq = 0;
  std::string correlation_id;
};

class log_reader {
public:
  virtual ~log_reader() = default;
  virtual int64_t head() = 0;
  virtual std::string last_ts() = 0; // "" before the first append
  virtual std::optional<chain_link> find(const std::string& event_id) = 0;
};

// What a command did: envelopes to append (in seq order) and its answer.
struct effect {
  std::vector<envelope> appended;
  std::vector<std::string> outcomes; // JSON; a publish body has one per event
  std::optional<rejection> rejected;
  int64_t max_seq = 0; // the highest seq it appended or named (WS-132)
};

// Carries out `request` (WS-24, WS-28..WS-33). Pure but for `log`; nothing is appended on a rejection.
effect carry_out(const command_request& request, const command_context& context, log_reader& log);

// The `command_result` frame (WS-26 example; WS-3: both outcome and rejection present, one null).
std::string command_result_json(const std::string& command_id, const effect& e);

// ---- Identity and access (WS-59, WS-60) ----

struct workspace_caller {
  std::string tenant;
  workspace_actor actor;
  bool all_workspaces = true;
  std::vector<std::string> workspaces;
};

// The caller a bearer `authorization` header names, or nullopt (401). When troupe is `open` (no
// credential of any kind configured, protocol::is_open) every caller is tenant `default`, user `local`.
std::optional<workspace_caller> authenticate(std::string_view authorization, const workspaces_config& config,
                                             const std::vector<std::string>& service_tokens, bool open);

// WS-60.
bool may_use(const workspace_caller& caller, std::string_view workspace_id);

// `^[a-z0-9][a-z0-9_-]{0,63}$`
bool is_workspace_id(std::string_view id);

inline constexpr const char* not_yours_message = "this workspace is not yours to use";

} // namespace troupe::protocol::reflexr
