// POST /v1/chat/completions (and /v1/runs): the request body, validated (AS-2, AS-9, AS-10).
#pragma once

#include "protocol/chat_types.hpp"
#include "protocol/errors.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::protocol {

namespace json {
struct parse_failure;
}

struct chat_request {
  std::vector<chat_message> history; // the messages before the query
  std::string query;                 // the last user message with non-empty content
  bool stream = true;
  std::string session_id;            // the caller's, byte for byte; a fresh UUIDv4 when absent
  std::string user_key;              // empty when the body has none
  std::optional<std::string> on_disconnect; // "cancel" | "continue"
  std::optional<std::string> model;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> max_tokens;
  // AS-25: the skills asked for by name; nullopt (absent or null) auto-selects, [] means none.
  std::optional<std::vector<std::string>> skills;
  std::optional<int64_t> max_context_tokens; // metadata.max_context_tokens (AS-23)
  std::string run_id;                // metadata.run_id, else empty
  std::string tenant_key;            // metadata.tenant_key, else empty
  std::string tool_policy = "null";  // JSON text: top level, else metadata.tool_policy
  std::string metadata = "{}";       // JSON object text, verbatim
  int priority = 0;                  // a background run's metadata.priority (CJ-18), else 0
};

// What a body asks for: a chat completion, or a background run (POST /v1/runs), whose
// metadata.priority orders the claims of its tenant's runs (CJ-18).
enum class request_kind { chat, background_run };

// The priorities a background run may have: the highest is claimed first.
constexpr int min_run_priority = -100;
constexpr int max_run_priority = 100;

// A rejected request: the problem the edge renders (in the agent dialect).
struct request_error {
  request_error(problem p = problem(errc::bad_request)) : what(std::move(p)) {}
  problem what;
  // The caller the body names, known for a 400: AS-8's 403 and 429 come before it and need them.
  std::string user_key;
  std::string tenant_key;
};

// The most messages one request may carry (a 422 beyond): what a client sends is copied into every
// round's upstream request, so the count bounds a run's memory.
constexpr std::size_t max_messages = 4096;
// The most skill names one request may ask for, and the longest name (a 422 beyond).
constexpr std::size_t max_requested_skills = 64;
constexpr std::size_t max_skill_name_bytes = 128;

// A body that is not JSON the agent service reads (AS-2): malformed → 422 `json_invalid`, a repeated
// member name → 422 naming it, too deep or not UTF-8 → 400 naming the limit.
request_error body_refusal(const json::parse_failure& failure);

std::variant<chat_request, request_error> parse_chat_request(std::string_view body,
                                                             request_kind kind = request_kind::chat);

// A query parameter that must be an integer: its value, or AS-2's 422 naming it.
std::variant<int64_t, request_error> parse_query_integer(const char* key, const std::string& text);

// A 400 with `detail`, in the agent service's dialect.
request_error bad_request(std::string_view detail);

} // namespace troupe::protocol
