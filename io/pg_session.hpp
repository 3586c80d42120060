// One PostgreSQL connection as troupe's store uses it (CJ-4, CJ-5): session limits that bound how long
// troupe can hold a lock or a transaction open, TCP keepalives, and transactions that retry what
// PostgreSQL says may succeed on a second try. Owned by one detached actor: libpqxx blocks.
#pragma once

#include <caf/error.hpp>
#include <pqxx/pqxx> // included by the PostgreSQL adapter's files only

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace troupe::io::pg {

// cluster.pg.* (CJ-4).
struct session_limits {
  double statement_timeout_seconds = 5;
  double idle_in_transaction_seconds = 10;
  double lock_timeout_seconds = 2;
  double connect_timeout_seconds = 5;
  int retries = 3; // after the first try (CJ-5)
};

// The connection URL with troupe's client-side settings added: keepalives, a connect timeout and the
// application name (`application`, so that operators tell troupe's connections apart in
// pg_stat_activity), unless the URL sets them itself.
std::string connection_url(const std::string& url, const session_limits& limits, const char* application = "troupe");

// What to do after a transaction failed (CJ-5).
enum class after_failure {
  retry,  // a serialization failure (40001), deadlock (40P01), lock timeout (55P03), or a connection
          // lost before COMMIT: nothing was written, run it again
  settle, // the connection was lost during COMMIT: whether it committed is unknown
  fail,   // anything else: report it
};
after_failure classify(const std::exception& e, bool committing);

class session {
public:
  session(std::string url, session_limits limits);
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  // Connects when not connected; the error (errc::unavailable) says why it cannot.
  std::optional<caf::error> connect();
  bool connected() const;

  // Runs `work` in one READ COMMITTED transaction and commits it when it answers true (false rolls
  // it back: a refused write leaves nothing), retrying per CJ-5 with 10–50 ms of jitter between
  // tries; `work` may run more than once, so it must start from scratch each time. When the
  // connection is lost during COMMIT, the transaction's id settles it on a new connection: committed
  // is success, aborted is tried again (a read-only transaction wrote nothing and is tried again). An
  // error names what failed: errc::unavailable for the connection, errc::internal for the rest.
  std::optional<caf::error> transact(const std::function<bool(pqxx::work&)>& work);

  // The tries the last transact() took (1 when the first succeeded).
  int last_tries() const { return last_tries_; }

  // The backend's process id, to tell one connection from the next.
  int backend_pid() const;

private:
  // Whether the transaction `txid` committed, asked on a new connection until it is no longer in
  // progress: true or false, or an error when that cannot be learnt.
  std::variant<bool, caf::error> committed(int64_t txid);

  std::string url_;
  session_limits limits_;
  std::unique_ptr<pqxx::connection> conn_;
  int last_tries_ = 0;
};

// A transaction open on the database, any client's (CJ-11).
struct open_transaction {
  int pid = 0;
  double age_seconds = 0;
  std::string application;
  std::string state; // pg_stat_activity's: active, idle in transaction, ...
};

// The transactions other than the session's own open longer than `older_than` seconds, oldest first.
std::variant<std::vector<open_transaction>, caf::error> long_transactions(session& db, double older_than);

} // namespace troupe::io::pg
