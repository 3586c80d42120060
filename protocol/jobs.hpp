// The jobs API's requests (cluster-and-jobs.md §5, CJ-30 to CJ-41): every check a body gets before
// any work is done for it, the lease token, the retry backoff and the rendering of a completed job's
// follow-up run. Pure: the stores and the edge come on top.
#pragma once

#include "protocol/chat_request.hpp"
#include "protocol/json.hpp"
#include "protocol/runs.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::protocol::jobs {

inline constexpr std::size_t max_type_length = 100;
inline constexpr std::size_t max_batch = 1000;          // jobs in one enqueue, completions in one call
inline constexpr std::size_t max_progress_bytes = 4096; // a heartbeat's `progress` (CJ-34)
inline constexpr std::size_t max_error_bytes = 4096;    // a failure's `error` as stored
inline constexpr char pska_digest_type[] = "pska.digest";

// CJ-31: `^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`, at most 100 characters.
bool is_job_type(std::string_view type);

struct enqueue_limits {
  int64_t max_payload_bytes = 262144; // jobs.max_payload_bytes: a larger payload is a 413
};

// One job to create, as checked: JSON members are kept as compact JSON text.
struct new_job {
  std::string type;
  std::string payload = "null";
  int64_t priority = 0;           // −100…100
  std::string run_after;          // AS-78 timestamp, "" for now
  std::string idempotency_key;    // "" for none
  int64_t max_attempts = 5;       // 1…100 (pska.digest: 3)
  int64_t timeout_seconds = 300;  // per attempt (pska.digest: 3600)
  std::optional<std::string> tenant_key; // named by the caller (only the service token may name another)
  std::string on_complete;        // `{"start_run":{…}}` as JSON text, "" for none
};

// POST /v1/jobs: one job, or `{"jobs":[…]}` (at most max_batch, created in one transaction).
struct enqueue_request {
  std::vector<new_job> jobs;
  bool batch = false;
};

// The body checked whole: AS-2's refusals for what is not JSON, 413 for a payload past the limit,
// 422 naming each field that breaks CJ-31 (with its index in a batch), and a follow-up run whose
// body, rendered with the job's payload and a null result, would not be a valid POST /v1/runs body
// (CJ-40).
std::variant<enqueue_request, request_error> parse_enqueue(std::string_view body, const enqueue_limits& limits);

// CJ-30: a job as the store keeps it and the API shows it. JSON members are JSON text, returned as
// stored; absent optionals are null.
struct job_record {
  std::string id; // job_ + 32 hex of a UUIDv7
  std::string type;
  std::string tenant_key;
  std::string status = "queued"; // queued | leased | completed | cancelled | dead
  int64_t priority = 0;
  std::string payload = "null";
  std::optional<std::string> result;
  std::optional<std::string> idempotency_key;
  int64_t attempt = 0;
  int64_t max_attempts = 5;
  int64_t timeout_seconds = 300;
  std::string run_after; // AS-78 timestamps from here on
  std::string created_at;
  std::string updated_at;
  std::optional<std::string> started_at;
  std::optional<std::string> completed_at;
  std::optional<std::string> cancelled_at;
  std::optional<std::string> dead_at;
  std::optional<std::string> worker_id;
  int64_t lease_epoch = 0;
  std::optional<std::string> lease_expires_at;
  std::optional<std::string> last_error;
  std::string errors = "[]"; // the last max_errors_kept {attempt, at, error}, oldest first
  std::optional<std::string> progress;
  std::optional<std::string> on_complete;
  std::optional<std::string> on_complete_run_id;
  std::optional<std::string> on_complete_error;
  // Kept by the store, never shown in the job object: the current lease's token (a lease's answer
  // adds it, CJ-32) and the enqueuer, a follow-up run's user (CJ-40).
  std::string lease_token;
  std::string user_key;
};

inline constexpr std::size_t max_errors_kept = 10;

// The `{"object":"job",…}` of CJ-30, members in its order.
std::string job_json(const job_record& job);

// `errors` with {attempt, at, error} appended, keeping the last max_errors_kept; `error` is cut to
// max_error_bytes (at a UTF-8 boundary). A text that is no JSON array starts a new one.
std::string append_error(std::string_view errors, int64_t attempt, const std::string& at, std::string_view error);

// CJ-32: POST /v1/jobs/lease.
struct lease_request {
  std::string worker_id;
  std::vector<std::string> types; // empty: any type
  int64_t max_jobs = 1;           // 1…100
  int64_t lease_seconds = 60;     // 5…3600
  int64_t wait_seconds = 0;       // 0…30
  std::vector<std::string> tenant_keys; // the service token's choice; empty: every tenant
};

std::variant<lease_request, request_error> parse_lease(std::string_view body);

// CJ-32: `lt_<epoch>_<32 lowercase hex>`.
std::string lease_token(int64_t epoch, std::string_view random_hex32);
// The epoch a well-formed token names, or nullopt.
std::optional<int64_t> token_epoch(std::string_view token);

// CJ-36: seconds until a retryable failure's next attempt: min(max, base·2^(attempt−1))·(1+u), with
// u in [0, 0.1] (the caller draws it).
double retry_delay_seconds(int64_t attempt, double base_seconds, double max_seconds, double u);

// What a job's follow-up run is rendered from (CJ-40): JSON texts but for the id and type.
struct job_values {
  std::string id;
  std::string type;
  std::string payload = "null";
  std::string result = "null";
};

// The most bytes placeholders may add to a follow-up run's body: a payload of 256 KiB named in many
// strings would otherwise make one job's run body as large as its author likes.
inline constexpr std::size_t max_rendered_growth = 1 << 20;

// `{{job.id}}`, `{{job.type}}`, `{{job.payload}}` and `{{job.result}}` in the strings of `start_run`
// (a JSON object's text) replaced, in one pass; a string that is exactly the payload or result
// placeholder becomes that JSON value. Answers the rendered body's text, or nullopt when `start_run`
// is no JSON object or the placeholders would add more than max_rendered_growth bytes.
std::optional<std::string> render_start_run(std::string_view start_run, const job_values& job);

// CJ-40: the background run a completed job's `on_complete` starts: its `start_run` rendered with the
// job and checked as a POST /v1/runs body, under the id `job-<job id>`, in the job's tenant, for its
// enqueuer. A body that no longer passes answers why, and the job completes without a run.
std::variant<run_record, std::string> follow_up_run(const job_record& job, int run_max_attempts);

// A lease's job: CJ-30's object with its `lease_token` (CJ-32).
std::string leased_job_json(const job_record& job);

// CJ-34: POST /v1/jobs/{id}/heartbeat.
struct heartbeat_request {
  std::string lease_token;
  int64_t lease_seconds = 0;           // 5…3600; 0 (absent): the lease's own length
  std::optional<std::string> progress; // any JSON of at most max_progress_bytes, as compact text
};
std::variant<heartbeat_request, request_error> parse_heartbeat(std::string_view body);

// CJ-35: a completion; `result` is compact JSON text ("null" when absent), at most the payload limit.
struct completion_request {
  std::string id; // from the path, or the batch item's `id`
  std::string lease_token;
  std::string result = "null";
};
std::variant<completion_request, request_error> parse_completion(std::string_view body, const enqueue_limits& limits);
// POST /v1/jobs/complete: `{"completions":[{"id","lease_token","result"?},…]}`, 1 to max_batch items.
std::variant<std::vector<completion_request>, request_error> parse_completions(std::string_view body,
                                                                                 const enqueue_limits& limits);

// CJ-36: POST /v1/jobs/{id}/fail.
struct failure_request {
  std::string lease_token;
  std::string error;                // required; stored cut to max_error_bytes
  bool retryable = true;
  double retry_after_seconds = -1;  // 0…max_retry_after_seconds; < 0: the backoff's
};
inline constexpr double max_retry_after_seconds = 30 * 86400.0;
std::variant<failure_request, request_error> parse_failure(std::string_view body);

// CJ-39: GET /v1/jobs's query (limit 1…200, 50; order newest|oldest; status one of CJ-30's; after a
// job id).
struct list_request {
  std::string type;
  std::string status;
  std::string worker_id;
  std::string tenant_key;
  int64_t limit = 50;
  std::string after;
  bool ascending = false;
};
std::variant<list_request, request_error> parse_list(const std::map<std::string, std::string>& query);

// CJ-34's answer: {"id","status","lease_epoch","lease_expires_at"}.
std::string heartbeat_json(const job_record& job);
// CJ-39's page: {"object":"list","jobs","count","limit","has_more","next_after"}.
std::string jobs_page_json(const std::vector<job_record>& jobs, int64_t limit, bool has_more);

// One line of CJ-39's stats: how many jobs of `type` are in `status`; for queued ones, how long the
// oldest ready one has waited.
struct status_count {
  std::string type;
  std::string status;
  int64_t count = 0;
  std::optional<double> oldest_ready_age_ms;
};
// {"object":"job_stats","types":{"<type>":{"queued":n,"leased":n,"completed":n,"cancelled":n,"dead":n,
// "oldest_ready_age_ms":x|null}},"total":{…the same, summed}}.
std::string job_stats_json(const std::vector<status_count>& counts);

} // namespace troupe::protocol::jobs
