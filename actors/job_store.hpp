// The jobs' store port (cluster-and-jobs.md §5, CJ-30 to CJ-41): jobs enqueued, leased to workers,
// fenced by lease token, settled, swept. Adapters live in io/ (SQLite, PostgreSQL). The port picks no
// HTTP status: a fenced operation answers what it found (job_fence), and the edge says it.
#pragma once

#include "actors/atoms.hpp"
#include "actors/tenant_scope.hpp"
#include "protocol/jobs.hpp"

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace troupe {

using job_enqueue_atom = caf::atom_constant<caf::atom("j_enqueue")>;
using job_lease_atom = caf::atom_constant<caf::atom("j_lease")>;
using job_beat_atom = caf::atom_constant<caf::atom("j_beat")>;
using job_complete_atom = caf::atom_constant<caf::atom("j_complete")>;
using job_fail_atom = caf::atom_constant<caf::atom("j_fail")>;
using job_cancel_atom = caf::atom_constant<caf::atom("j_cancel")>;
using job_retry_atom = caf::atom_constant<caf::atom("j_retry")>;
using job_get_atom = caf::atom_constant<caf::atom("j_get")>;
using job_list_atom = caf::atom_constant<caf::atom("j_list")>;
using job_stats_atom = caf::atom_constant<caf::atom("j_stats")>;
using job_sweep_atom = caf::atom_constant<caf::atom("j_sweep")>;
using job_release_atom = caf::atom_constant<caf::atom("j_release")>;

using protocol::jobs::job_record;

// Whose jobs an operation may see (AS-84): every tenant's for the service token, else the caller's
// tenant's, and another tenant's job is not found.
using job_scope = protocol::tenant_scope;

// Jobs to create in one transaction (CJ-31), each with its tenant resolved, for the caller named.
struct job_enqueue {
  std::vector<protocol::jobs::new_job> jobs; // tenant_key set on each
  std::string user_key;                      // the enqueuer: a follow-up run's user (CJ-40)
};

// What an enqueue did: every job as stored now, and which of them the call created; the others are
// the jobs their idempotency keys named (CJ-31). A key used by a different job is a conflict.
struct job_enqueued {
  std::vector<job_record> jobs;
  std::vector<bool> created;
};

// A claim (CJ-18, CJ-19, CJ-32): at most `max_jobs` ready jobs of `types` (empty: any) in
// `tenants` (empty: any), leased to `worker_id`, tenants taking turns from the one after
// `after_tenant` unless `fair_share` is off. `caps` bounds a tenant's leased jobs of a type.
struct job_claim_request {
  std::string worker_id;
  std::vector<std::string> types;
  std::vector<std::string> tenants;
  int64_t max_jobs = 1;
  int64_t lease_seconds = 60;
  std::string after_tenant;
  bool fair_share = true;
  std::map<std::string, int64_t> caps;
};

struct job_claim {
  std::vector<job_record> jobs; // each with its lease_token
};

// How a fenced operation found its job (CJ-38): done (changed now), unchanged (the same token did it
// before: a repeated completion), or refused for the reason named.
enum class job_fence { done, unchanged, not_found, stale_lease, cancelled, not_leased, not_retryable };

struct job_answer {
  job_fence fence = job_fence::done;
  job_record job; // as it is now (empty when not found)
};

// CJ-34: a heartbeat extends the lease by `lease_seconds` (0: the lease's own length) and stores
// `progress` when given.
struct job_heartbeat {
  std::string id;
  std::string token;
  int64_t lease_seconds = 0;
  std::optional<std::string> progress;
  job_scope scope;
};

// A follow-up run's settings, which the completion's transaction creates it with (CJ-40).
struct follow_up_settings {
  int64_t run_max_attempts = 3;
};

// CJ-35: completions of leased jobs, each independent; `result` is JSON text ("null" for none).
struct job_completion {
  std::string id;
  std::string token;
  std::string result = "null";
};
struct job_completions {
  std::vector<job_completion> items;
  job_scope scope;
  follow_up_settings follow_up;
};

// CJ-36: a failure; `retry_after_seconds` < 0 lets the backoff choose.
struct job_failure {
  std::string id;
  std::string token;
  std::string error;
  bool retryable = true;
  double retry_after_seconds = -1;
  job_scope scope;
};

// How long a retryable failure waits (jobs.retry_*, CJ-36).
struct job_backoff {
  double base_seconds = 5;
  double max_seconds = 3600;
};

// CJ-39: a listing as asked, within what the caller may see.
struct job_query {
  protocol::jobs::list_request want;
  job_scope scope;
};

struct job_page {
  std::vector<job_record> jobs;
  bool has_more = false;
};

// CJ-39's counts.
using job_counts = std::vector<protocol::jobs::status_count>;

// CJ-33: jobs leased for a client that was gone before it heard of them, each by its token.
struct job_release {
  std::vector<std::pair<std::string, std::string>> leases; // id, token
};

using job_store_actor = caf::typed_actor<
  caf::replies_to<job_enqueue_atom, job_enqueue>::with<job_enqueued>,
  caf::replies_to<job_lease_atom, job_claim_request>::with<job_claim>,
  caf::replies_to<job_beat_atom, job_heartbeat>::with<job_answer>,
  // A completion that takes effect creates its follow-up run in the same transaction (CJ-40).
  caf::replies_to<job_complete_atom, job_completions>::with<std::vector<job_answer>>,
  caf::replies_to<job_fail_atom, job_failure, job_backoff>::with<job_answer>,
  // CJ-39: queued or leased → cancelled (epoch bumped); a finished job answers unchanged.
  caf::replies_to<job_cancel_atom, std::string, job_scope>::with<job_answer>,
  // CJ-39: dead or cancelled → queued with attempt 0; others not_retryable.
  caf::replies_to<job_retry_atom, std::string, job_scope>::with<job_answer>,
  caf::replies_to<job_get_atom, std::string, job_scope>::with<job_answer>,
  caf::replies_to<job_list_atom, job_query>::with<job_page>,
  caf::replies_to<job_stats_atom, job_scope>::with<job_counts>,
  // CJ-37: fails every leased job whose lease expired, as retryable; answers how many.
  caf::replies_to<job_sweep_atom, job_backoff>::with<int64_t>,
  // CJ-33: back to queued, uncharged; answers how many were still so leased.
  caf::replies_to<job_release_atom, job_release>::with<int64_t>>;

} // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::job_enqueue)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::job_enqueued)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::job_claim_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::job_claim)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::job_answer)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<troupe::job_answer>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::job_heartbeat)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::job_completions)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::job_failure)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::job_backoff)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::job_query)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::job_page)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::job_counts)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::job_release)
