// GET /v1/metrics (AS-59): what the store counts, and the `fastreact.metrics.v1` document.
#pragma once

#include "protocol/approvals.hpp"
#include "protocol/chat_types.hpp"
#include "protocol/digest_guard.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace troupe::protocol {

// One of the store's record streams (AS-56).
struct stream_stats {
  std::string name;
  int64_t records = 0;
  int64_t bytes = 0;
  std::string last_created_at; // "" = null
};

// A digest run that went over its tool budget, as its trace tells (AS-59's recent_budget_exceeded).
struct budget_exceeded_run {
  std::string run_id;
  std::string session_id;
  std::string completed_at;
  digest_budget_report budget;
};

// What the traces of the PSKA digest runs add up to (AS-59's integrations.pska_digest, AS-70): the
// runs whose trace carries a pska_digest_tool_budget, the calls their budgets let run, how many
// were denied one, and the latest of those, newest first, at most 5.
struct pska_digest_stats {
  int64_t run_count = 0;
  int64_t write_call_count = 0;
  int64_t job_context_call_count = 0;
  int64_t tool_budget_exceeded_count = 0;
  std::vector<budget_exceeded_run> recent_budget_exceeded;
};

// The durable counts, read from the store in one pass.
// What PostgreSQL says of the database's health (CJ-11).
struct postgres_stats {
  int64_t dead_tuples = 0;             // across troupe's tables, waiting for vacuum
  double oldest_xact_age_seconds = 0;  // the oldest open transaction on the database, any client's
};

struct store_stats {
  std::map<std::string, int64_t> run_status_counts;
  int64_t run_count = 0;
  int64_t ready_queued_count = 0;
  int64_t delayed_queued_count = 0;
  int64_t stale_lease_count = 0;
  int64_t trace_count = 0;
  std::map<std::string, int64_t> trace_status_counts;
  std::optional<double> avg_duration_ms;
  int64_t event_count = 0;
  int64_t error_event_count = 0;
  std::optional<double> avg_tool_duration_ms;
  token_usage usage_total;
  std::vector<std::string> recent_errors; // the latest error events, newest first, at most 5
  pska_digest_stats pska_digest;
  int64_t audit_count = 0;
  approval_summary approvals;
  std::vector<stream_stats> streams;
  std::string root; // where the store lives
  std::optional<postgres_stats> postgres; // on PostgreSQL only
};

// What /ready says of the store: its engine ("sqlite" | "postgres") and the schema version it is at.
struct store_health {
  std::string kind;
  int64_t schema_version = 0;
};

// The whole document; `with_paths` false leaves out the store section (AS-59, AS-84).
std::string metrics_json(const store_stats& s, uint64_t live_count, bool with_paths);

} // namespace troupe::protocol
