// The job store port's messages (actors/job_store.hpp) mapped onto job_db (io/job_store_db.hpp), once
// for both adapters; `Engine` as in io/workspace_store_port.hpp. `extra` are handlers an adapter's
// actor adds to the port's (its flush).
#pragma once

#include "actors/job_store.hpp"
#include "io/job_store_db.hpp"

#include <caf/all.hpp>

namespace troupe::io::job_store {

template <class Actor, class Engine, class... Extra>
typename Actor::behavior_type port_behavior(Engine engine, Extra... extra) {
  return {
    extra...,
    // Every change joins the group commit: a worker hears of a lease, a completion or a failure only
    // once it is durable (CJ-3).
    [=](job_enqueue_atom, job_enqueue& e) {
      return engine.template write<job_enqueued>([e = std::move(e)](auto& db) { return db.enqueue(e); });
    },
    [=](job_lease_atom, job_claim_request& want) {
      return engine.template write<job_claim>([want = std::move(want)](auto& db) { return db.claim(want); });
    },
    [=](job_beat_atom, job_heartbeat& h) {
      return engine.template write<job_answer>([h = std::move(h)](auto& db) { return db.heartbeat(h); });
    },
    [=](job_complete_atom, job_completions& c) {
      return engine.template write<std::vector<job_answer>>([c = std::move(c)](auto& db) { return db.complete(c); });
    },
    [=](job_fail_atom, job_failure& f, job_backoff backoff) {
      return engine.template write<job_answer>([f = std::move(f), backoff](auto& db) { return db.fail(f, backoff); });
    },
    [=](job_cancel_atom, std::string& id, job_scope& scope) {
      return engine.template write<job_answer>([=](auto& db) { return db.cancel(id, scope); });
    },
    [=](job_retry_atom, std::string& id, job_scope& scope) {
      return engine.template write<job_answer>([=](auto& db) { return db.retry(id, scope); });
    },
    [=](job_get_atom, std::string& id, job_scope& scope) {
      return engine.template read<job_answer>([=](auto& db) { return outcome<job_answer>(db.get(id, scope)); });
    },
    [=](job_list_atom, job_query& q) {
      return engine.template read<job_page>([=](auto& db) { return outcome<job_page>(db.list(q)); });
    },
    [=](job_stats_atom, job_scope& scope) {
      return engine.template read<job_counts>([=](auto& db) { return outcome<job_counts>(db.counts(scope)); });
    },
    [=](job_sweep_atom, job_backoff backoff) {
      return engine.template write<int64_t>([=](auto& db) { return db.sweep(backoff); });
    },
    [=](job_release_atom, job_release& r) {
      return engine.template write<int64_t>([r = std::move(r)](auto& db) { return db.release(r); });
    },
  };
}

} // namespace troupe::io::job_store
