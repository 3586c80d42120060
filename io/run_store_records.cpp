// The run store's records beside the runs: sessions, traces, approvals, rate-limit windows, audit.
#include "io/pg_connection.hpp"
#include "io/run_store_db.hpp"
#include "io/run_store_statements.hpp"
#include "io/sqlite_support.hpp"
#include "protocol/timestamp.hpp"

#include <spdlog/spdlog.h>

#include <chrono>

namespace troupe::io::run_store {

namespace {

template <class Query>
protocol::approval_record read_approval(const Query& q) {
  protocol::approval_record r;
  int i = 0;
  for (auto field : {&r.request_id, &r.run_id, &r.session_id, &r.tenant_key, &r.user_key, &r.task_id, &r.tool_call_id,
                     &r.tool_name, &r.tool_args, &r.reason, &r.decision_level, &r.pattern_matched, &r.policy_scope,
                     &r.policy_action})
    *field = q.text(i++);
  r.policy_matched = q.integer(i++) != 0;
  r.status = q.text(i++);
  if (auto approved = q.real(i++))
    r.approved = *approved != 0;
  r.timeout_seconds = q.real(i++).value_or(0);
  for (auto field : {&r.created_at, &r.expires_at, &r.resolved_at, &r.resolution_reason})
    *field = q.text(i++);
  return r;
}

} // namespace

template <class Conn>
void store_db<Conn>::save_session(const session_record& r) {
  auto q = sql(store_sql::save_session);
  q.bind(1, r.tenant_key).bind(2, r.user_key).bind(3, r.session_id).bind(4, r.created_at).bind(5, r.updated_at);
  q.bind(6, r.last_run_id).bind(7, r.last_status).bind(8, r.last_query).bind(9, r.last_answer);
  if (!q.done())
    spdlog::error("store: saving session {} failed: {}", r.session_id, error());
}

template <class Conn>
std::optional<session_record> store_db<Conn>::get_session(const std::string& tenant, const std::string& user,
                                                    const std::string& session) {
  auto q = sql(store_sql::get_session);
  q.bind(1, tenant).bind(2, user).bind(3, session);
  if (!q.row())
    return std::nullopt;
  return session_record{tenant, user, session, q.text(0), q.text(1), q.integer(2), q.text(3), q.text(4), q.text(5),
                        q.text(6)};
}

template <class Conn>
trace_list store_db<Conn>::list_traces(const std::string& session_id, int64_t limit,
                                      const protocol::tenant_scope& scope) {
  trace_list out;
  {
    auto q = sql(scope.tenant ? store_sql::tenant_traces : store_sql::list_traces);
    q.bind(1, session_id).bind(2, limit == 0 ? no_limit : limit);
    if (scope.tenant)
      q.bind(3, *scope.tenant);
    while (q.row())
      out.traces.push_back(q.text(0));
  }
  auto q = sql(scope.tenant ? store_sql::count_tenant_traces : store_sql::count_traces);
  q.bind(1, session_id);
  if (scope.tenant)
    q.bind(2, *scope.tenant);
  if (q.row())
    out.total_count = q.integer(0);
  return out;
}

template <class Conn>
std::optional<std::string> store_db<Conn>::get_trace(const std::string& run_id) {
  auto q = sql(store_sql::get_trace);
  q.bind(1, run_id);
  if (!q.row())
    return std::nullopt;
  return q.text(0);
}

template <class Conn>
void store_db<Conn>::save_approval(const protocol::approval_record& r) {
  auto q = sql(store_sql::save_approval);
  int i = 1;
  for (auto field : {&r.request_id, &r.run_id, &r.session_id, &r.tenant_key, &r.user_key, &r.task_id, &r.tool_call_id,
                     &r.tool_name, &r.tool_args, &r.reason, &r.decision_level, &r.pattern_matched, &r.policy_scope,
                     &r.policy_action})
    q.bind(i++, *field);
  q.bind(i++, int64_t{r.policy_matched});
  q.bind(i++, r.status);
  q.bind(i++, r.approved ? std::optional<double>(*r.approved ? 1 : 0) : std::nullopt);
  q.bind(i++, std::optional<double>(r.timeout_seconds));
  for (auto field : {&r.created_at, &r.expires_at, &r.resolved_at, &r.resolution_reason})
    q.bind(i++, *field);
  if (!q.done())
    spdlog::error("store: saving approval {} failed: {}", r.request_id, error());
}

template <class Conn>
std::optional<protocol::approval_record> store_db<Conn>::settle_approval(const protocol::approval_record& r) {
  auto q = sql(store_sql::settle_approval);
  q.bind(1, r.request_id).bind(2, r.status);
  q.bind(3, r.approved ? std::optional<double>(*r.approved ? 1 : 0) : std::nullopt);
  q.bind(4, r.resolved_at).bind(5, r.resolution_reason);
  if (!q.done() || changes() != 1)
    return std::nullopt;
  return get_approval(r.request_id);
}

template <class Conn>
std::optional<protocol::approval_record> store_db<Conn>::get_approval(const std::string& request_id) {
  auto q = sql(store_sql::get_approval);
  q.bind(1, request_id);
  if (!q.row())
    return std::nullopt;
  return read_approval(q);
}

// The approvals matching the query's filters: one page in its order, and the summary of all of them.
template <class Conn>
approval_list store_db<Conn>::list_approvals(const protocol::approval_query& filter) {
  std::string where = " WHERE 1 = 1";
  std::vector<std::string> args;
  for (auto& [key, value] : filter.filters) {
    args.push_back(value);
    where += " AND " + key + " = ?" + std::to_string(args.size()); // keys come from a fixed list
  }
  if (filter.tenant_key) { // AS-84: a caller's own tenant, counts included
    args.push_back(*filter.tenant_key);
    where += " AND tenant_key = ?" + std::to_string(args.size());
  }
  // Filtered queries vary by which filters are set: prepared per call rather than cached.
  auto run = [&](const std::string& text, auto on_row) {
    auto q = statement(text);
    for (std::size_t i = 0; i < args.size(); ++i)
      q.bind(static_cast<int>(i + 1), args[i]);
    while (q.row())
      on_row(q);
  };
  approval_list out;
  auto limit = std::to_string(filter.limit == 0 ? no_limit : filter.limit);
  run(store_sql::approvals_page + where + " ORDER BY created_at " + (filter.ascending ? "ASC" : "DESC")
        + ", request_id LIMIT " + limit + " OFFSET " + std::to_string(filter.offset),
      [&](const auto& q) { out.page.push_back(read_approval(q)); });
  auto& s = out.summary;
  run(store_sql::approvals_by_status + where + store_sql::approvals_by_status_tail, [&](const auto& q) {
    s.status_counts[q.text(0)] = q.integer(1);
    s.count += q.integer(1);
  });
  s.pending_count = s.status_counts.count("pending") ? s.status_counts["pending"] : 0;
  s.expired_count = s.status_counts.count("expired") ? s.status_counts["expired"] : 0;
  run(store_sql::approvals_by_action + where + store_sql::approvals_by_action_tail,
      [&](const auto& q) { s.policy_action_counts[q.text(0)] = q.integer(1); });
  double total_ms = 0;
  int64_t resolved = 0;
  run(store_sql::approval_resolutions + where + store_sql::approval_resolutions_tail, [&](const auto& q) {
    auto from = protocol::parse_iso_timestamp(q.text(0));
    auto to = protocol::parse_iso_timestamp(q.text(1));
    if (!from || !to)
      return;
    total_ms += std::chrono::duration<double, std::milli>(*to - *from).count();
    ++resolved;
  });
  if (resolved > 0)
    s.avg_resolution_ms = total_ms / static_cast<double>(resolved);
  return out;
}

template <class Conn>
protocol::rate_limit_decision store_db<Conn>::count_request(const std::string& user_key, int64_t limit, int64_t now) {
  std::optional<int64_t> start;
  int64_t count = 0;
  {
    auto q = sql(store_sql::get_rate_window);
    q.bind(1, user_key);
    if (q.row()) {
      start = q.integer(0);
      count = q.integer(1);
    }
  }
  auto d = protocol::decide_rate_limit(limit, start, count, now);
  if (d.counted) {
    auto q = sql(store_sql::put_rate_window);
    q.bind(1, user_key).bind(2, d.window_start).bind(3, d.count);
    q.done();
  }
  return d;
}

template <class Conn>
void store_db<Conn>::insert_audit(const protocol::audit_record& r, const std::string& line) {
  auto q = sql(store_sql::insert_audit);
  q.bind(1, r.run_id).bind(2, r.tenant_key).bind(3, r.created_at).bind(4, line);
  q.done();
}

template class store_db<sqlite::connection>;
template class store_db<pg::connection>;

} // namespace troupe::io::run_store
