// The workspace store port's messages (actors/workspace_store.hpp) mapped onto workspace_db
// (io/workspace_store_db.hpp), once for both adapters. `Engine` says how an operation reaches the
// database (io/sqlite_support.hpp's sqlite::engine, io/pg_worker.hpp's pg::engine):
//   engine.template write<T>(fn)  a write answered once durable; fn(db) returns outcome<T>
//   engine.template read<T>(fn)   a read that sees every write sent before it; fn(db) returns outcome<T>
// `extra` are handlers an adapter's actor adds to the port's (its flush).
#pragma once

#include "actors/workspace_store.hpp"
#include "io/workspace_store_db.hpp"

#include <caf/all.hpp>

namespace troupe::io::workspace_store {

template <class Actor, class Engine, class... Extra>
typename Actor::behavior_type port_behavior(Engine engine, Extra... extra) {
  return {
    extra...,
    // Commands join the group commit: their effects and results are durable before any answer.
    [=](command_atom, workspace_command& c) {
      return engine.template write<workspace_outcome>([c = std::move(c)](auto& db) { return db.carry_out(c); });
    },
    [=](read_atom, workspace_key& key, workspace_read& r) {
      return engine.template read<workspace_slice>(
        [=](auto& db) { return outcome<workspace_slice>(db.read(key, r)); });
    },
    [=](head_atom, workspace_key& key) {
      return engine.template read<int64_t>([=](auto& db) { return outcome<int64_t>(db.head(key)); });
    },
    [=](own_atom, workspace_key& key, std::string& node_id) {
      return engine.template write<workspace_owner>([=](auto& db) { return db.own(key, node_id); });
    },
    [=](disown_atom, workspace_key& key, workspace_owner& owner) {
      return engine.template write<bool>([=](auto& db) { return db.disown(key, owner); });
    },
    [=](prune_atom, double retention) {
      return engine.template write<bool>([=](auto& db) {
        db.prune(retention);
        return outcome<bool>(true);
      });
    },
  };
}

} // namespace troupe::io::workspace_store
