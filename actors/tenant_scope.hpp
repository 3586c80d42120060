// The caller's tenant scope (AS-84) as a message the store ports take: the run store's and the jobs'.
#pragma once

#include "protocol/tenant_scope.hpp"

#include <caf/allowed_unsafe_message_type.hpp>

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::protocol::tenant_scope)
