// How `troupe run` shows a run's events on a terminal, and what it decides from them: the event as
// readable lines, text from the model made safe to print, the exit code a run's status gives, and
// how long to wait before reconnecting a dropped stream.
#pragma once

#include "protocol/json.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::protocol::run_view {

// Exit codes of `troupe run` (README "troupe run").
enum exit_code : int {
  exit_completed = 0, // the run completed (or --background started it)
  exit_failed = 1,    // the run failed
  exit_usage = 2,     // bad arguments or configuration
  exit_cancelled = 3, // the run was cancelled
  exit_unreachable = 4, // the server could not be reached, refused the request, or the run was lost
};

// A terminal run status → its exit code; nullopt while the run is not over (queued, running, unknown).
std::optional<int> exit_code_of(std::string_view status);

// How much of an event a line may show.
struct view_limits {
  std::size_t width = 200;       // bytes per printed line, prefix included
  std::size_t result_lines = 8;  // lines of a tool result
  std::size_t think_lines = 20;  // lines of a step's text
};

// `text` made safe for a terminal: malformed UTF-8 repaired, every control character but \n and \t
// (ESC sequences, CR, backspace, DEL, the C1 range) shown as a visible escape such as `\x1b`, and
// a tab as one space. Newlines are kept: callers split on them.
std::string terminal_safe(std::string_view text);

// Compact JSON text (one line, as json::serialize writes it) with what terminal_safe would escape
// and JSON leaves raw (DEL, the C1 range, bidirectional overrides) written as \u escapes instead:
// the same JSON value, inert on a terminal. --json prints each event this way.
std::string terminal_safe_json(std::string_view json_text);

// One line of at most `width` bytes (never splitting a UTF-8 sequence), ending in "…" when cut.
std::string bounded_line(std::string_view line, std::size_t width);

// An agent event (AS-12, AS-13) as the lines `troupe run` prints: session start, thinking, steps,
// tool calls with their arguments, results (bounded), approvals, the final answer and errors, each
// with a bracketed label. Every line is terminal_safe and at most `limits.width` bytes (the final
// answer is folded, never cut). Unknown types print their type and content (AS-16).
std::vector<std::string> event_lines(const json::value& event, const view_limits& limits = {});

// An `ask_user` event's approval: its id, and what it would let run.
struct approval_request {
  std::string id;
  std::string tool_name;
};
std::optional<approval_request> approval_of(const json::value& event);

// A run snapshot (AS-50) as one progress line: status, attempts, events, steps seen so far.
std::string progress_line(const json::value& run, int64_t steps_seen);

// Milliseconds to wait before reconnect attempt `attempt` (1-based) of a dropped stream: doubling
// from 250 ms, at most 4 s.
int64_t reconnect_delay_ms(int attempt);

// Whether an answer with this status may succeed when asked again (408, 429, 5xx); any other
// refusal (401, 404...) ends `troupe run` with exit_unreachable and the server's detail.
bool retryable_status(int status);

// Reconnect attempts in a row without an event before `troupe run` pages GET /v1/runs/{id}/events
// instead of the stream.
constexpr int max_reconnects = 5;

} // namespace troupe::protocol::run_view
