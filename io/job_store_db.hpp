// What the job store does with its database, one method an operation of the job store port
// (actors/job_store.hpp), written once for both engines: `Conn` is a SQLite connection
// (io/sqlite_support.hpp) or a PostgreSQL one (io/pg_connection.hpp). Each method runs on its
// adapter's thread inside the transaction the adapter opened. The SQL is in
// io/job_store_statements.hpp. Included by the job store adapters only.
#pragma once

#include "actors/job_store.hpp"

#include <caf/error.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe::io::job_store {

template <class T>
using outcome = std::variant<T, caf::error>;

template <class Conn>
class job_db : public Conn {
public:
  using Conn::Conn;

  static constexpr bool on_server = std::string_view(Conn::engine) == "postgres";

  outcome<job_enqueued> enqueue(const job_enqueue& e);
  outcome<job_claim> claim(const job_claim_request& want);
  outcome<job_answer> heartbeat(const job_heartbeat& h);
  outcome<std::vector<job_answer>> complete(const job_completions& c);
  outcome<job_answer> fail(const job_failure& f, const job_backoff& backoff);
  outcome<job_answer> cancel(const std::string& id, const job_scope& scope);
  outcome<job_answer> retry(const std::string& id, const job_scope& scope);
  job_answer get(const std::string& id, const job_scope& scope);
  job_page list(const job_query& q);
  job_counts counts(const job_scope& scope);
  outcome<int64_t> sweep(const job_backoff& backoff);
  outcome<int64_t> release(const job_release& r);

private:
  double now_seconds() const;
  std::optional<job_record> read(const char* statement, const std::string& id);
  // The job a fenced operation may change, locked; why not when it may not (CJ-38).
  std::variant<job_record, job_answer> fenced(const std::string& id, const std::string& token,
                                              const job_scope& scope);
  // The jobs one claim statement leases: `types` (empty: any) but `left`, capped at `cap` per tenant
  // when `cap_type` is set.
  std::vector<job_record> claim_group(const job_claim_request& want, int64_t n, const std::vector<std::string>& types,
                                      const std::vector<std::string>& left, const std::string& cap_type, int64_t cap);
  // SQLite's claim in steps: the ids dealt (io/job_store_statements.hpp).
  std::vector<std::string> dealt_jobs(const job_claim_request& want, int64_t n, const std::string& types,
                                      const std::string& left, const std::string& cap_type, int64_t cap);
  // An attempt that ended without a result (CJ-36, CJ-37): queued after `delay` seconds while it is
  // retryable and attempts remain, else dead.
  job_record end_attempt(job_record job, const std::string& error, bool retryable, double delay, bool fence);
  void start_follow_up(job_record& job, const follow_up_settings& settings);
  // CJ-39: a job in one of the statuses `from` changed by `statement` (?1 the id, ?2 now); in any
  // other it answers `otherwise`.
  outcome<job_answer> change_status(const std::string& id, const job_scope& scope, std::vector<std::string> from,
                                    const char* statement, job_fence otherwise);
  caf::error failed(const char* what) const;

  using Conn::changes;
  using Conn::error;
  using Conn::sql;
};

} // namespace troupe::io::job_store
