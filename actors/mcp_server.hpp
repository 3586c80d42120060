// The mcp_server actor: one per configured MCP server. It owns the connection (through the
// transport port), correlates JSON-RPC ids, and restarts a server that exits or stops answering.
#pragma once

#include "actors/atoms.hpp"
#include "actors/mcp_transport.hpp"
#include "protocol/mcp.hpp"

#include <caf/actor_system.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <functional>
#include <string>
#include <vector>

namespace troupe {

// What /ready and /v1/tools report of a server (AS-65).
struct mcp_server_status {
  std::string name;
  std::string transport;
  std::string isolation;
  bool alive = false;
  std::string error; // why it is not alive, or a registration problem
  std::vector<protocol::mcp_tool> tools;
};

struct mcp_server_options {
  protocol::mcp_server_config config;
  double call_timeout_seconds = 120; // the server's timeout_seconds, else mcp.call_timeout_seconds (AS-64)
  double start_timeout_seconds = 30; // initialize and tools/list must answer within this
  int max_retries = 3;               // transport failures (AS-64)
  double retry_delay_seconds = 1;
  double restart_backoff_seconds = 0.5; // doubles per failed start, up to the cap
  double restart_backoff_max_seconds = 30;
  // Told every change of the status; runs on the actor's thread and must not block.
  std::function<void(const mcp_server_status&)> on_status;
};

using mcp_server_actor = caf::typed_actor<
  // Calls one of the server's tools by its own name with JSON arguments; answers the text the model
  // sees, "[MCP_ERROR] ..." on failure (AS-62, AS-64). The call id lets the caller cancel it.
  caf::replies_to<mcp_call_atom, std::string, std::string, std::string>::with<std::string>,
  // Cancels a call: the server gets notifications/cancelled when it was sent.
  caf::reacts_to<cancel_atom, std::string>,
  caf::replies_to<status_atom>::with<mcp_server_status>,
  // From the transport, tagged with the instance they belong to.
  caf::reacts_to<mcp_message_atom, uint64_t, std::string>,
  caf::reacts_to<mcp_closed_atom, uint64_t, std::string>,
  // Timers.
  caf::reacts_to<restart_atom, uint64_t>,
  caf::reacts_to<start_timeout_atom, uint64_t>,
  caf::reacts_to<timeout_atom, std::string, int>, // a call's attempt took too long
  caf::reacts_to<retry_atom, std::string>>;

// Spawned detached: closing a transport may wait for a child to exit.
mcp_server_actor spawn_mcp_server(caf::actor_system& sys, mcp_server_options options,
                                  mcp_transport_factory factory);

} // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::mcp_server_status)
