// What the workspace surfaces (REST and WebSocket) share: the logs, the event types, the
// configuration, and the one way a caller's command is addressed to a log (WS-25, WS-38).
#pragma once

#include "actors/workspace_log.hpp"
#include "io/http_types.hpp"
#include "protocol/workspace_commands.hpp"

#include <caf/actor_system.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace troupe::io {

struct workspace_surface {
  caf::actor_system* sys = nullptr;
  workspaces_actor logs;
  std::shared_ptr<const protocol::reflexr::event_registry> types;
  protocol::workspaces_config config;
  std::vector<std::string> service_tokens;
  bool open = false; // no credential of any kind is configured (protocol::is_open)
};

// The command `request` from `caller` for the log `key`, stamped with the time it arrives and the
// trace context of its append (a child of the request's `traceparent`, WS-20).
workspace_command address_command(const workspace_surface& s, const protocol::reflexr::workspace_caller& caller,
                                  const workspace_key& key, protocol::reflexr::command_request request,
                                  std::string_view traceparent);

// WS-59/WS-60: the caller allowed to use `workspace_id`, or the refusal to answer with (401, 403, or
// 422 for an id that cannot name a workspace).
std::optional<protocol::reflexr::workspace_caller> admit(const workspace_surface& s, const http_request& req,
                                                         const std::string& workspace_id,
                                                         std::optional<http_response>& refusal);

// The WebSocket of one workspace (workspace-stream.md §4).
void open_workspace_stream(std::shared_ptr<const workspace_surface> s, const http_request& req,
                           std::shared_ptr<http_exchange> ex);

} // namespace troupe::io
