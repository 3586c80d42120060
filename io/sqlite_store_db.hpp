// The SQLite run store's connection and what it does with it, one method an operation of the store
// port (actors/store.hpp). Each method runs on the store actor's thread; the write operations run
// inside the group commit's transaction, each in its own savepoint. The SQL is in
// io/sqlite_store_statements.hpp. Included by io/sqlite_store*.cpp only.
#pragma once

#include "actors/store.hpp"
#include "io/sqlite_support.hpp"

#include <caf/error.hpp>

#include <optional>
#include <string>
#include <variant>

namespace troupe::io::run_store {

template <class T>
using outcome = std::variant<T, caf::error>;

class store_db : public sqlite::connection {
public:
  using connection::connection;

  // ---- Runs and their attempts (io/sqlite_store_runs.cpp) ----

  std::optional<run_record> get_run(const std::string& run_id);
  outcome<run_record> create(run_record r);
  outcome<run_record> begin_chat(run_record r, const std::string& worker_id, double lease_seconds);
  outcome<run_claim> claim(const std::string& worker_id, double lease_seconds, uint32_t n);
  outcome<bool> append(const std::string& run_id, int64_t lease_epoch, const stored_event& e);
  outcome<run_record> transition(const run_transition& t);
  outcome<bool> renew(const std::string& run_id, int64_t lease_epoch, double lease_seconds);
  outcome<recovery_report> recover(bool all_running, const protocol::lapse_ends& ends);
  outcome<run_record> cancel(const std::string& run_id, const protocol::attempt_end& end);
  run_list list_runs(const std::string& status, int64_t limit);
  outcome<run_events_page> events(const std::string& run_id, int64_t after, int64_t limit);

  // ---- Sessions, traces, approvals, rate limits, audit (io/sqlite_store_records.cpp) ----

  void save_session(const session_record& r);
  std::optional<session_record> get_session(const std::string& tenant, const std::string& user,
                                            const std::string& session);
  trace_list list_traces(const std::string& session_id, int64_t limit);
  std::optional<std::string> get_trace(const std::string& run_id);
  void save_approval(const protocol::approval_record& r);
  std::optional<protocol::approval_record> get_approval(const std::string& request_id);
  approval_list list_approvals(const protocol::approval_query& filter);
  protocol::rate_limit_decision count_request(const std::string& user_key, int64_t limit, int64_t now);
  void insert_audit(const protocol::audit_record& r, const std::string& line);

  // ---- Counts (io/sqlite_store_stats.cpp) ----

  // The durable counts; `detailed` adds what reads every event, trace and page (averages, token
  // totals, recent errors, bytes per stream), which only GET /v1/metrics shows.
  protocol::store_stats stats(bool detailed);

private:
  void start_attempt(const std::string& run_id, const std::string& worker_id, double lease_seconds);
  std::optional<run_record> held(const std::string& run_id, int64_t lease_epoch);
  bool insert_event(const std::string& run_id, const stored_event& e);
  void append_closing(run_record& r, const protocol::attempt_end& end);
  run_record finish(run_record r, const std::string& status, const std::string& error,
                    const protocol::trace_facts& facts);
  void requeue(const std::string& run_id, int64_t lease_epoch, const std::string& last_error, double retry_seconds);
  void add_details(protocol::store_stats& s);
};

caf::error run_not_found();

} // namespace troupe::io::run_store
