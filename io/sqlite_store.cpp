// The SQLite run store's actor: the port's messages (actors/store.hpp) mapped onto store_db, writes
// through the group commit, reads after it.
#include "io/sqlite_store.hpp"

#include "actors/errors.hpp"
#include "io/sqlite_store_db.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>

namespace troupe::io {

namespace {

using run_store::outcome;
using run_store::store_db;
using sqlite::enqueue;
using sqlite::write;

// The port plus the store's own flush message.
using sqlite_store_actor = sqlite::batching<store_actor>;

struct store_state {
  static inline const char* name = "sqlite_store";
  std::unique_ptr<store_db> db;
  std::string path;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> audit_file{nullptr, &std::fclose}; // JSONL copy of `audit`
  sqlite::write_batch<store_db> batch;

  void flush() { batch.flush(*db, "store"); }
};

using store_pointer = sqlite_store_actor::stateful_pointer<store_state>;

// The database for a read, with every write received before it committed.
store_db& fresh(store_pointer self) {
  self->state.flush();
  return *self->state.db;
}

template <class T>
caf::result<T> found(std::optional<T> v, caf::error missing) {
  if (v)
    return std::move(*v);
  return missing;
}

caf::error not_found(const char* what) {
  return make_error(errc::not_found, what);
}

template <class T>
caf::result<T> answer(outcome<T> v) {
  if (auto value = std::get_if<T>(&v))
    return std::move(*value);
  return std::get<caf::error>(std::move(v));
}

// Once committed, the audit line is appended to the JSONL copy too (AS-45).
void audit(store_pointer self, protocol::audit_record r) {
  auto line = protocol::audit_json(r);
  enqueue(
    self, [r = std::move(r), line](store_db& db) { db.insert_audit(r, line); },
    [self, line](bool committed) {
      auto f = self->state.audit_file.get();
      if (!committed || !f)
        return;
      std::fputs(line.c_str(), f);
      std::fputc('\n', f);
      std::fflush(f);
    });
}

sqlite_store_actor::behavior_type sqlite_store_behavior(store_pointer self, sqlite::db_ptr raw, std::string path,
                                                        std::string audit_path) {
  self->state.db = std::make_unique<store_db>(std::move(raw));
  self->state.path = std::move(path);
  if (!audit_path.empty()) {
    self->state.audit_file.reset(std::fopen(audit_path.c_str(), "a"));
    if (!self->state.audit_file)
      spdlog::error("store: cannot append to {}; audit records are kept in the store only", audit_path);
  }
  sqlite::flush_on_exit(self);
  return {
    [=](sqlite::flush_atom) { self->state.flush(); },
    // ---- Writes: answered once their batch committed ----
    [=](save_session_atom, session_record& r) {
      enqueue(self, [r = std::move(r)](store_db& db) { db.save_session(r); });
    },
    [=](create_run_atom, run_record& r) {
      return write<run_record>(self, [r = std::move(r)](store_db& db) { return db.create(r); });
    },
    [=](begin_chat_atom, run_record& r, std::string& worker_id, double lease_seconds) {
      return write<run_record>(self, [=, r = std::move(r)](store_db& db) {
        return db.begin_chat(r, worker_id, lease_seconds);
      });
    },
    [=](claim_atom, std::string& worker_id, double lease_seconds, uint32_t n) {
      return write<run_claim>(self, [=](store_db& db) { return db.claim(worker_id, lease_seconds, n); });
    },
    [=](append_atom, std::string& run_id, int64_t epoch, stored_event& e) {
      return write<bool>(self, [=, e = std::move(e)](store_db& db) { return db.append(run_id, epoch, e); });
    },
    [=](transition_atom, run_transition& t) {
      return write<run_record>(self, [t = std::move(t)](store_db& db) { return db.transition(t); });
    },
    [=](renew_atom, std::string& run_id, int64_t epoch, double lease_seconds) {
      return write<bool>(self, [=](store_db& db) { return db.renew(run_id, epoch, lease_seconds); });
    },
    [=](recover_atom, bool all_running, protocol::lapse_ends& ends) {
      return write<recovery_report>(self, [=](store_db& db) { return db.recover(all_running, ends); });
    },
    [=](cancel_atom, std::string& run_id, protocol::attempt_end& end) {
      return write<run_record>(self, [=](store_db& db) { return db.cancel(run_id, end); });
    },
    [=](save_approval_atom, protocol::approval_record& r) {
      return write<protocol::approval_record>(self, [r = std::move(r)](store_db& db) {
        db.save_approval(r);
        return outcome<protocol::approval_record>(r);
      });
    },
    [=](rate_atom, std::string& user_key, int64_t limit, int64_t now) {
      using decision = protocol::rate_limit_decision;
      return write<decision>(self, [=](store_db& db) { return outcome<decision>(db.count_request(user_key, limit, now)); });
    },
    [=](audit_atom, protocol::audit_record& r) { audit(self, std::move(r)); },
    // ---- Reads: after every write received before them ----
    [=](get_session_atom, const std::string& tenant, const std::string& user,
        const std::string& session) -> caf::result<session_record> {
      return found(fresh(self).get_session(tenant, user, session), not_found("Session not found"));
    },
    [=](get_run_atom, const std::string& run_id) -> caf::result<run_record> {
      return found(fresh(self).get_run(run_id), run_store::run_not_found());
    },
    [=](list_runs_atom, const std::string& status, int64_t limit) -> caf::result<run_list> {
      return fresh(self).list_runs(status, limit);
    },
    [=](events_atom, const std::string& run_id, int64_t after, int64_t limit) -> caf::result<run_events_page> {
      return answer(fresh(self).events(run_id, after, limit));
    },
    [=](list_traces_atom, const std::string& session_id, int64_t limit) -> caf::result<trace_list> {
      return fresh(self).list_traces(session_id, limit);
    },
    [=](get_trace_atom, const std::string& run_id) -> caf::result<std::string> {
      return found(fresh(self).get_trace(run_id), not_found("Trace not found"));
    },
    [=](get_approval_atom, const std::string& id) -> caf::result<protocol::approval_record> {
      return found(fresh(self).get_approval(id), not_found("Approval request not found"));
    },
    [=](list_approvals_atom, const protocol::approval_query& filter) -> caf::result<approval_list> {
      return fresh(self).list_approvals(filter);
    },
    [=](stats_atom, bool detailed) -> caf::result<protocol::store_stats> {
      auto s = fresh(self).stats(detailed);
      s.root = self->state.path;
      return s;
    },
  };
}

} // namespace

std::variant<store_actor, std::string> spawn_sqlite_store(caf::actor_system& sys, const std::string& path,
                                                         const std::string& audit_path) {
  auto db = sqlite::open(path);
  if (auto err = std::get_if<std::string>(&db))
    return std::move(*err);
  store_actor port = sys.spawn<caf::detached>(sqlite_store_behavior, std::get<sqlite::db_ptr>(std::move(db)), path,
                                              audit_path);
  return port;
}

} // namespace troupe::io
