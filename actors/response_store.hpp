// The Responses gateway's store port (responses.md §10): responses, items shared by reference,
// conversations with ordered membership, and the durable event log of background responses. Every
// write is durable before it is answered. Adapters live in io/ (SQLite, PostgreSQL).
#pragma once

#include "actors/atoms.hpp"
#include "protocol/responses_request.hpp"

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace troupe {

// Who a stored response or conversation belongs to: the caller that created it (issue 15 finding 9).
// Every read, continuation, change and delete names its caller, and another owner's object is
// answered exactly like a missing one. `key` is "" for the one owner of an open service.
struct response_owner {
  std::string key;
};

// One item by its public id; `json` is the whole item object (RS-17).
struct stored_item {
  std::string id;
  std::string json;
};

// One client-facing event of a background response (RS-55).
struct response_event {
  int64_t sequence = 0;
  std::string json;
};

// A stored response (RS-53). `history_item_ids` is the complete model-facing history after it
// (RS-20); its first `input_count` ids are what input_items lists (RS-8).
struct response_row {
  std::string id;
  int64_t created_at = 0; // epoch seconds
  protocol::responses::response_status status = protocol::responses::response_status::queued;
  bool background = false;
  std::string model;
  std::string snapshot = "{}"; // the response object as GET returns it
  std::string request = "{}";  // the validated request: a queued background response runs from it
  std::vector<std::string> history_item_ids;
  int64_t input_count = 0;
  std::string previous_response_id;
  std::string conversation_id;
  std::string owner; // response_owner::key
  std::string node_id; // the cluster node that runs it while unfinished; "" on an embedded store
};

// One write of a response in one transaction: the row (inserted or replaced), the new items
// (inserted, owned like the row, unless their id is stored: items are immutable), events appended to its log, and an
// append to a conversation guarded by its revision (RS-54).
struct response_commit {
  response_row response;
  std::vector<stored_item> items;
  std::vector<response_event> events;
  std::string conversation_id;                   // empty: no conversation append
  std::vector<std::string> conversation_append;  // item ids, in order
  int64_t expected_revision = -1;                // the revision read at rehydration
  bool events_only = false; // only append `events` (and `items`) to the stored response's log
};

// What a conversation is, with its revision (RS-11, RS-54).
struct conversation_row {
  std::string id;
  int64_t created_at = 0;
  std::string metadata = "{}";
  int64_t revision = 0;
  std::string owner; // response_owner::key
};

// A page of items in a listing order (RS-8, RS-12).
struct item_page {
  std::vector<stored_item> items;
  bool has_more = false;
};

// Which page: `limit` items after the item `after` (exclusive; empty = from the start) in order
// asc or desc. An `after` that is not in the list answers errc::not_found.
struct page_request {
  int64_t limit = 20;
  bool ascending = false;
  std::string after;
};

// What a store's errc::not_found names, as its problem's kind: callers tell a missing conversation
// from a missing `after` item by it, never by the message.
inline constexpr const char* missing_response = "response_not_found";
inline constexpr const char* missing_conversation = "conversation_not_found";
inline constexpr const char* missing_item = "item_not_found";
// What a store's errc::conflict names when a save comes after the response ended (another node
// failed or cancelled it, CJ-16): nothing of that save is kept.
inline constexpr const char* response_already_ended = "response_already_ended";

using response_store_actor = caf::typed_actor<
  // Writes a response (creation, snapshot updates, the final commit) owned by its row's owner. A
  // conversation append whose revision moved answers errc::conflict and writes nothing; otherwise
  // the new revision (or -1).
  caf::replies_to<save_response_atom, response_commit>::with<int64_t>,
  // The stored row; errc::not_found when there is none, or it is another owner's (so below).
  caf::replies_to<get_response_atom, std::string, response_owner>::with<response_row>,
  // Items by id, in the order asked; ids not stored, or stored by another owner, are left out.
  caf::replies_to<get_items_atom, std::vector<std::string>, response_owner>::with<std::vector<stored_item>>,
  // A page of a response's input listing (history_item_ids[0, input_count)).
  caf::replies_to<input_items_atom, std::string, response_owner, page_request>::with<item_page>,
  // Deletes a response, its events and the items nothing else references (RS-7).
  caf::replies_to<delete_response_atom, std::string, response_owner>::with<bool>,
  // A background response's events with sequence > after, in order.
  caf::replies_to<response_events_atom, std::string, int64_t>::with<std::vector<response_event>>,
  // Every stored response still queued or in_progress (RS-55: failed at startup).
  caf::replies_to<unfinished_atom>::with<std::vector<response_row>>,
  // Conversations (RS-11, RS-12), owned by the row's owner. Creating stores the items (by reference
  // when stored) as members.
  caf::replies_to<create_conversation_atom, conversation_row, std::vector<stored_item>>::with<conversation_row>,
  caf::replies_to<get_conversation_atom, std::string, response_owner>::with<conversation_row>,
  // Replaces the metadata; bumps the revision.
  caf::replies_to<update_conversation_atom, std::string, response_owner, std::string>::with<conversation_row>,
  caf::replies_to<delete_conversation_atom, std::string, response_owner>::with<bool>,
  // Appends members; an id already a member answers errc::conflict naming it, nothing added.
  caf::replies_to<add_conversation_items_atom, std::string, response_owner,
                  std::vector<stored_item>>::with<std::vector<stored_item>>,
  // Every member in order, with the revision read (RS-20 rehydration).
  caf::replies_to<conversation_items_atom, std::string, response_owner>::with<conversation_row,
                                                                            std::vector<stored_item>>,
  caf::replies_to<list_conversation_items_atom, std::string, response_owner, page_request>::with<item_page>,
  // Detaches one member (errc::not_found when it is none); the conversation after it.
  caf::replies_to<remove_conversation_item_atom, std::string, response_owner, std::string>::with<conversation_row>>;

} // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::response_owner)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::stored_item)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::response_event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::response_row)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::response_commit)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::conversation_row)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::item_page)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::page_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<troupe::stored_item>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<troupe::response_event>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<troupe::response_row>)
