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

// The WITH clause that puts one tenant's rows under the names the counts read (AS-84): the runs,
// traces, approvals and audit records carrying its tenant_key, and the events of its runs. Each
// statement is then written once for every tenant and for one. SQLite reaches the tables under their
// schema's name, and keeps rowid, which some counts order by; PostgreSQL reads a table under a WITH
// name inside that name's own definition, and orders by row_order, which `*` carries.
std::string tenant_tables(bool on_server, const std::string& tenant_parameter) {
  auto t = on_server ? std::string() : std::string("main.");
  auto keep_rowid = on_server ? std::string() : std::string("rowid AS rowid, ");
  auto own = [&](const char* table, bool with_rowid) {
    return std::string(table) + " AS (SELECT " + (with_rowid ? keep_rowid : "") + "* FROM " + t + table
           + " WHERE tenant_key = " + tenant_parameter + ")";
  };
  return "WITH " + own("runs", true) + ", " + own("traces", true) + ", " + own("approvals", false) + ", "
         + own("audit", true) + ", run_events AS (SELECT e.* FROM " + t
         + "run_events e JOIN runs ON runs.run_id = e.run_id) ";
}

// `text`, or for a tenant its text over that tenant's rows, the tenant bound at `tenant_parameter`
// (the statement's own parameters come first). A tenant's statements are prepared per call: only
// GET /v1/metrics of a caller confined to its tenant reads them.
template <class Conn>
auto store_db<Conn>::tenant_sql(const char* text, const std::optional<std::string>& tenant, int tenant_parameter) {
  if (!tenant)
    return sql(text);
  const char* spelled = text;
  if constexpr (on_server)
    for (auto s = store_sql::postgres_spelling; s->statement; ++s)
      if (s->statement == text)
        spelled = s->postgres;
  auto q = statement(tenant_tables(on_server, "?" + std::to_string(tenant_parameter)) + spelled);
  q.bind(tenant_parameter, *tenant);
  return q;
}

// The parts of the counts that read whole tables.
template <class Conn>
void store_db<Conn>::add_details(protocol::store_stats& s, const std::optional<std::string>& tenant) {
  if (auto q = tenant_sql(store_sql::avg_run_duration, tenant, 1); q.row())
    s.avg_duration_ms = q.real(0);
  if (auto q = tenant_sql(store_sql::event_counts, tenant, 1); q.row()) {
    s.event_count = q.integer(0);
    s.error_event_count = q.integer(1);
  }
  if (auto q = tenant_sql(store_sql::avg_tool_duration, tenant, 1); q.row())
    s.avg_tool_duration_ms = q.real(0);
  if (auto q = tenant_sql(store_sql::usage_totals, tenant, 1); q.row())
    s.usage_total = {q.integer(0), q.integer(1), q.integer(2)};
  auto q = tenant_sql(store_sql::recent_errors, tenant, 1);
  while (q.row())
    s.recent_errors.push_back(q.text(0));
  add_pska_digest(s.pska_digest, tenant);
}

// What the digest runs' traces add up to (AS-59, AS-70).
template <class Conn>
void store_db<Conn>::add_pska_digest(protocol::pska_digest_stats& d, const std::optional<std::string>& tenant) {
  if (auto q = tenant_sql(store_sql::pska_digest_totals, tenant, 1); q.row()) {
    d.run_count = q.integer(0);
    d.write_call_count = q.integer(1);
    d.job_context_call_count = q.integer(2);
    d.tool_budget_exceeded_count = q.integer(3);
  }
  auto q = tenant_sql(store_sql::recent_budget_exceeded, tenant, 1);
  while (q.row())
    if (auto budget = protocol::digest_budget_report_of(q.text(3)))
      d.recent_budget_exceeded.push_back({q.text(0), q.text(1), q.text(2), std::move(*budget)});
}

// AS-56's streams with their records, bytes and the time each last grew (AS-59).
template <class Conn>
void store_db<Conn>::add_streams(protocol::store_stats& s, std::map<std::string, int64_t>& table_bytes) {
  std::map<std::string, int64_t> table_records; // a table two streams share splits its bytes by records
  for (auto& stream : store_sql::streams) {
    protocol::stream_stats st{stream.name, 0, 0, {}};
    if (stream.count)
      if (auto q = sql(stream.count); q.row())
        st.records = q.integer(0);
    if (stream.last)
      if (auto q = sql(stream.last); q.row()) {
        st.last_created_at = q.text(0); // "" when the stream is empty
        if (stream.last_is_epoch && !st.last_created_at.empty())
          st.last_created_at = protocol::iso_timestamp(
            std::chrono::system_clock::time_point(std::chrono::seconds(q.integer(0))));
      }
    if (stream.table)
      table_records[stream.table] += st.records;
    s.streams.push_back(std::move(st));
  }
  for (std::size_t i = 0; i < s.streams.size(); ++i) {
    auto table = store_sql::streams[i].table;
    if (!table || table_records[table] == 0)
      continue;
    auto share = static_cast<double>(s.streams[i].records) / static_cast<double>(table_records[table]);
    s.streams[i].bytes = static_cast<int64_t>(static_cast<double>(table_bytes[table]) * share);
  }
}

template <class Conn>
protocol::store_stats store_db<Conn>::stats(bool detailed, const protocol::tenant_scope& scope) {
  protocol::store_stats s;
  const auto& tenant = scope.tenant;
  auto now = now_text();
  auto scalar = [&](const char* text, const std::string& arg = {}) {
    auto q = tenant_sql(text, tenant, arg.empty() ? 1 : 2);
    if (!arg.empty())
      q.bind(1, arg);
    return q.row() ? q.integer(0) : 0;
  };
  auto grouped = [&](const char* text, std::map<std::string, int64_t>& into) {
    auto q = tenant_sql(text, tenant, 1);
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
  every.tenant_key = tenant;
  s.approvals = list_approvals(every).summary;
  if (detailed)
    add_details(s, tenant);
  if (tenant)
    return s; // the store's own report (streams, bytes, the database's health) is the operator's
  std::map<std::string, int64_t> bytes;
  if (detailed)
    grouped(store_sql::table_bytes, bytes);
  if constexpr (on_server) {
    protocol::postgres_stats pg;
    pg.dead_tuples = scalar(store_sql::dead_tuples);
    if (auto q = sql(store_sql::oldest_transaction); q.row())
      pg.oldest_xact_age_seconds = q.real(0).value_or(0);
    s.postgres = pg;
  }
  add_streams(s, bytes);
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
