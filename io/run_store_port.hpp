// The run store port's messages (actors/store.hpp) mapped onto store_db (io/run_store_db.hpp), once for
// both adapters. `Engine` says how an operation reaches the database:
//   engine.template write<T>(fn)  a write answered once durable; fn(db) returns outcome<T>
//   engine.tell(fn, after)        a write nobody waits for; after(committed) runs once it ended
//   engine.template read<T>(fn)   a read that sees every write sent before it; fn(db) returns outcome<T>
//   engine.root()                 where the store is, for the counts
// `extra` are handlers an adapter's actor adds to the port's (SQLite's flush).
#pragma once

#include "actors/errors.hpp"
#include "actors/store.hpp"
#include "io/run_store_db.hpp"

#include <caf/all.hpp>

#include <memory>
#include <optional>

namespace troupe::io::run_store {

template <class T>
outcome<T> found(std::optional<T> v, caf::error missing) {
  if (v)
    return std::move(*v);
  return missing;
}

inline caf::error not_found(const char* what) {
  return make_error(errc::not_found, what);
}

template <class Actor, class Engine, class... Extra>
typename Actor::behavior_type port_behavior(Engine engine, Extra... extra) {
  using decision = protocol::rate_limit_decision;
  return {
    extra...,
    // ---- Writes: answered once durable ----
    [=](save_session_atom, session_record& r) {
      engine.tell([r = std::move(r)](auto& db) { db.save_session(r); });
    },
    [=](create_run_atom, run_record& r) {
      return engine.template write<run_record>([r = std::move(r)](auto& db) { return db.create(r); });
    },
    [=](begin_chat_atom, run_record& r, std::string& worker_id, double lease_seconds) {
      return engine.template write<run_record>(
        [=, r = std::move(r)](auto& db) { return db.begin_chat(r, worker_id, lease_seconds); });
    },
    [=](claim_atom, claim_request& want) {
      return engine.template write<run_claim>([=](auto& db) { return db.claim(want); });
    },
    [=](append_atom, std::string& run_id, int64_t epoch, stored_event& e) {
      return engine.template write<bool>([=, e = std::move(e)](auto& db) { return db.append(run_id, epoch, e); });
    },
    [=](transition_atom, run_transition& t) {
      return engine.template write<run_record>([t = std::move(t)](auto& db) { return db.transition(t); });
    },
    [=](renew_atom, std::string& run_id, int64_t epoch, double lease_seconds) {
      return engine.template write<bool>([=](auto& db) { return db.renew(run_id, epoch, lease_seconds); });
    },
    [=](recover_atom, bool all_running, protocol::lapse_ends& ends) {
      return engine.template write<recovery_report>([=](auto& db) { return db.recover(all_running, ends); });
    },
    [=](handback_atom, std::string& worker_id, protocol::attempt_end& end, int64_t max_handoffs) {
      return engine.template write<int64_t>([=](auto& db) { return db.hand_back(worker_id, end, max_handoffs); });
    },
    [=](handback_atom, std::string& run_id, int64_t lease_epoch, protocol::attempt_end& end, int64_t max_handoffs) {
      return engine.template write<bool>(
        [=](auto& db) { return db.hand_back_run(run_id, lease_epoch, end, max_handoffs); });
    },
    [=](cancel_atom, std::string& run_id, protocol::attempt_end& end) {
      return engine.template write<run_record>([=](auto& db) { return db.cancel(run_id, end); });
    },
    [=](save_approval_atom, protocol::approval_record& r) {
      return engine.template write<protocol::approval_record>([r = std::move(r)](auto& db) {
        db.save_approval(r);
        return outcome<protocol::approval_record>(r);
      });
    },
    [=](rate_atom, std::string& user_key, int64_t limit, int64_t now) {
      return engine.template write<decision>(
        [=](auto& db) { return outcome<decision>(db.count_request(user_key, limit, now)); });
    },
    // AS-45: once committed, the audit line is appended to the JSONL copy too.
    [=](audit_atom, protocol::audit_record& r) {
      auto line = std::make_shared<const std::string>(protocol::audit_json(r));
      engine.tell([r = std::move(r), line](auto& db) { db.insert_audit(r, *line); },
                  [engine, line](bool committed) {
                    if (committed)
                      engine.append_audit_line(*line);
                  });
    },
    // ---- Reads: after every write sent before them ----
    [=](get_session_atom, std::string& tenant, std::string& user, std::string& session) {
      return engine.template read<session_record>([=](auto& db) {
        return found(db.get_session(tenant, user, session), not_found("Session not found"));
      });
    },
    [=](get_run_atom, std::string& run_id) {
      return engine.template read<run_record>(
        [=](auto& db) { return found(db.get_run(run_id), run_store::run_not_found()); });
    },
    [=](list_runs_atom, std::string& status, int64_t limit, protocol::tenant_scope& scope) {
      return engine.template read<run_list>(
        [=](auto& db) { return outcome<run_list>(db.list_runs(status, limit, scope)); });
    },
    [=](events_atom, std::string& run_id, int64_t after, int64_t limit) {
      return engine.template read<run_events_page>([=](auto& db) { return db.events(run_id, after, limit); });
    },
    [=](list_traces_atom, std::string& session_id, int64_t limit, protocol::tenant_scope& scope) {
      return engine.template read<trace_list>(
        [=](auto& db) { return outcome<trace_list>(db.list_traces(session_id, limit, scope)); });
    },
    [=](get_trace_atom, std::string& run_id) {
      return engine.template read<std::string>(
        [=](auto& db) { return found(db.get_trace(run_id), not_found("Trace not found")); });
    },
    [=](settle_approval_atom, protocol::approval_record& r) {
      return engine.template write<protocol::approval_record>([r = std::move(r)](auto& db) {
        return found(db.settle_approval(r), not_found("Approval request not found or already resolved"));
      });
    },
    [=](get_approval_atom, std::string& id) {
      return engine.template read<protocol::approval_record>(
        [=](auto& db) { return found(db.get_approval(id), not_found("Approval request not found")); });
    },
    [=](list_approvals_atom, protocol::approval_query& filter) {
      return engine.template read<approval_list>(
        [=](auto& db) { return outcome<approval_list>(db.list_approvals(filter)); });
    },
    [=](stats_atom, bool detailed, protocol::tenant_scope& scope) {
      return engine.template read<protocol::store_stats>([=](auto& db) {
        auto s = db.stats(detailed, scope);
        if (!scope.tenant)
          s.root = engine.root(); // a tenant's counts carry no path (AS-84)
        return outcome<protocol::store_stats>(std::move(s));
      });
    },
    [=](ping_atom) {
      return engine.template read<protocol::store_health>(
        [](auto& db) { return outcome<protocol::store_health>(db.health()); });
    },
  };
}

} // namespace troupe::io::run_store
