// Who may send a body: the edge asks before it reads one (http_server_options::admit_head), with the
// same checks each surface's routes apply to the whole request, so a caller that is not admitted is
// refused from its head alone and costs no body's worth of reading, memory or parsing.
#pragma once

#include "io/http_types.hpp"
#include "io/workspace_surface.hpp"
#include "protocol/config.hpp"

#include <functional>
#include <memory>
#include <optional>

namespace troupe::io {

std::function<std::optional<http_response>(const http_request& head)>
head_admission(const protocol::config& config, std::shared_ptr<const workspace_surface> workspaces);

} // namespace troupe::io
