// The Responses store port's messages (actors/response_store.hpp) mapped onto responses_db
// (io/response_store_db.hpp), once for both adapters. `Engine` says how an operation reaches the
// database, as io/run_store_port.hpp describes (write<T>, tell, read<T>; `engine.self` is the actor).
// `extra` are handlers an adapter's actor adds to the port's (SQLite's and the workers' flush).
#pragma once

#include "actors/errors.hpp"
#include "actors/response_store.hpp"
#include "io/response_store_db.hpp"

#include <caf/all.hpp>

#include <memory>
#include <optional>
#include <utility>

namespace troupe::io::response_store {

template <class T>
outcome<T> found(std::optional<T> v, caf::error missing) {
  if (v)
    return std::move(*v);
  return missing;
}

template <class Actor, class Engine, class... Extra>
typename Actor::behavior_type port_behavior(Engine engine, Extra... extra) {
  using members = std::pair<conversation_row, std::vector<stored_item>>;
  return {
    extra...,
    // ---- Writes: answered once durable ----
    [=](save_response_atom, response_commit& c) {
      return engine.template write<int64_t>([c = std::move(c)](auto& db) { return db.save(c); });
    },
    [=](delete_response_atom, std::string& id, const response_owner& owner) {
      return engine.template write<bool>([id, owner](auto& db) { return db.delete_response(id, owner); });
    },
    [=](create_conversation_atom, conversation_row& row, std::vector<stored_item>& items) {
      return engine.template write<conversation_row>(
        [row = std::move(row), items = std::move(items)](auto& db) { return db.create_conversation(row, items); });
    },
    [=](update_conversation_atom, std::string& id, const response_owner& owner, std::string& metadata) {
      return engine.template write<conversation_row>(
        [id, owner, metadata](auto& db) { return db.update_conversation(id, owner, metadata); });
    },
    [=](delete_conversation_atom, std::string& id, const response_owner& owner) {
      return engine.template write<bool>([id, owner](auto& db) { return db.delete_conversation(id, owner); });
    },
    [=](add_conversation_items_atom, std::string& id, const response_owner& owner, std::vector<stored_item>& items) {
      return engine.template write<std::vector<stored_item>>(
        [id, owner, items = std::move(items)](auto& db) { return db.add_conversation_items(id, owner, items); });
    },
    [=](remove_conversation_item_atom, std::string& id, const response_owner& owner, std::string& item_id) {
      return engine.template write<conversation_row>(
        [id, owner, item_id](auto& db) { return db.remove_conversation_item(id, owner, item_id); });
    },
    // ---- Reads: after every write sent before them ----
    [=](get_response_atom, std::string& id, const response_owner& owner) {
      return engine.template read<response_row>(
        [=](auto& db) { return found(db.get_response(id, owner), response_not_found(id)); });
    },
    [=](get_items_atom, std::vector<std::string>& ids, const response_owner& owner) {
      return engine.template read<std::vector<stored_item>>(
        [=](auto& db) { return outcome<std::vector<stored_item>>(db.items(ids, owner)); });
    },
    [=](input_items_atom, std::string& id, const response_owner& owner, const page_request& p) {
      return engine.template read<item_page>([=](auto& db) { return db.input_items(id, owner, p); });
    },
    [=](response_events_atom, std::string& id, int64_t after) {
      return engine.template read<std::vector<response_event>>(
        [=](auto& db) { return outcome<std::vector<response_event>>(db.events(id, after)); });
    },
    [=](unfinished_atom) {
      return engine.template read<std::vector<response_row>>(
        [](auto& db) { return outcome<std::vector<response_row>>(db.unfinished()); });
    },
    [=](get_conversation_atom, std::string& id, const response_owner& owner) {
      return engine.template read<conversation_row>(
        [=](auto& db) { return found(db.get_conversation(id, owner), conversation_not_found(id)); });
    },
    // Two values, which read<T> does not carry: the read joins the engine's batch like a write nobody
    // waits for, and its answer goes once that batch ended.
    [=](conversation_items_atom, std::string& id, const response_owner& owner) {
      auto answer = engine.self->template make_response_promise<conversation_row, std::vector<stored_item>>();
      auto out = std::make_shared<outcome<members>>(caf::error{});
      engine.tell([=](auto& db) { *out = db.conversation_items(id, owner); },
                  [answer, out](bool committed) mutable {
                    if (!committed)
                      answer.deliver(make_error(errc::unavailable, "response store: the read could not be carried out"));
                    else if (auto both = std::get_if<members>(out.get()))
                      answer.deliver(std::move(both->first), std::move(both->second));
                    else
                      answer.deliver(std::get<caf::error>(*out));
                  });
      return caf::result<conversation_row, std::vector<stored_item>>(answer);
    },
    [=](list_conversation_items_atom, std::string& id, const response_owner& owner, const page_request& p) {
      return engine.template read<item_page>([=](auto& db) { return db.list_conversation_items(id, owner, p); });
    },
  };
}

} // namespace troupe::io::response_store
