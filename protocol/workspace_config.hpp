// The `workspaces` key of troupe's configuration (workspace-stream.md WS-5, WS-12, WS-32, WS-40,
// WS-47, WS-56, WS-59, WS-112): event and feedback types, credentials and the log's limits.
#pragma once

#include "protocol/config_reader.hpp"
#include "protocol/workspace_actor.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::protocol {

// WS-12: a declared event type and the JSON Schema of its fields.
struct workspace_event_type {
  std::string name;
  std::string schema = "{}"; // JSON text
  bool published_by_runs = false;
};

// WS-32: a feedback type, the target kinds it may be given on and the schema of its value.
struct workspace_feedback_type {
  std::string name;
  std::vector<std::string> targets; // run | firing | chain
  std::string schema = "{}";
};

// WS-59: a bearer token (by its SHA-256) mapped to a tenant, an actor and the workspaces it may use.
struct workspace_credential {
  std::string token_sha256; // lowercase hex
  std::string tenant;
  workspace_actor actor;
  std::string client_id;
  bool all_workspaces = false;
  std::vector<std::string> workspaces;
};

struct workspaces_config {
  std::vector<workspace_event_type> event_types;
  std::vector<workspace_feedback_type> feedback_types;
  std::vector<workspace_credential> credentials;
  int max_depth = 8;                              // WS-112
  double hello_timeout = 10;                      // stream.hello_timeout, seconds (WS-47)
  int64_t outbox_frames = 1000;                   // stream.outbox_frames (WS-56)
  // stream.client_stall_timeout, seconds: how long a full outbox may stay full, nothing written to a
  // client that has more coming, before the client is not keeping up (WS-56, WS-133).
  double client_stall_timeout = 10;
  double command_result_retention = 7 * 86400.0;  // command_results.retention, seconds (WS-40)
  double log_idle_timeout = 300;                  // a log actor stops after this long unused (WS-128)
};

// Reads `workspaces` (absent: the defaults); each bad member adds an error naming its JSON path.
void read_workspaces_config(config_reader& section, workspaces_config& into);

} // namespace troupe::protocol
