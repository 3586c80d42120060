// A PostgreSQL connection as a store's operations use it: the same small query interface as SQLite's
// (io/sqlite_support.hpp: bind by position, step rows, read columns, count changes), so a store's
// operations are written once for both engines. Statements run in the transaction the adapter
// attached (one per operation, io/pg_session.hpp), prepared once per connection, and named by the
// address of their SQL text; SQLite's ?N parameters are read as $N. An SQL error throws, aborting the
// transaction: the adapter rolls back and reports it.
#pragma once

#include "io/statement_spelling.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pqxx {
class transaction_base;
}

namespace troupe::io::pg {

// `text` with each ?N parameter outside a quoted string written $N.
std::string numbered_parameters(std::string_view text);

class connection;

class query {
public:
  query(connection& c, const std::string& name, const std::string& text);
  query(query&&) noexcept;
  query(const query&) = delete;
  ~query();

  query& bind(int i, const std::string& v);
  query& bind(int i, int64_t v);
  query& bind(int i, const std::optional<double>& v);
  query& bind(int i, const std::optional<std::string>& v); // nullopt binds NULL
  // The next row of the result (the statement runs on the first call).
  bool row();
  // Runs a statement that returns no rows.
  bool done();

  std::string text(int i) const;             // NULL reads as ""
  int64_t integer(int i) const;              // NULL reads as 0
  std::optional<double> real(int i) const;   // NULL reads as nullopt

private:
  void run();
  const char* cell(int i) const;

  connection* conn_;
  std::string name_; // "" runs unprepared
  std::string text_;
  std::vector<std::optional<std::string>> params_;
  struct result;
  std::unique_ptr<result> result_;
  std::size_t next_ = 0; // the row row() moves to next
};

class connection {
public:
  static constexpr const char* engine = "postgres";

  // `spelling`: the statements PostgreSQL spells its own way (null-terminated; may be null).
  explicit connection(const statement_spelling* spelling = nullptr);

  // The transaction the following statements run in; nullptr after it ended.
  void attach(pqxx::transaction_base* tx) { tx_ = tx; }

  // Told each statement's time in seconds (the pool's metrics).
  void time_statements(std::function<void(double)> observe) { observe_ = std::move(observe); }

  query sql(const char* text);
  // A statement whose text varies per call, run unprepared.
  query statement(const std::string& text);

  // The rows the last statement changed.
  int64_t changes() const { return changes_; }
  // Errors throw; nothing is left to report here.
  std::string error() const { return {}; }

  // The first column of every row `text` selects with `arg` bound to $1.
  std::vector<std::string> ids(const char* text, const std::string& arg);

  // The database's clock, read through the offset of this process's clock from it, which the worker
  // measures (CJ-20: every node's leases on one clock).
  std::chrono::system_clock::time_point now() const { return std::chrono::system_clock::now() + clock_offset_; }
  void set_clock_offset(std::chrono::system_clock::duration offset) { clock_offset_ = offset; }

private:
  friend class query;
  struct prepared {
    std::string name;
    std::string text;
  };

  pqxx::transaction_base* tx_ = nullptr;
  std::unordered_map<const char*, const char*> spelling_;
  std::unordered_map<const char*, prepared> prepared_; // by the address of their SQL text
  int64_t changes_ = 0;
  std::function<void(double)> observe_;
  std::chrono::system_clock::duration clock_offset_{};
};

} // namespace troupe::io::pg
