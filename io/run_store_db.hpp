// What the run store does with its database, one method an operation of the store port
// (actors/store.hpp), written once for both engines: `Conn` is a SQLite connection
// (io/sqlite_support.hpp) or a PostgreSQL one (io/pg_connection.hpp), each giving the same small
// query interface. Each method runs on its adapter's thread inside a transaction the adapter opened
// (SQLite: the group commit's, in a savepoint; PostgreSQL: one per operation). The SQL is in
// io/run_store_statements.hpp. Included by the run store adapters only.
#pragma once

#include "actors/store.hpp"
#include "protocol/timestamp.hpp"

#include <caf/error.hpp>

#include <chrono>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace troupe::io::run_store {

// A LIMIT both engines read as "every row".
inline constexpr int64_t no_limit = std::numeric_limits<int64_t>::max();

template <class T>
using outcome = std::variant<T, caf::error>;

// Stores a new `queued` run as accepted (AS-49) through any connection of the engine: the run store's
// own, or the job store's inside a completion (CJ-40). Nothing when the id is taken.
template <class Conn>
std::optional<run_record> insert_new_run(Conn& db, run_record r, const std::string& now);

template <class Conn>
class store_db : public Conn {
public:
  using Conn::Conn;

  // A database server (PostgreSQL), where each statement is a round trip: its hot paths take fewer.
  static constexpr bool on_server = std::string_view(Conn::engine) == "postgres";

  // The store's clock, `Conn::now()`: on PostgreSQL the database's, so every node's leases, lapses and
  // times are on one clock however the nodes' clocks drift (CJ-20); on SQLite the process's.
  std::string now_text() { return protocol::iso_timestamp(this->now()); }
  std::string seconds_from_now(double seconds) {
    auto d = std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(seconds));
    return protocol::iso_timestamp(this->now() + d);
  }

  // ---- Runs and their attempts (io/run_store_runs.cpp) ----

  std::optional<run_record> get_run(const std::string& run_id);
  outcome<run_record> create(run_record r);
  outcome<run_record> begin_chat(run_record r, const std::string& worker_id, double lease_seconds);
  outcome<run_claim> claim(const claim_request& want);
  outcome<bool> append(const std::string& run_id, int64_t lease_epoch, const stored_event& e);
  outcome<run_record> transition(const run_transition& t);
  outcome<bool> renew(const std::string& run_id, int64_t lease_epoch, double lease_seconds);
  outcome<recovery_report> recover(bool all_running, const protocol::lapse_ends& ends);
  // Re-queues every run `worker_id` holds as running, its attempt closed by `end`, counting a handoff
  // instead of an attempt (CJ-16); its attempts were stopped first. Answers how many.
  outcome<int64_t> hand_back(const std::string& worker_id, const protocol::attempt_end& end, int64_t max_handoffs);
  // One run, while its attempt at `lease_epoch` holds it (CJ-15); false when it no longer does.
  outcome<bool> hand_back_run(const std::string& run_id, int64_t lease_epoch, const protocol::attempt_end& end,
                              int64_t max_handoffs);
  outcome<run_record> cancel(const std::string& run_id, const protocol::attempt_end& end);
  run_list list_runs(const std::string& status, int64_t limit, const protocol::tenant_scope& scope);
  outcome<run_events_page> events(const std::string& run_id, int64_t after, int64_t limit);

  // ---- Sessions, traces, approvals, rate limits, audit (io/run_store_records.cpp) ----

  void save_session(const session_record& r);
  std::optional<session_record> get_session(const std::string& tenant, const std::string& user,
                                            const std::string& session);
  trace_list list_traces(const std::string& session_id, int64_t limit, const protocol::tenant_scope& scope);
  std::optional<std::string> get_trace(const std::string& run_id);
  void save_approval(const protocol::approval_record& r);
  // Moves a pending approval to r's final state; nullopt when it is not pending (any more).
  std::optional<protocol::approval_record> settle_approval(const protocol::approval_record& r);
  std::optional<protocol::approval_record> get_approval(const std::string& request_id);
  approval_list list_approvals(const protocol::approval_query& filter);
  protocol::rate_limit_decision count_request(const std::string& user_key, int64_t limit, int64_t now);
  void insert_audit(const protocol::audit_record& r, const std::string& line);

  // ---- Counts (io/run_store_stats.cpp) ----

  // The durable counts; `detailed` adds what reads every event, trace and page (averages, token
  // totals, recent errors, bytes per stream), which only GET /v1/metrics shows.
  // For one tenant (AS-84), the counts of its records only, and no streams.
  protocol::store_stats stats(bool detailed, const protocol::tenant_scope& scope);
  protocol::store_health health();

private:
  std::optional<run_record> lock(const std::string& run_id);
  std::optional<run_record> read_one(const char* statement, const std::string& run_id);
  void start_attempt(const std::string& run_id, const std::string& worker_id, double lease_seconds);
  std::vector<std::string> dealt_runs(const claim_request& want, const std::string& now);
  std::optional<run_record> held(const std::string& run_id, int64_t lease_epoch);
  bool insert_event(const std::string& run_id, const stored_event& e);
  bool close_interrupted(run_record& r, const protocol::attempt_end& end, bool run_ends);
  run_record finish(run_record r, const std::string& status, const std::string& error,
                    const protocol::trace_facts& facts);
  void requeue(const std::string& run_id, int64_t lease_epoch, const std::string& last_error, double retry_seconds);
  void hand_back_locked(run_record r, const protocol::attempt_end& end, int64_t max_handoffs);
  void add_details(protocol::store_stats& s, const std::optional<std::string>& tenant);
  void add_pska_digest(protocol::pska_digest_stats& d, const std::optional<std::string>& tenant);
  auto tenant_sql(const char* text, const std::optional<std::string>& tenant, int tenant_parameter);
  void add_streams(protocol::store_stats& s, std::map<std::string, int64_t>& table_bytes);

  using Conn::changes;
  using Conn::error;
  using Conn::ids;
  using Conn::sql;
  using Conn::statement;
};

caf::error run_not_found();

} // namespace troupe::io::run_store
