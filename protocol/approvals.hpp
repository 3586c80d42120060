// Approvals and audit records as the agent service shows and stores them (AS-42..AS-48).
#pragma once

#include "protocol/chat_request.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace troupe::protocol {

// AS-42; "" stands for null in the optional text fields.
struct approval_record {
  std::string request_id; // approval-<10 hex>; also approval_request_id
  std::string run_id;
  std::string session_id;
  std::string tenant_key;
  std::string user_key;
  std::string task_id;
  std::string tool_call_id;
  std::string tool_name;
  std::string tool_args = "{}"; // JSON, as the call runs (after scope injection)
  std::string reason;
  std::string decision_level = "danger";
  std::string pattern_matched;
  std::string policy_scope;
  std::string policy_action;
  bool policy_matched = false;
  std::string status = "pending"; // pending | approved | denied | expired
  std::optional<bool> approved;
  double timeout_seconds = 300;
  std::string created_at;
  std::string expires_at;
  std::string resolved_at;
  std::string resolution_reason;
};

std::string approval_json(const approval_record& r);

// GET /v1/approvals (AS-47).
struct approval_query {
  std::map<std::string, std::string> filters; // status, session_id, tool_name, policy_action, policy_scope, run_id, task_id
  std::optional<std::string> tenant_key;      // set by the edge for a caller confined to its tenant (AS-84)
  int64_t limit = 200; // 0 = all
  int64_t offset = 0;
  bool ascending = false;
};

std::variant<approval_query, request_error> parse_approval_query(const std::map<std::string, std::string>& query);

struct approval_summary {
  int64_t count = 0;
  int64_t pending_count = 0;
  int64_t expired_count = 0;
  std::map<std::string, int64_t> status_counts;
  std::map<std::string, int64_t> policy_action_counts;
  std::optional<double> avg_resolution_ms;
};

std::string approvals_page_json(const std::vector<approval_record>& page, const approval_query& q,
                                const approval_summary& summary);

// AS-48: the answer to approve / deny.
std::string resolution_json(const approval_record& r);

// AS-45: one per approval request and per execution outcome.
struct audit_record {
  std::string kind; // approval_request | execution
  std::string run_id;
  std::string session_id;
  std::string tenant_key;
  std::string user_key;
  std::string request_id;
  std::string tool_call_id;
  std::string tool_name;
  std::string tool_args = "{}";
  std::string decision_level;
  std::string decision_reason;
  std::string pattern_matched;
  std::string policy_scope;
  std::string policy_action;
  bool policy_matched = false;
  std::optional<bool> approved;
  std::optional<double> duration_ms;
  std::string result_summary;
  std::string created_at;
};

// The record with its tool_args and result_summary redacted (AS-85), the summary cut to 500 characters.
std::string audit_json(const audit_record& r);

} // namespace troupe::protocol
