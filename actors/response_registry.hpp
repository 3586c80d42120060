// The Responses gateway's registry (responses.md §3, §4), the counterpart of run_registry: it
// admits a request (the history it continues, its input references, its MCP servers), launches
// its run, queues background responses (RS-55), holds one run per conversation (RS-54), and is the
// one way to find a live response. The edge parses, asks it, and renders what it answers.
#pragma once

#include "actors/cluster_messages.hpp"
#include "actors/response_run.hpp"
#include "protocol/config.hpp"

#include <caf/timestamp.hpp>
#include <caf/typed_actor.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace troupe {

class mcp_transport;

struct response_registry_options {
  std::size_t max_active_background = 64; // responses.background.max_active (RS-55)
  double mcp_connect_timeout_seconds = 10; // a declared server lists its tools within it (RS-32)
  double mcp_call_timeout_seconds = 60;
  protocol::mcp_config mcp;                 // which declared servers are allowed (RS-30)
  // Connects a request-declared MCP server: the edge's streamable-HTTP transport.
  std::function<std::unique_ptr<mcp_transport>(const protocol::mcp_server_config&)> declared_transport;
  // The cluster node's id, stored with each background response it runs so that the others fail
  // what it leaves unfinished when it dies (CJ-16); empty on an embedded store.
  std::function<std::string()> node_id;
  // How often a stream of a response another node runs reads the store (CJ-27); zero: never.
  caf::timespan tail{};
  // The other nodes, whose feeds bring such a stream the response's events live (CJ-27).
  cluster_peers_actor peers;
};

// Opens a streaming client's event stream. Asked once every check passed, so a refused request is
// still answered with plain JSON (RS-1).
using sink_opener = std::function<std::shared_ptr<event_sink>()>;

// How a created response answers its client: a streaming one got every event through its sink;
// any other gets `end` (the object, RS-4; a queued background one's, RS-55; or the failure, RS-43).
struct response_answer {
  bool streamed = false;
  response_end end;
};

// A stream resumed with GET ?stream=true (RS-6): the events to write after the requested sequence,
// or, while the run lives, `following` (the relay gets them from the run itself).
struct response_replay {
  bool following = false;
  std::vector<protocol::responses::stream_event> events;
};

using response_registry_actor = caf::typed_actor<
  caf::replies_to<create_response_atom, response_job, sink_opener>::with<response_answer>,
  // The foreground client of the response went away (RS-42).
  caf::reacts_to<disconnect_atom, std::string>,
  // The response object as it stands (RS-5).
  caf::replies_to<get_response_atom, std::string, response_owner>::with<std::string>,
  caf::replies_to<subscribe_atom, std::string, response_owner, int64_t, caf::actor>::with<response_replay>,
  // CJ-27: a feed for another node's stream; the response's run here sends `relay` what it delivered
  // after the sequence, then follows. False when it does not run here (the owner was checked there).
  caf::replies_to<subscribe_atom, std::string, int64_t, caf::actor>::with<bool>,
  // RS-9: the cancelled object.
  caf::replies_to<cancel_atom, std::string, response_owner>::with<std::string>,
  caf::replies_to<delete_response_atom, std::string, response_owner>::with<bool>,
  // POST /v1/responses/compact (RS-52): the compaction object.
  caf::replies_to<compact_atom, protocol::responses::request, response_owner>::with<std::string>,
  // Conversation edits are refused while a response holds the conversation (RS-54).
  caf::replies_to<add_conversation_items_atom, std::string, response_owner, std::vector<stored_item>>::with<
    std::vector<stored_item>>,
  caf::replies_to<remove_conversation_item_atom, std::string, response_owner, std::string>::with<conversation_row>,
  // From a run: it ended, so its conversation is free and the next background response may start.
  caf::reacts_to<run_ended_atom, std::string>>;

response_registry_actor spawn_response_registry(caf::actor_system& sys, std::shared_ptr<const response_environment> env,
                                                response_registry_options options);



} // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::response_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::sink_opener)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::response_answer)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::response_replay)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::protocol::responses::request)
