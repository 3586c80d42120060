// What the SQLite adapters share: opening and migrating the database, cached prepared statements, and
// the group commit of a detached store actor's writes. Included by io/sqlite_*.cpp only.
#pragma once

#include "actors/atoms.hpp"
#include "actors/errors.hpp"
#include "io/group_commit.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace troupe::io::sqlite {

struct db_closer {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using db_ptr = std::shared_ptr<sqlite3>;

struct stmt_closer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using stmt_ptr = std::unique_ptr<sqlite3_stmt, stmt_closer>;

inline std::string exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) == SQLITE_OK)
    return {};
  std::string msg = err ? err : "unknown error";
  sqlite3_free(err);
  return msg;
}

inline stmt_ptr prepare(sqlite3* db, const char* sql) {
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db, sql, -1, &s, nullptr);
  return stmt_ptr(s);
}

// Applies the schema migrations not applied yet (with `dry_run` only lists them), adding their file
// names to `pending`; an error names the failing version. Defined in io/sqlite_migrations.cpp.
std::string migrate(sqlite3* db, bool dry_run = false, std::vector<std::string>* pending = nullptr);

// Opens (creating) the database at `path` for one connection: WAL, synchronous=FULL, and a busy
// timeout since the stores keep one connection each to the same file. An error names the file and the
// cause.
inline std::variant<db_ptr, std::string> open_unmigrated(const std::string& path) {
  sqlite3* raw = nullptr;
  auto rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                            nullptr);
  db_ptr db(raw, db_closer{});
  if (rc != SQLITE_OK)
    return "store.path " + path + ": cannot open: " + (raw ? sqlite3_errmsg(raw) : "out of memory");
  sqlite3_busy_timeout(raw, 5000);
  for (auto pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"})
    if (auto err = exec(raw, pragma); !err.empty())
      return "store.path " + path + ": " + err;
  return db;
}

// The same, migrated: for one store actor's connection.
inline std::variant<db_ptr, std::string> open(const std::string& path) {
  auto db = open_unmigrated(path);
  if (auto opened = std::get_if<db_ptr>(&db))
    if (auto err = migrate(opened->get()); !err.empty())
      return "store.path " + path + ": " + err;
  return db;
}

// A prepared statement in use: bind by position, step, read columns; reset when it goes out of scope
// (or finalized, when it was prepared for this one use).
class query {
public:
  explicit query(sqlite3_stmt* s) : s_(s) {}
  explicit query(stmt_ptr owned) : s_(owned.get()), owned_(std::move(owned)) {}
  query(const query&) = delete;
  query(query&& other) noexcept : s_(other.s_), owned_(std::move(other.owned_)) { other.s_ = nullptr; }
  ~query() {
    if (!s_ || owned_)
      return;
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }

  query& bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  query& bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  query& bind(int i, const std::optional<std::string>& v) { // nullopt binds NULL
    if (v)
      return bind(i, *v);
    sqlite3_bind_null(s_, i);
    return *this;
  }
  query& bind(int i, const std::optional<double>& v) {
    if (v)
      sqlite3_bind_double(s_, i, *v);
    else
      sqlite3_bind_null(s_, i);
    return *this;
  }
  bool row() { return sqlite3_step(s_) == SQLITE_ROW; }
  bool done() { return sqlite3_step(s_) == SQLITE_DONE; }
  // The result code of one step, for callers that tell a constraint from other failures.
  int step() { return sqlite3_step(s_); }

  std::string text(int i) const {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(s_, i));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s_, i))) : std::string();
  }
  int64_t integer(int i) const { return sqlite3_column_int64(s_, i); }
  std::optional<double> real(int i) const {
    if (sqlite3_column_type(s_, i) == SQLITE_NULL)
      return std::nullopt;
    return sqlite3_column_double(s_, i);
  }

private:
  sqlite3_stmt* s_;
  stmt_ptr owned_;
};

// One connection and its statements, prepared once and kept for the life of the store.
class connection {
public:
  static constexpr const char* engine = "sqlite";

  explicit connection(db_ptr db) : db_(std::move(db)) {}

  sqlite3* raw() const { return db_.get(); }

  query sql(const char* text) {
    auto& s = statements_[text];
    if (!s)
      s = prepare(db_.get(), text);
    return query(s.get());
  }

  // A statement whose text varies per call (a filtered list), prepared for one use.
  query statement(const std::string& text) { return query(prepare(db_.get(), text.c_str())); }

  // The store's clock: one process writes the file, so its own.
  std::chrono::system_clock::time_point now() const { return std::chrono::system_clock::now(); }

  std::string error() const { return sqlite3_errmsg(db_.get()); }

  // The rows the last INSERT, UPDATE or DELETE changed.
  int64_t changes() const { return sqlite3_changes(db_.get()); }

  // The first column of every row `text` selects with `arg` bound to ?1.
  std::vector<std::string> ids(const char* text, const std::string& arg) {
    std::vector<std::string> out;
    auto q = sql(text);
    q.bind(1, arg);
    while (q.row())
      out.push_back(q.text(0));
    return out;
  }

private:
  db_ptr db_;
  std::unordered_map<const char*, stmt_ptr> statements_; // by the address of their SQL text
};

using io::batching;
using io::flush_atom;

// Writes are grouped: each one joins a batch and the first one of a batch queues a flush behind
// whatever else is already in the mailbox, so one transaction (one fsync) covers all of them. A
// write is answered only after its batch committed. Reads flush first, so they see every write sent
// before them.
template <class Db>
struct write_batch {
  using db_type = Db;
  std::vector<std::function<void(Db&)>> writes;
  std::vector<std::function<void(bool committed)>> replies;

  void flush(Db& db, const char* store_name) {
    if (writes.empty())
      return;
    auto raw = db.raw();
    bool committed = exec(raw, "BEGIN IMMEDIATE").empty();
    if (committed) {
      for (auto& write : writes)
        write(db);
      if (auto err = exec(raw, "COMMIT"); !err.empty()) {
        spdlog::error("{}: commit of {} writes failed: {}", store_name, writes.size(), err);
        exec(raw, "ROLLBACK");
        committed = false;
      }
    }
    writes.clear();
    auto done = std::move(replies);
    replies.clear();
    for (auto& reply : done)
      reply(committed);
  }
};

// The store actor's state holds a `write_batch` named `batch` and a `flush()` that commits it.
template <class Pointer, class Write>
void enqueue(Pointer self, Write write, std::function<void(bool)> reply = {}) {
  auto& batch = self->state.batch;
  if (batch.writes.empty())
    self->send(self, flush_atom::value);
  batch.writes.emplace_back(std::move(write));
  if (reply)
    batch.replies.push_back(std::move(reply));
}

// A write answered with its outcome once its batch committed. `fn(db)` returns a T or an error; an
// error undoes what `fn` wrote (a savepoint per write) without touching the rest of the batch.
template <class T, class Pointer, class F>
caf::result<T> write(Pointer self, F fn) {
  using db_type = typename std::decay_t<decltype(self->state.batch)>::db_type;
  auto rp = self->template make_response_promise<T>();
  auto out = std::make_shared<std::variant<T, caf::error>>(caf::error{});
  enqueue(
    self,
    [fn = std::move(fn), out](db_type& db) mutable {
      exec(db.raw(), "SAVEPOINT store_write");
      *out = fn(db);
      if (std::holds_alternative<caf::error>(*out))
        exec(db.raw(), "ROLLBACK TO store_write");
      exec(db.raw(), "RELEASE store_write");
    },
    [rp, out](bool committed) mutable {
      if (!committed)
        rp.deliver(make_error(errc::unavailable, "store: the write could not be committed"));
      else if (auto v = std::get_if<T>(out.get()))
        rp.deliver(std::move(*v));
      else
        rp.deliver(std::get<caf::error>(*out));
    });
  return rp;
}

// How a store's port (its *_port.hpp) reaches SQLite: writes join the group commit, reads flush it
// first. The actor's state holds `db` (a pointer to the store's Db) and `flush()`.
//   write<T>(fn) / read<T>(fn): fn(db) returns std::variant<T, caf::error>
//   tell(fn, after): fn(db) returns nothing; after(committed) runs once its batch ended
template <class Pointer>
struct engine {
  Pointer self;

  template <class T, class F>
  caf::result<T> write(F fn) const {
    return sqlite::write<T>(self, std::move(fn));
  }

  template <class F>
  void tell(F fn, std::function<void(bool)> after = {}) const {
    enqueue(self, std::move(fn), std::move(after));
  }

  template <class T, class F>
  caf::result<T> read(F fn) const {
    self->state.flush();
    auto v = fn(*self->state.db);
    if (auto value = std::get_if<T>(&v))
      return std::move(*value);
    return std::get<caf::error>(std::move(v));
  }
};

// Nothing sent to the store may be lost when it is told to stop.
template <class Pointer>
void flush_on_exit(Pointer self) {
  self->set_exit_handler([self](caf::exit_msg& msg) {
    self->state.flush();
    self->quit(msg.reason);
  });
}

// The state of a store whose actor is its port over one connection: `Db` and the group commit.
template <class Db>
struct store_state {
  static inline const char* name = "sqlite_store";
  std::unique_ptr<Db> db;
  write_batch<Db> batch;
  const char* store_name = "store";

  void flush() { batch.flush(*db, store_name); }
};

// Opens (creating and migrating) the database at `path` and spawns, on its own thread, the store whose
// port is `Port`: `Db` over the connection, answering as `port_behavior<Actor>(engine, flush)` says
// (a *_port.hpp's). An error names the file and the cause.
template <class Port, class Db, class PortBehavior>
std::variant<Port, std::string> spawn_store(caf::actor_system& sys, const std::string& path, const char* store_name,
                                            PortBehavior port_behavior) {
  auto db = open(path);
  if (auto err = std::get_if<std::string>(&db))
    return std::move(*err);
  using actor = batching<Port>;
  using pointer = typename actor::template stateful_pointer<store_state<Db>>;
  auto behavior = [store_name, port_behavior](pointer self, db_ptr raw) -> typename actor::behavior_type {
    self->state.db = std::make_unique<Db>(std::move(raw));
    self->state.store_name = store_name;
    flush_on_exit(self);
    return port_behavior(engine<pointer>{self}, [=](flush_atom) { self->state.flush(); });
  };
  Port port = sys.spawn<caf::detached>(behavior, std::get<db_ptr>(std::move(db)));
  return port;
}

} // namespace troupe::io::sqlite
