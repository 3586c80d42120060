// The agent service's run events (AS-12, AS-13) as typed values: a run says what happened, and
// render_event turns it into its fastreact.agent_event.v1 event, metadata included, so that no
// event is written by hand anywhere else. Text is masked (AS-85) by whoever fills the values.
#pragma once

#include "protocol/agent_event.hpp"
#include "protocol/approvals.hpp"
#include "protocol/chat_types.hpp"
#include "protocol/json.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace troupe::protocol {

// `key`: {prompt_tokens, completion_tokens, total_tokens}, as events and traces write token usage.
void write_usage(json::writer& w, const char* key, const token_usage& u);

namespace run_events {

struct session_start {
  std::string query;
  std::string tool_policy = "null"; // the normalized policy, JSON text
  std::vector<std::string> visible_tools;
  int attempt = 1;
  std::string model;
  double time_to_first_event_ms = 0;
  std::vector<std::string> skills = {};         // the skills whose bodies joined the system message (AS-25)
  std::vector<std::string> missing_skills = {}; // names asked for that no skill has
};

// The call a budget notice stands for (AS-70): it has no tool_call of its own, so metadata names it.
struct budget_denial {
  std::string tool_name;
  std::string call_id;
};

// What a round left out of the context (AS-24).
struct compression {
  std::size_t original_message_count = 0;
  std::size_t kept_message_count = 0;
  int64_t estimated_tokens_before = 0;
  int64_t estimated_tokens_after = 0;
  int64_t budget_tokens = 0;
};

struct think {
  std::string content;
  std::optional<budget_denial> budget_denied = std::nullopt; // set on a [TOOL_BUDGET_DENIED] notice
  std::optional<compression> compressed = std::nullopt;      // set on a [CONTEXT_COMPRESSION] notice
};

// AS-24's notice of a round sent with less than the whole conversation.
think compression_notice(const compression& c);

struct tool_call {
  std::string name;
  std::string arguments = "{}"; // JSON object text
  std::string call_id;
  std::optional<std::string> denial; // the tool policy refused it (AS-32)
  bool scoped = false;               // the tool policy's scope was applied (AS-33)
  std::string tool_policy = "null";  // named when the policy refused or scoped the call
};

struct step_end {
  std::string content;
  int step = 0;
  bool has_tool_calls = false;
  token_usage usage;
  std::string model;
};

// A `danger` call waits for this approval (AS-46); its tool_args as the event shows them.
struct ask_user {
  approval_record approval;
};

struct tool_result {
  std::string output;
  std::string name;
  std::string arguments = "{}";
  std::string call_id;
  double duration_ms = 0;
  std::vector<std::string> cited_source_ids;
  std::string decision_level;
  std::optional<bool> approved;
  std::string request_id; // "" = null
  std::optional<std::string> denial; // the tool policy refused the call
  bool digest_validation_error = false; // AS-71: a digest write that was refused, not run
};

struct session_end {
  std::string answer;
  std::vector<std::string> cited_source_ids;
  std::string stop_reason;
  double time_to_final_ms = 0;
  token_usage usage_total;
};

// Ends an attempt (AS-14, AS-90): `error_type` says what ended it.
struct error {
  std::string message;
  std::string error_type;
  std::optional<double> duration_ms;
};

} // namespace run_events

using run_event = std::variant<run_events::session_start, run_events::think, run_events::tool_call,
                               run_events::step_end, run_events::ask_user, run_events::tool_result,
                               run_events::session_end, run_events::error>;

// `e` as event `sequence` of the run, stamped now.
agent_event render_event(std::string run_id, std::string session_id, int64_t sequence, const run_event& e);

} // namespace troupe::protocol
