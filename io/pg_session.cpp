#include "io/pg_session.hpp"

#include "actors/errors.hpp"

#include <pqxx/pqxx>

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

std::string connection_url(const std::string& url, const session_limits& limits) {
  auto connect_timeout = std::to_string(std::max<int64_t>(2, std::llround(limits.connect_timeout_seconds)));
  const std::pair<const char*, std::string> wanted[] = {
    {"keepalives", "1"},         {"keepalives_idle", "10"},          {"keepalives_interval", "5"},
    {"keepalives_count", "3"},   {"connect_timeout", connect_timeout}, {"application_name", "troupe"},
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

std::optional<caf::error> session::transact(const std::function<bool(pqxx::work&)>& work,
                                            const std::function<bool(pqxx::work&)>& settle) {
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
    try {
      pqxx::work tx(*conn_);
      if (!work(tx)) {
        tx.abort();
        return std::nullopt;
      }
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
      if (verdict == after_failure::settle) {
        if (!settle)
          return unavailable("the outcome of a commit is unknown: " + last);
        // The write either committed or left nothing: read it back on a new connection.
        try {
          if (auto err = connect())
            return err;
          pqxx::work check(*conn_);
          bool there = settle(check);
          check.commit();
          if (there)
            return std::nullopt;
        } catch (const std::exception& again) {
          if (!conn_ || !conn_->is_open())
            conn_.reset();
          last = again.what();
        }
      }
    }
  }
  return unavailable("gave up after " + std::to_string(last_tries_) + " tries: " + last);
}

} // namespace troupe::io::pg
