#include "io/sqlite_store.hpp"

#include "actors/errors.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include <functional>
#include <memory>
#include <vector>

namespace troupe::io {

namespace {

// Versioned migrations, applied in order at start; a version is never edited once released.
constexpr const char* migrations[] = {
  R"sql(
    CREATE TABLE sessions (
      tenant_key  TEXT NOT NULL,
      user_key    TEXT NOT NULL,
      session_id  TEXT NOT NULL,
      created_at  TEXT NOT NULL,
      updated_at  TEXT NOT NULL,
      run_count   INTEGER NOT NULL DEFAULT 0,
      last_run_id TEXT NOT NULL DEFAULT '',
      last_status TEXT NOT NULL DEFAULT '',
      last_query  TEXT NOT NULL DEFAULT '',
      last_answer TEXT NOT NULL DEFAULT '',
      PRIMARY KEY (tenant_key, user_key, session_id)
    );
  )sql",
  R"sql(
    CREATE TABLE runs (
      run_id      TEXT PRIMARY KEY,
      run_kind    TEXT NOT NULL,
      session_id  TEXT NOT NULL,
      tenant_key  TEXT NOT NULL,
      user_key    TEXT NOT NULL,
      status      TEXT NOT NULL,
      attempts    INTEGER NOT NULL,
      event_count INTEGER NOT NULL,
      created_at  TEXT NOT NULL,
      updated_at  TEXT NOT NULL
    );
  )sql",
};

struct db_closer {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using db_ptr = std::shared_ptr<sqlite3>;

struct stmt_closer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using stmt_ptr = std::unique_ptr<sqlite3_stmt, stmt_closer>;

std::string exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) == SQLITE_OK)
    return {};
  std::string msg = err ? err : "unknown error";
  sqlite3_free(err);
  return msg;
}

stmt_ptr prepare(sqlite3* db, const char* sql) {
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db, sql, -1, &s, nullptr);
  return stmt_ptr(s);
}

void bind(sqlite3_stmt* s, int i, const std::string& v) {
  sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}

std::string column(sqlite3_stmt* s, int i) {
  auto p = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
  return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s, i))) : std::string();
}

std::string migrate(sqlite3* db) {
  if (auto err = exec(db, "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)"); !err.empty())
    return err;
  auto q = prepare(db, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
  if (!q || sqlite3_step(q.get()) != SQLITE_ROW)
    return sqlite3_errmsg(db);
  auto current = sqlite3_column_int(q.get(), 0);
  int version = 0;
  for (auto sql : migrations) {
    ++version;
    if (version <= current)
      continue;
    std::string tx = std::string("BEGIN;") + sql + "INSERT INTO schema_migrations(version) VALUES ("
                     + std::to_string(version) + ");COMMIT;";
    if (auto err = exec(db, tx.c_str()); !err.empty()) {
      exec(db, "ROLLBACK");
      return "migration " + std::to_string(version) + ": " + err;
    }
  }
  return {};
}

// Writes are grouped: each one joins a batch and the first one of a batch queues a flush behind
// whatever else is already in the mailbox, so one transaction (one fsync) covers all of them. Reads
// flush first, so they always see every write sent before them.
struct store_state {
  static inline const char* name = "sqlite_store";
  db_ptr db;
  std::vector<std::function<void(sqlite3*)>> batch;

  void flush() {
    if (batch.empty())
      return;
    auto raw = db.get();
    exec(raw, "BEGIN IMMEDIATE");
    for (auto& write : batch)
      write(raw);
    if (auto err = exec(raw, "COMMIT"); !err.empty()) {
      spdlog::error("store: commit of {} writes failed: {}", batch.size(), err);
      exec(raw, "ROLLBACK");
    }
    batch.clear();
  }
};

void save_session(sqlite3* db, const session_record& r) {
  auto s = prepare(db, R"sql(
    INSERT INTO sessions (tenant_key, user_key, session_id, created_at, updated_at, run_count,
                          last_run_id, last_status, last_query, last_answer)
    VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, ?8, ?9)
    ON CONFLICT (tenant_key, user_key, session_id) DO UPDATE SET
      updated_at = excluded.updated_at, run_count = run_count + 1, last_run_id = excluded.last_run_id,
      last_status = excluded.last_status, last_query = excluded.last_query,
      last_answer = excluded.last_answer)sql");
  for (auto [i, v] : {std::pair{1, &r.tenant_key}, {2, &r.user_key}, {3, &r.session_id}, {4, &r.created_at},
                      {5, &r.updated_at}, {6, &r.last_run_id}, {7, &r.last_status}, {8, &r.last_query},
                      {9, &r.last_answer}})
    bind(s.get(), i, *v);
  if (sqlite3_step(s.get()) != SQLITE_DONE)
    spdlog::error("store: saving session {} failed: {}", r.session_id, sqlite3_errmsg(db));
}

void save_run(sqlite3* db, const run_record& r) {
  auto s = prepare(db, R"sql(
    INSERT INTO runs (run_id, run_kind, session_id, tenant_key, user_key, status, attempts, event_count,
                      created_at, updated_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
    ON CONFLICT (run_id) DO UPDATE SET
      status = excluded.status, attempts = excluded.attempts, event_count = excluded.event_count,
      updated_at = excluded.updated_at)sql");
  for (auto [i, v] : {std::pair{1, &r.run_id}, {2, &r.run_kind}, {3, &r.session_id}, {4, &r.tenant_key},
                      {5, &r.user_key}, {6, &r.status}, {9, &r.created_at}, {10, &r.updated_at}})
    bind(s.get(), i, *v);
  sqlite3_bind_int(s.get(), 7, r.attempts);
  sqlite3_bind_int64(s.get(), 8, r.event_count);
  if (sqlite3_step(s.get()) != SQLITE_DONE)
    spdlog::error("store: saving run {} failed: {}", r.run_id, sqlite3_errmsg(db));
}

store_actor::behavior_type sqlite_store_behavior(store_actor::stateful_pointer<store_state> self, db_ptr db) {
  self->state.db = std::move(db);
  auto enqueue = [self](std::function<void(sqlite3*)> write) {
    if (self->state.batch.empty())
      self->send(self, flush_atom::value);
    self->state.batch.push_back(std::move(write));
  };
  // Nothing sent to the store may be lost when it is told to stop.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    self->state.flush();
    self->quit(msg.reason);
  });
  return {
    [=](save_session_atom, session_record& r) {
      enqueue([r = std::move(r)](sqlite3* db) { save_session(db, r); });
    },
    [=](save_run_atom, run_record& r) { enqueue([r = std::move(r)](sqlite3* db) { save_run(db, r); }); },
    [=](flush_atom) { self->state.flush(); },
    [=](get_session_atom, const std::string& tenant, const std::string& user,
        const std::string& session) -> caf::result<session_record> {
      self->state.flush();
      auto db = self->state.db.get();
      auto s = prepare(db, R"sql(
        SELECT created_at, updated_at, run_count, last_run_id, last_status, last_query, last_answer
        FROM sessions WHERE tenant_key = ?1 AND user_key = ?2 AND session_id = ?3)sql");
      bind(s.get(), 1, tenant);
      bind(s.get(), 2, user);
      bind(s.get(), 3, session);
      if (sqlite3_step(s.get()) != SQLITE_ROW)
        return make_error(errc::not_found, "Session not found");
      return session_record{tenant, user, session, column(s.get(), 0), column(s.get(), 1),
                            sqlite3_column_int64(s.get(), 2), column(s.get(), 3), column(s.get(), 4),
                            column(s.get(), 5), column(s.get(), 6)};
    },
    [=](get_run_atom, const std::string& run_id) -> caf::result<run_record> {
      self->state.flush();
      auto db = self->state.db.get();
      auto s = prepare(db, R"sql(
        SELECT run_kind, session_id, tenant_key, user_key, status, attempts, event_count, created_at, updated_at
        FROM runs WHERE run_id = ?1)sql");
      bind(s.get(), 1, run_id);
      if (sqlite3_step(s.get()) != SQLITE_ROW)
        return make_error(errc::not_found, "Run not found");
      return run_record{run_id, column(s.get(), 0), column(s.get(), 1), column(s.get(), 2), column(s.get(), 3),
                        column(s.get(), 4), sqlite3_column_int(s.get(), 5), sqlite3_column_int64(s.get(), 6),
                        column(s.get(), 7), column(s.get(), 8)};
    },
  };
}

} // namespace

std::variant<store_actor, std::string> spawn_sqlite_store(caf::actor_system& sys, const std::string& path) {
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
  if (auto err = migrate(raw); !err.empty())
    return "store.path " + path + ": " + err;
  return sys.spawn<caf::detached>(sqlite_store_behavior, std::move(db));
}

} // namespace troupe::io
