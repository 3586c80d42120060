// Durable runs as the agent service shows them (AS-49..AS-55): the stored record, its snapshot
// JSON, the event and list pages, the trace, and the pure rules for paging and retry.
#pragma once

#include "protocol/chat_request.hpp"
#include "protocol/chat_types.hpp"
#include "protocol/digest_guard.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::protocol {

// The latest state of one run; "" stands for null in the *_at, error and lease fields.
struct run_record {
  std::string run_id;
  std::string run_kind = "background"; // background | chat
  std::string session_id;
  std::string tenant_key;
  std::string user_key;
  std::string status; // queued | running | completed | failed | cancelled
  std::string created_at;
  std::string updated_at;
  std::string started_at;
  std::string completed_at;
  std::string cancelled_at;
  std::optional<double> duration_ms;
  int64_t event_count = 0;
  std::string error;
  std::string metadata = "{}";           // the request's metadata, JSON object text
  std::string generation_options = "{}"; // model, temperature, top_p, max_tokens
  int attempts = 0;
  int max_attempts = 1;
  int handoffs = 0; // attempts a draining node handed back: not counted against max_attempts (CJ-16)
  std::string lease_expires_at;
  std::string retry_after;
  std::string worker_id;
  std::string last_error;
  int64_t lease_epoch = 0;
  std::string request; // the request body, JSON text: a retry re-executes it (AS-53)
  int priority = 0;    // metadata.priority: claim order within the run's tenant (CJ-18)
  std::string policy_snapshot_hash; // the policy in force when the run was accepted (AS-93); "" = none
};

bool is_terminal(std::string_view status);

// AS-50: {"type":"run", ...snapshot}.
std::string run_snapshot_json(const run_record& r);

// One stored event: its sequence, type and AS-12 payload.
struct stored_event {
  int64_t sequence = 0;
  std::string type;
  std::string json;
};

// How an attempt ends when something outside it ends it (a cancel, a lapsed lease): `message` is
// the run's error (its last_error when re-queued) and the content of the `error` event that closes
// the attempt's stream (AS-14, AS-90); `error_type` is that event's metadata.error_type. The store's
// callers choose it; a store adapter only places it, through closing_event.
struct attempt_end {
  std::string message;
  std::string error_type;
};

// AS-52: a run no live attempt holds, cancelled ("Run cancelled", CancelledError).
attempt_end cancelled_end();

// AS-83: a recovery sweep re-queues an attempt whose lease lapsed while attempts remain, else fails it.
struct lapse_ends {
  attempt_end requeued;
  attempt_end failed;
};
lapse_ends lapsed_lease_ends();

// How an attempt a draining node handed back ends (CJ-16).
attempt_end handed_back_end(const std::string& node_id);

// The `error` event `end` closes `run`'s attempt with: at the run's next sequence (its event_count),
// stamped now. What a store knows only inside its transaction goes in here, the event's shape never
// leaves protocol/.
stored_event closing_event(const run_record& run, const attempt_end& end);

// Where the attempt an end from outside interrupts stands in the log (AS-14), from where its events
// began, the run's event count and the type of the log's last event: `open` when it wrote events but
// no end of its own, so the end closes it with `closing_event`; `unwritten` when it wrote nothing
// (not even its session_start), so only an end that ends the run adds its event; `ended` when its own
// `error` is its last event, so nothing is added; `finished` when it wrote its session_end and only
// the run's transition was lost, so the run is complete and never runs again.
enum class attempt_log { unwritten, open, ended, finished };
attempt_log interrupted_attempt(int64_t first_sequence, int64_t event_count, std::string_view last_event_type);

// The query of an events page (AS-51); `limit` 0 means all.
struct page_query {
  int64_t after_sequence = -1;
  int64_t limit = 200;
};

// Reads `limit` and `after_sequence` ("" when absent). A non-integer is 422 (AS-2), a negative limit
// 400 `limit must be >= 0` (AS-51).
std::variant<page_query, request_error> parse_page_query(const std::string& limit, const std::string& after_sequence);

// A list's `limit` (AS-50, AS-55), read as the events page's (AS-51): 200 by default, clamped to
// 1000, 0 = all; errors as parse_page_query's.
std::variant<int64_t, request_error> parse_list_limit(const std::string& limit);

// AS-51 (`with_run` false for the trace variant of AS-55).
std::string events_page_json(const run_record& run, const page_query& q, const std::vector<stored_event>& events,
                             bool with_run);

// A list of snapshots: {runs, count, total_count, limit, has_more}.
std::string runs_list_json(const std::vector<run_record>& runs, int64_t total_count, int64_t limit);

// What a terminal attempt knows for its trace (AS-55).
struct trace_facts {
  std::string trace_type; // background_run | chat
  int64_t tool_call_count = 0;
  std::map<std::string, int64_t> tool_name_counts;
  int64_t compression_count = 0; // the rounds sent with less than the whole conversation (AS-24)
  token_usage llm_usage_total;
  std::string final_content;
  std::vector<std::string> cited_source_ids;
  std::optional<digest_budget_report> pska_digest; // a guarded digest run's (AS-70); null otherwise
};

// What the trace of an attempt that did not end itself (cancelled or recovered by the store) records.
// Its pska_digest_tool_budget is null: what the guard counted died with the attempt.
trace_facts unfinished_trace_facts(const run_record& run);

// The trace of a terminal run (its record carries status, times and counts).
std::string trace_json(const run_record& run, const trace_facts& facts);

// {traces, count, total_count, limit, has_more} around stored trace texts.
std::string traces_list_json(const std::vector<std::string>& traces, int64_t total_count, int64_t limit);

// The request's generation options as a run records them: model, temperature, top_p, max_tokens.
std::string generation_options_json(const chat_request& request);

// AS-53: seconds before retry number `attempts` (the attempts made so far, >= 1).
double retry_delay_seconds(int attempts, double base_seconds, double max_seconds);

} // namespace troupe::protocol
