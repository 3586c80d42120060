// The workspaces' REST and WebSocket surface (workspace-stream.md §4, §5): commands, publishing,
// reading a log and streaming it, each a thin adapter onto the workspace logs.
#pragma once

#include "io/router.hpp"
#include "io/workspace_surface.hpp"

#include <memory>

namespace troupe::io {

void add_workspace_routes(router& routes, std::shared_ptr<const workspace_surface> surface);

} // namespace troupe::io
