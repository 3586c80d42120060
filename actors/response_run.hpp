// The Responses executor (responses.md §4): one actor per response runs its rounds, its gateway
// tool calls and its persistence, and renders it as Responses stream events.
#pragma once

#include "actors/agent_loop.hpp"
#include "actors/atoms.hpp"
#include "actors/event_sink.hpp"
#include "actors/messages.hpp"
#include "actors/response_store.hpp"
#include "actors/model_port.hpp"
#include "actors/tool_port.hpp"
#include "protocol/mcp.hpp"
#include "protocol/responses_request.hpp"
#include "protocol/responses_stream.hpp"

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

namespace troupe {

class tool_router;

struct response_environment {
  std::shared_ptr<model_port> model;
  response_store_actor store;
  std::shared_ptr<tool_router> tools; // the configured MCP servers
  // The search tools' providers (RS-27); null: not configured.
  std::shared_ptr<tool_port> web_search;
  std::shared_ptr<tool_port> file_search;
  protocol::loop_settings loop = protocol::loop_settings::responses();
};

// An MCP server as one request uses it (RS-30..RS-33).
struct mcp_binding {
  std::string label;
  std::vector<protocol::mcp_tool> tools; // after allowed_tools
  protocol::responses::approval_policy require_approval;
  bool listed = false;                   // the history already lists it (RS-32)
  std::string error;                     // why it cannot be listed
  bool declared = false;                 // the request's own server (server_url): response_job::declared
};

// Everything a response needs to run, resolved by the edge: the validated request, the stored
// history it continues (RS-20), its own input with references resolved, and its MCP servers.
struct response_job {
  protocol::responses::request req;
  std::string id;
  int64_t created_at = 0;
  std::vector<protocol::responses::item> history;
  std::vector<protocol::responses::item> input;
  int64_t conversation_revision = -1;
  std::vector<mcp_binding> servers;
  std::string owner; // the caller's response_owner::key: the stored rows are its alone
  std::string node_id; // the cluster node that runs it (response_row::node_id)
  // The request-declared servers (RS-30), started for this response and stopped when its run ends.
  std::shared_ptr<tool_router> declared;
};

// How a response ended, for the one who waits on it (a non-streaming POST, RS-43).
struct response_end {
  protocol::responses::response_status status = protocol::responses::response_status::completed;
  std::string snapshot; // the response object
  bool failed = false;  // run failure: `error` says what the HTTP answer is
  problem error;
};

using response_run_actor = caf::typed_actor<
  caf::reacts_to<start_atom>,
  // A background response is cancelled (RS-9): the answer is the cancelled object.
  caf::replies_to<cancel_atom>::with<std::string>,
  // The foreground client went away (RS-42): stop at once and store nothing.
  caf::reacts_to<disconnect_atom>,
  // The client stall check (RS-39): the acknowledgements counted when it was armed.
  caf::reacts_to<stall_atom, uint64_t>,
  // A backlogged client's queue has room again (RS-39).
  caf::reacts_to<drained_atom>,
  // Adds a subscriber of events with sequence_number > after. A subscriber gets
  // (event_atom, std::vector<stream_event>) — answered with a bool when the run waits on it
  // (foreground) — and then (run_end_atom, response_end).
  caf::replies_to<subscribe_atom, caf::actor, int64_t>::with<bool>,
  // The response object as it stands (RS-5: open items with partial content).
  caf::replies_to<snapshot_atom>::with<std::string>>::extend_with<loop_actor>;

// The stored row of a response not yet started (RS-55): its history and input, its queued object.
response_row queued_row(const response_job& job);

// Spawns a response's run; it waits for start_atom. `waiter` (may be null) is its first subscriber
// and, for a foreground response, the one it waits on; `sink` (may be null) is the streaming
// client, written to directly, whose backlog holds a foreground run back (RS-39). When it ends it
// tells `registry` (run_ended_atom, its id).
response_run_actor spawn_response_run(caf::actor_system& sys, std::shared_ptr<const response_environment> env,
                                      caf::actor registry, response_job job, caf::actor waiter,
                                      std::shared_ptr<event_sink> sink = nullptr);

// A store failure as the Responses gateway reports it.
problem store_failure(const caf::error& err);
// A conversation store failure: a missing conversation is named by `id` (RS-11).
problem conversation_failure(const caf::error& err, const std::string& id);

} // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::response_end)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::protocol::responses::stream_event)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<troupe::protocol::responses::stream_event>)
