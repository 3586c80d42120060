// An in-memory Responses store for actor tests: the port's contract (actors/response_store.hpp) kept in
// maps, with the conversation revision guard of RS-54, and counts a test can read once it has asked.
#pragma once

#include "actors/errors.hpp"
#include "actors/response_store.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace troupe::testing {

struct fake_response_store_state {
  std::string name_for_logs;
  static inline const char* name = "fake_response_store";
  std::map<std::string, response_row> responses;
  std::map<std::string, stored_item> items;
  std::map<std::string, std::string> item_owner;
  std::map<std::string, std::vector<response_event>> events;
  std::map<std::string, conversation_row> conversations;
  std::map<std::string, std::vector<std::string>> members;

  const response_row* response(const std::string& id, const response_owner& o) const {
    auto it = responses.find(id);
    return it == responses.end() || it->second.owner != o.key ? nullptr : &it->second;
  }
  conversation_row* conversation(const std::string& id, const response_owner& o) {
    auto it = conversations.find(id);
    return it == conversations.end() || it->second.owner != o.key ? nullptr : &it->second;
  }
  void keep(const stored_item& item, const std::string& owner) {
    if (items.emplace(item.id, item).second) // items are immutable
      item_owner[item.id] = owner;
  }
  std::vector<stored_item> member_items(const std::string& conversation) const {
    std::vector<stored_item> out;
    if (auto m = members.find(conversation); m != members.end())
      for (auto& id : m->second)
        out.push_back(items.at(id));
    return out;
  }
};

inline caf::error fake_not_found(const std::string& what) {
  return make_error(errc::not_found, what + " not found");
}

inline item_page page_of(std::vector<stored_item> all, const page_request& p) {
  if (!p.ascending)
    std::reverse(all.begin(), all.end());
  std::size_t from = 0;
  if (!p.after.empty()) {
    auto it = std::find_if(all.begin(), all.end(), [&](const stored_item& i) { return i.id == p.after; });
    from = it == all.end() ? all.size() : static_cast<std::size_t>(it - all.begin()) + 1;
  }
  item_page page;
  for (auto i = from; i < all.size() && static_cast<int64_t>(page.items.size()) < p.limit; ++i)
    page.items.push_back(all[i]);
  page.has_more = from + page.items.size() < all.size();
  return page;
}

// `name` is for logs; that the store takes an argument at all matters: CAF 0.17 binds a null empty
// tuple to a function spawned without any (UBSan reports it).
inline response_store_actor::behavior_type
fake_response_store(response_store_actor::stateful_pointer<fake_response_store_state> self, std::string name) {
  self->state.name_for_logs = std::move(name);
  using result_row = caf::result<response_row>;
  return {
    [=](save_response_atom, response_commit& c) -> caf::result<int64_t> {
      auto& st = self->state;
      int64_t revision = -1;
      if (!c.conversation_id.empty()) {
        auto conv = st.conversations.find(c.conversation_id);
        if (conv == st.conversations.end())
          return fake_not_found("Conversation");
        if (c.expected_revision >= 0 && conv->second.revision != c.expected_revision)
          return make_error(errc::conflict, "Conversation changed");
        auto& m = st.members[c.conversation_id];
        m.insert(m.end(), c.conversation_append.begin(), c.conversation_append.end());
        revision = ++conv->second.revision;
      }
      for (auto& item : c.items)
        st.keep(item, c.response.owner);
      auto& log = st.events[c.response.id];
      log.insert(log.end(), c.events.begin(), c.events.end());
      if (!c.events_only)
        st.responses[c.response.id] = c.response;
      return revision;
    },
    [=](get_response_atom, const std::string& id, const response_owner& o) -> result_row {
      if (auto r = self->state.response(id, o))
        return *r;
      return fake_not_found("Response");
    },
    [=](get_items_atom, const std::vector<std::string>& ids, const response_owner& o) {
      std::vector<stored_item> out;
      for (auto& id : ids)
        if (auto it = self->state.items.find(id); it != self->state.items.end() && self->state.item_owner[id] == o.key)
          out.push_back(it->second);
      return out;
    },
    [=](input_items_atom, const std::string& id, const response_owner& o,
        const page_request& p) -> caf::result<item_page> {
      auto r = self->state.response(id, o);
      if (!r)
        return fake_not_found("Response");
      std::vector<stored_item> input;
      for (int64_t i = 0; i < r->input_count; ++i)
        input.push_back(self->state.items.at(r->history_item_ids[static_cast<std::size_t>(i)]));
      return page_of(std::move(input), p);
    },
    [=](delete_response_atom, const std::string& id, const response_owner& o) -> caf::result<bool> {
      if (!self->state.response(id, o))
        return fake_not_found("Response");
      self->state.responses.erase(id);
      self->state.events.erase(id);
      return true;
    },
    [=](response_events_atom, const std::string& id, int64_t after) {
      std::vector<response_event> out;
      for (auto& e : self->state.events[id])
        if (e.sequence > after)
          out.push_back(e);
      return out;
    },
    [=](unfinished_atom) {
      std::vector<response_row> out;
      for (auto& [id, r] : self->state.responses)
        if (protocol::responses::in_flight(r.status))
          out.push_back(r);
      return out;
    },
    [=](create_conversation_atom, conversation_row& row, std::vector<stored_item>& items) {
      auto& st = self->state;
      for (auto& item : items) {
        st.keep(item, row.owner);
        st.members[row.id].push_back(item.id);
      }
      st.conversations[row.id] = row;
      return row;
    },
    [=](get_conversation_atom, const std::string& id, const response_owner& o) -> caf::result<conversation_row> {
      if (auto c = self->state.conversation(id, o))
        return *c;
      return fake_not_found("Conversation");
    },
    [=](update_conversation_atom, const std::string& id, const response_owner& o,
        std::string& metadata) -> caf::result<conversation_row> {
      auto c = self->state.conversation(id, o);
      if (!c)
        return fake_not_found("Conversation");
      c->metadata = std::move(metadata);
      ++c->revision;
      return *c;
    },
    [=](delete_conversation_atom, const std::string& id, const response_owner& o) -> caf::result<bool> {
      if (!self->state.conversation(id, o))
        return fake_not_found("Conversation");
      self->state.conversations.erase(id);
      self->state.members.erase(id);
      return true;
    },
    [=](add_conversation_items_atom, const std::string& id, const response_owner& o,
        std::vector<stored_item>& items) -> caf::result<std::vector<stored_item>> {
      auto c = self->state.conversation(id, o);
      if (!c)
        return fake_not_found("Conversation");
      auto& m = self->state.members[id];
      for (auto& item : items) {
        if (std::find(m.begin(), m.end(), item.id) != m.end())
          return make_error(errc::conflict, "Item " + item.id + " is already in the conversation");
      }
      for (auto& item : items) {
        self->state.keep(item, o.key);
        m.push_back(item.id);
      }
      ++c->revision;
      return items;
    },
    [=](conversation_items_atom, const std::string& id,
        const response_owner& o) -> caf::result<conversation_row, std::vector<stored_item>> {
      auto c = self->state.conversation(id, o);
      if (!c)
        return fake_not_found("Conversation");
      return {*c, self->state.member_items(id)};
    },
    [=](list_conversation_items_atom, const std::string& id, const response_owner& o,
        const page_request& p) -> caf::result<item_page> {
      if (!self->state.conversation(id, o))
        return fake_not_found("Conversation");
      return page_of(self->state.member_items(id), p);
    },
    [=](remove_conversation_item_atom, const std::string& id, const response_owner& o,
        const std::string& item) -> caf::result<conversation_row> {
      auto c = self->state.conversation(id, o);
      if (!c)
        return fake_not_found("Conversation");
      auto& m = self->state.members[id];
      auto it = std::find(m.begin(), m.end(), item);
      if (it == m.end())
        return fake_not_found("Item");
      m.erase(it);
      ++c->revision;
      return *c;
    },
  };
}

} // namespace troupe::testing
