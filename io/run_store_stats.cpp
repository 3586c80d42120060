// The run store's durable counts (GET /v1/metrics, AS-59); bytes are the pages each table and its
// indexes use.
#include "io/pg_connection.hpp"
#include "io/run_store_db.hpp"
#include "io/run_store_statements.hpp"
#include "io/sqlite_support.hpp"
#include "protocol/timestamp.hpp"

#include <map>
#include <string_view>

namespace troupe::io::run_store {

// The parts of the counts that read whole tables.
template <class Conn>
void store_db<Conn>::add_details(protocol::store_stats& s) {
  if (auto q = sql(store_sql::avg_run_duration); q.row())
    s.avg_duration_ms = q.real(0);
  if (auto q = sql(store_sql::event_counts); q.row()) {
    s.event_count = q.integer(0);
    s.error_event_count = q.integer(1);
  }
  if (auto q = sql(store_sql::avg_tool_duration); q.row())
    s.avg_tool_duration_ms = q.real(0);
  if (auto q = sql(store_sql::usage_totals); q.row())
    s.usage_total = {q.integer(0), q.integer(1), q.integer(2)};
  auto q = sql(store_sql::recent_errors);
  while (q.row())
    s.recent_errors.push_back(q.text(0));
  add_pska_digest(s.pska_digest);
}

// What the digest runs' traces add up to (AS-59, AS-70).
template <class Conn>
void store_db<Conn>::add_pska_digest(protocol::pska_digest_stats& d) {
  if (auto q = sql(store_sql::pska_digest_totals); q.row()) {
    d.run_count = q.integer(0);
    d.write_call_count = q.integer(1);
    d.job_context_call_count = q.integer(2);
    d.tool_budget_exceeded_count = q.integer(3);
  }
  auto q = sql(store_sql::recent_budget_exceeded);
  while (q.row())
    if (auto budget = protocol::digest_budget_report_of(q.text(3)))
      d.recent_budget_exceeded.push_back({q.text(0), q.text(1), q.text(2), std::move(*budget)});
}

template <class Conn>
protocol::store_stats store_db<Conn>::stats(bool detailed) {
  protocol::store_stats s;
  auto now = now_text();
  auto scalar = [&](const char* text, const std::string& arg = {}) {
    auto q = sql(text);
    if (!arg.empty())
      q.bind(1, arg);
    return q.row() ? q.integer(0) : 0;
  };
  auto grouped = [&](const char* text, std::map<std::string, int64_t>& into) {
    auto q = sql(text);
    while (q.row())
      into[q.text(0)] = q.integer(1);
  };
  grouped(store_sql::run_status_counts, s.run_status_counts);
  for (auto& [status, n] : s.run_status_counts)
    s.run_count += n;
  s.ready_queued_count = scalar(store_sql::ready_queued_count, now);
  s.delayed_queued_count = scalar(store_sql::delayed_queued_count, now);
  s.stale_lease_count = scalar(store_sql::stale_lease_count, now);
  grouped(store_sql::trace_status_counts, s.trace_status_counts);
  for (auto& [status, n] : s.trace_status_counts)
    s.trace_count += n;
  s.audit_count = scalar(store_sql::audit_count);
  protocol::approval_query every;
  every.limit = 1; // only the summary is wanted
  s.approvals = list_approvals(every).summary;
  std::map<std::string, int64_t> bytes;
  if (detailed) {
    add_details(s);
    grouped(store_sql::table_bytes, bytes);
  }
  if constexpr (on_server) {
    protocol::postgres_stats pg;
    pg.dead_tuples = scalar(store_sql::dead_tuples);
    if (auto q = sql(store_sql::oldest_transaction); q.row())
      pg.oldest_xact_age_seconds = q.real(0).value_or(0);
    s.postgres = pg;
  }
  for (auto& stream : store_sql::streams) {
    protocol::stream_stats st{stream.name, scalar(stream.count), bytes[stream.name], {}};
    if (stream.last)
      if (auto q = sql(stream.last); q.row())
        st.last_created_at = q.text(0);
    s.streams.push_back(std::move(st));
  }
  return s;
}

template <class Conn>
protocol::store_health store_db<Conn>::health() {
  auto q = sql(store_sql::schema_version);
  return {Conn::engine, q.row() ? q.integer(0) : 0};
}

template class store_db<sqlite::connection>;
template class store_db<pg::connection>;

} // namespace troupe::io::run_store
