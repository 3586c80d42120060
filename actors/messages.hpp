// Values that travel between troupe's actors (node-local: allowed as unsafe message types).
#pragma once

#include "actors/tool_port.hpp"
#include "protocol/agent_event.hpp"
#include "protocol/approvals.hpp"
#include "protocol/chat_request.hpp"
#include "protocol/chat_types.hpp"
#include "protocol/responses_stream.hpp"
#include "protocol/runs.hpp"

#include <caf/allowed_unsafe_message_type.hpp>

#include <string>
#include <vector>

namespace troupe {

// Everything a run needs to start, resolved by the edge from the request and the caller, or by the
// registry from a claimed record.
struct run_spec {
  std::string run_id;
  std::string run_kind = "chat"; // chat | background
  std::string tenant_key;
  std::string user_key;
  protocol::chat_request request;
  std::string request_body = "{}"; // the body as received: a retry re-executes it (AS-53)
  int attempt = 1;
  int max_attempts = 1;       // chat runs are never retried (AS-53)
  int handoffs = 0;           // earlier attempts handed back, which count against no limit (CJ-16)
  int64_t first_sequence = 0; // an attempt continues the run's event sequence (AS-51)
  int64_t lease_epoch = 0;    // every write of the attempt is fenced by it (AS-82)
  std::string policy_snapshot_hash; // the service policy's hash when the run was accepted (AS-93)
};

using protocol::run_record;
using protocol::stored_event;

// What a claim asks the store for (CJ-18, CJ-19): up to `n` ready runs, started for `worker_id` under
// a lease of `lease_seconds`, tenants taking turns from the one after `after_tenant`.
struct claim_request {
  std::string worker_id;
  double lease_seconds = 300;
  uint32_t n = 1;
  std::string after_tenant{};     // the tenant the node's previous claim served last ("": none yet)
  int64_t tenant_max_running = 0; // a tenant's running background runs, cluster-wide; 0: no cap
};

// Runs a claim started: the claimed records, and when the next delayed run becomes ready.
struct run_claim {
  std::vector<run_record> runs;
  double next_ready_seconds = -1; // -1: no delayed run, or a full claim (the next one tells)
};

// The end of an attempt, written by its holder at its lease epoch (AS-82): terminal, or `queued`
// again for a retry after `retry_seconds`.
struct run_transition {
  std::string run_id;
  int64_t lease_epoch = 0;
  std::string status;
  std::string error;      // terminal: the run's error
  std::string last_error; // queued: why the attempt failed
  double retry_seconds = 0;
  protocol::trace_facts trace; // terminal: what the trace records (AS-55)
};

// One page of a run's events with the run's record (AS-51).
struct run_events_page {
  run_record run;
  std::vector<stored_event> events;
};

struct run_list {
  std::vector<run_record> runs;
  int64_t total_count = 0;
};

struct trace_list {
  std::vector<std::string> traces; // JSON texts
  int64_t total_count = 0;
};

// A page of approvals and the summary of every approval the query matches (AS-47).
struct approval_list {
  std::vector<protocol::approval_record> page;
  protocol::approval_summary summary;
};

// What a recovery sweep did (AS-83).
struct recovery_report {
  int64_t requeued = 0;
  int64_t failed = 0;
  int64_t completed = 0; // their attempt had stored its session_end; only the transition was lost
  std::vector<std::string> ended_run_ids; // failed or completed: their pending approvals are denied (AS-81)
};

// How a run ended; sent to its subscriber after the terminal event.
struct run_result {
  std::string run_id;
  std::string session_id;
  std::string status; // completed | failed | cancelled
  std::string content; // the final answer, or ""
  std::string error;   // the error event's content, when there was one
  double duration_ms = 0;
  int64_t event_count = 0;
  std::vector<std::string> cited_source_ids;
};

// A session's latest state, kept per (tenant_key, user_key, session_id).
struct session_record {
  std::string tenant_key;
  std::string user_key;
  std::string session_id;
  std::string created_at;
  std::string updated_at;
  int64_t run_count = 0;
  std::string last_run_id;
  std::string last_status;
  std::string last_query;
  std::string last_answer;
};

} // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::run_spec)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::run_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::session_record)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::run_record)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::claim_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::run_claim)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::run_transition)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::run_events_page)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::run_list)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::trace_list)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::recovery_report)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::approval_list)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::protocol::approval_record)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::protocol::approval_query)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::protocol::audit_record)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::stored_event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::tool_outcome)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::protocol::agent_event)
// A model round's events, for the agent loop and the Responses executor alike.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::protocol::responses::upstream_event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<troupe::protocol::responses::upstream_event>)
