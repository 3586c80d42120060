// The PSKA digest worker's contract (agent-service.md §11, AS-66 to AS-72, AS-86, AS-87; CJ-45): which
// PSKA jobs are ready, the headers of both sides, a batch page compacted into a run's body, the run
// ids that keep a batch from being written twice, the judgement of a batch run's events and the
// result PSKA is told. Pure: the worker's actors and its HTTP clients come on top.
#pragma once

#include "protocol/json.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe::protocol::pska {

inline constexpr char digest_job_type[] = "digest_via_fastreact";

// Whom the worker acts for at PSKA (AS-66, CJ-43).
struct tenant {
  std::string tenant_id = "tenant_default";
  std::string represented_user_id = "user_primary";
};

// A PSKA job as GET /jobs lists it; `json` is the job object's compact text.
struct job {
  std::string id;
  int64_t priority = 0;
  std::string run_after;  // "" when absent
  std::string created_at; // "" when absent
  std::string json;
};

// AS-67.1: the jobs of `jobs_body` (`{"jobs":[…]}`) that are digest jobs, queued and due at `now`
// (their run_after, an RFC 3339 text, not after it; unreadable ones are not due), ordered by
// priority descending, then run_after, then created_at. nullopt when the body is no such object.
std::optional<std::vector<job>> ready_jobs(std::string_view jobs_body, double now_epoch_seconds);

// `--job-id`: the digest job of `jobs_body` with this id that is not finished (queued, or leased: a
// restarted holder leases it again), whatever its run_after; nullopt when there is none.
std::optional<job> named_job(std::string_view jobs_body, const std::string& id);

// AS-68: the headers of a request to PSKA, and of one to troupe.
using header_list = std::vector<std::pair<std::string, std::string>>;
header_list pska_headers(const tenant& t, const std::string& pska_service_token);
header_list troupe_headers(const tenant& t, const std::string& troupe_service_token);

// `text` percent-encoded but for RFC 3986's unreserved characters: a PSKA job id or cursor as one
// URL path segment or query value, whatever it holds.
std::string url_component(std::string_view text);

// What an answer of PSKA or troupe means to the worker, by its status.
enum class reply {
  ok,             // 2xx
  failed,         // the step failed (AS-68)
  lease_lost,     // PSKA gave the job to someone else (AS-86)
  renew_by_lease, // PSKA has no heartbeat endpoint: lease again to renew (AS-86)
  retry,          // try again soon: 408, 429, 5xx (CJ-44)
  exists,         // the batch's run id is taken (AS-49's 409, CJ-45)
};
reply heartbeat_reply(int status);
reply settle_reply(int status);    // complete or fail: a 409 means the lease is gone
reply run_start_reply(int status); // POST /v1/runs
bool succeeded(int status);

// AS-68: why a step failed on a non-2xx answer; the body is cut to 2,000 bytes.
std::string step_failure(std::string_view method, std::string_view url, int status, std::string_view body);

// One page of GET /digest/batches/{id} (AS-67.3).
struct batch_page {
  std::string cursor;
  std::optional<std::string> next_cursor;
  bool has_more = false;
  std::size_t source_items = 0;
  std::string json; // the page's compact text: the batch a run digests
};
// nullopt when the body is no page object. Cursors may be numbers or strings; both read as text.
std::optional<batch_page> parse_batch_page(std::string_view body);

// CJ-45: `pskad_` + 24 hex of SHA-256(<tenant>\0<pska_job_id>\0<cursor>\0<n>): the n-th run that
// may digest this batch.
std::string batch_run_id(const std::string& tenant_id, const std::string& job_id, const std::string& cursor, int n);

// What a batch run is started with (AS-69).
struct run_settings {
  tenant who;
  std::string job_id;
  std::string run_id; // batch_run_id's
  std::string cursor;
  int64_t max_context_tokens = 128000;
};

// AS-69: the POST /v1/runs body of one batch: the digest rules as the system message, the job, cursor
// and batch as the user's, the two PSKA tools only, and the metadata that turns the runtime guards on.
std::string batch_run_body(const run_settings& s, const std::string& job_json, const batch_page& page);

// The rules a batch run is told (AS-69): one merged write of pska.candidates.v1 candidates.
extern const char* const digest_rules;

// One batch run as the result reports it (AS-72).
struct run_report {
  std::string run_id;
  std::string batch_cursor;
  std::optional<std::string> next_cursor;
  std::string status;
  std::string content; // the run's final answer
  std::vector<std::string> tool_calls; // the tools it called, in order
  int64_t write_call_count = 0;        // effective writes
  int64_t job_context_call_count = 0;  // effective job context reads
  bool tool_budget_exceeded = false;
};

// AS-72, AS-87: a batch run judged from its events, read page by page (a run's events may be many:
// only counts and the calls in flight are kept). Feed each event object in sequence order, then ask
// for the verdict with the run's final snapshot.
class batch_judge {
public:
  // `metadata`: the run's metadata object (its tool_budget sets the budget, AS-70).
  explicit batch_judge(const json::value& metadata);

  void add_event(const json::value& event);

  // nullopt when the batch passes; else "<Kind>: <message>" naming the rule it broke.
  std::optional<std::string> verdict(const std::string& run_status) const;

  // The run as the result reports it; `content` is the run's final answer.
  run_report report(run_report base) const;

private:
  std::map<std::string, int64_t> budget_;
  std::map<std::string, int64_t> effective_;   // effective calls per tool
  std::map<std::string, std::string> pending_; // call id → tool of a tool_call not yet answered
  std::map<std::string, std::string> pending_args_;
  std::vector<std::string> tool_calls_;
  std::string content_;               // the final answer (session_end's content)
  std::optional<std::string> broken_; // the first rule broken by an event
  bool error_event_ = false;
  bool rejected_unanswered_ = false; // a rejected write not yet followed by an effective one
  bool budget_denied_ = false;
};

// AS-72: `{"result":{"ok":true,"worker_id","leased_job","batch_count","fastreact_runs":[…]}}`, and the
// fail body `{"error":…,"retryable":true}`.
std::string complete_body(const std::string& worker_id, const std::string& leased_job_json,
                          const std::vector<run_report>& runs);
std::string fail_body(const std::string& error, bool retryable = true);

// CJ-43, source "troupe": a `pska.digest` job troupe leased to the worker (CJ-41's payload), and the
// PSKA job and tenant it names (the worker's defaults where the payload names none).
struct troupe_job {
  std::string id;
  std::string lease_token;
  std::string pska_job_id;
  tenant who;
};
// The jobs of a POST /v1/jobs/lease answer; one without a readable payload is left out.
std::vector<troupe_job> troupe_jobs(std::string_view lease_body, const tenant& defaults);
// What settles the troupe job as its PSKA job was settled: the lease body, the complete body (with
// complete_body's result as its result), the fail body.
std::string troupe_lease_body(const std::string& worker_id, int64_t max_jobs, int64_t lease_seconds);
std::string troupe_beat_body(const std::string& lease_token);
std::string troupe_complete_body(const std::string& lease_token, const std::string& pska_complete_body);
std::string troupe_fail_body(const std::string& lease_token, const std::string& error);

// CJ-46: the circuit breaker of one side (PSKA or troupe). It opens after `threshold` consecutive
// failures (transport errors, timeouts, 5xx, 429); while open it lets one probe through after 1 s,
// doubling to 60 s, and closes on a success. A Retry-After pauses admission that long either way.
class breaker {
public:
  explicit breaker(int64_t threshold = 5) : threshold_(threshold) {}

  // A request's end at `now` (seconds): its status (0: no answer) and its Retry-After (0: none).
  void record(double now, int status, double retry_after_seconds);
  // Whether a new job may start at `now`; a probe's admission is taken by asking.
  bool admits(double now);
  bool open() const { return failures_ >= threshold_; }

private:
  int64_t threshold_;
  int64_t failures_ = 0;
  double probe_after_ = 1; // the wait before the next probe while open
  double next_probe_ = 0;
  double paused_until_ = 0;
};

// Whether an answer counts against a breaker: none at all, a 5xx or a 429.
bool breaker_failure(int status);

} // namespace troupe::protocol::pska
