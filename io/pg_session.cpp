#include "io/pg_session.hpp"

#include "actors/errors.hpp"

#include <pqxx/pqxx>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

namespace troupe::io::pg {

namespace {

bool is_url(const std::string& s) {
  return s.rfind("postgresql://", 0) == 0 || s.rfind("postgres://", 0) == 0;
}

std::string millis(double seconds) {
  return std::to_string(static_cast<int64_t>(std::llround(seconds * 1000))) + "ms";
}

// 10–50 ms, so that clients that collided do not collide again (CJ-5).
void jitter() {
  thread_local std::mt19937 rng{std::random_device{}()};
  std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(10, 50)(rng)));
}

caf::error unavailable(const std::string& why) {
  return make_error(errc::unavailable, "store_unavailable: " + why);
}

} // namespace

std::string connection_url(const std::string& url, const session_limits& limits, const char* application) {
  auto connect_timeout = std::to_string(std::max<int64_t>(2, std::llround(limits.connect_timeout_seconds)));
  const std::pair<const char*, std::string> wanted[] = {
    {"keepalives", "1"},         {"keepalives_idle", "10"},          {"keepalives_interval", "5"},
    {"keepalives_count", "3"},   {"connect_timeout", connect_timeout}, {"application_name", application},
  };
  auto out = url;
  bool url_form = is_url(url);
  auto query = url_form ? url.find('?') : std::string::npos;
  for (auto& [key, value] : wanted) {
    auto k = std::string(key) + "=";
    bool present = url_form ? (query != std::string::npos
                               && (url.find("?" + k, query) != std::string::npos
                                   || url.find("&" + k, query) != std::string::npos))
                            : (url.rfind(k, 0) == 0 || url.find(" " + k) != std::string::npos);
    if (present)
      continue;
    if (url_form) {
      out += (out.find('?') == std::string::npos ? "?" : "&") + k + value;
    } else {
      out += (out.empty() ? "" : " ") + k + value;
    }
  }
  return out;
}

after_failure classify(const std::exception& e, bool committing) {
  if (dynamic_cast<const pqxx::in_doubt_error*>(&e) || dynamic_cast<const pqxx::statement_completion_unknown*>(&e))
    return after_failure::settle;
  // libpqxx reports 40001 and 40P01 as transaction_rollback subclasses, which carry no SQLSTATE.
  if (dynamic_cast<const pqxx::transaction_rollback*>(&e))
    return after_failure::retry;
  if (dynamic_cast<const pqxx::broken_connection*>(&e))
    return committing ? after_failure::settle : after_failure::retry;
  if (auto sql = dynamic_cast<const pqxx::sql_error*>(&e)) {
    auto state = sql->sqlstate();
    if (state == "40001" || state == "40P01" || state == "55P03")
      return after_failure::retry;
  }
  return after_failure::fail;
}

session::session(std::string url, session_limits limits) : url_(std::move(url)), limits_(limits) {}

session::~session() = default;

bool session::connected() const {
  return conn_ && conn_->is_open();
}

int session::backend_pid() const {
  return connected() ? conn_->backendpid() : 0;
}

std::optional<caf::error> session::connect() {
  if (connected())
    return std::nullopt;
  conn_.reset();
  try {
    auto c = std::make_unique<pqxx::connection>(connection_url(url_, limits_));
    // Bounds on what one statement, lock wait or idle transaction may hold back (CJ-4).
    pqxx::nontransaction setup(*c);
    setup.exec("SET statement_timeout = '" + millis(limits_.statement_timeout_seconds) + "'");
    setup.exec("SET lock_timeout = '" + millis(limits_.lock_timeout_seconds) + "'");
    setup.exec("SET idle_in_transaction_session_timeout = '" + millis(limits_.idle_in_transaction_seconds) + "'");
    setup.commit();
    conn_ = std::move(c);
    return std::nullopt;
  } catch (const std::exception& e) {
    return unavailable(std::string("cannot connect to PostgreSQL: ") + e.what());
  }
}

std::variant<bool, caf::error> session::committed(int64_t txid) {
  auto deadline = std::chrono::steady_clock::now()
                  + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(std::max(1.0, limits_.statement_timeout_seconds)));
  std::string last;
  do {
    if (auto err = connect()) {
      last = message_of(*err);
    } else {
      try {
        pqxx::nontransaction ask(*conn_);
        auto status = ask.exec_params1("SELECT txid_status($1)", txid)[0];
        if (status.is_null())
          return unavailable("the outcome of a commit is unknown: PostgreSQL no longer knows its transaction");
        auto s = status.as<std::string>();
        if (s != "in progress") // the old backend may still be finishing it
          return s == "committed";
      } catch (const std::exception& e) {
        if (!conn_->is_open())
          conn_.reset();
        last = e.what();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < deadline);
  return unavailable("the outcome of a commit is unknown: " + last);
}

std::optional<caf::error> session::transact(const std::function<bool(pqxx::work&)>& work) {
  last_tries_ = 0;
  std::string last;
  for (int attempt = 0; attempt <= limits_.retries; ++attempt) {
    if (attempt > 0)
      jitter();
    ++last_tries_;
    if (auto err = connect()) {
      last = message_of(*err);
      continue;
    }
    bool committing = false;
    std::optional<int64_t> txid; // assigned once the transaction wrote
    try {
      pqxx::work tx(*conn_);
      if (!work(tx)) {
        tx.abort();
        return std::nullopt;
      }
      if (auto id = tx.exec1("SELECT txid_current_if_assigned()")[0]; !id.is_null())
        txid = id.as<int64_t>();
      committing = true;
      tx.commit();
      return std::nullopt;
    } catch (const std::exception& e) {
      last = e.what();
      auto verdict = classify(e, committing);
      if (!conn_->is_open())
        conn_.reset();
      if (verdict == after_failure::fail)
        return make_error(errc::internal, "store: " + last);
      if (verdict == after_failure::settle && txid) {
        auto outcome = committed(*txid);
        if (auto err = std::get_if<caf::error>(&outcome))
          return std::move(*err);
        if (std::get<bool>(outcome))
          return std::nullopt;
      }
    }
  }
  return unavailable("gave up after " + std::to_string(last_tries_) + " tries: " + last);
}

std::variant<std::vector<open_transaction>, caf::error> long_transactions(session& db, double older_than) {
  std::vector<open_transaction> found;
  auto err = db.transact([&](pqxx::work& tx) {
    found.clear();
    auto rows = tx.exec_params(R"sql(
      SELECT pid, EXTRACT(EPOCH FROM now() - xact_start), COALESCE(application_name, ''), COALESCE(state, '')
      FROM pg_stat_activity
      WHERE datname = current_database() AND xact_start IS NOT NULL AND pid <> pg_backend_pid()
        AND now() - xact_start > make_interval(secs => $1)
      ORDER BY xact_start LIMIT 10)sql",
                               older_than);
    for (const auto& row : rows)
      found.push_back({row[0].as<int>(), row[1].as<double>(), row[2].as<std::string>(), row[3].as<std::string>()});
    return true;
  });
  if (err)
    return std::move(*err);
  return found;
}

} // namespace troupe::io::pg
