// The web port's adapter (actors/web_port.hpp): HTTP/1.1 and HTTPS (the system's CA certificates,
// host names checked) from one actor and one Asio thread of its own. An answer is read whole, up to
// 32 MiB; past its timeout a request fails as "timed out".
#pragma once

#include "actors/web_port.hpp"

#include <caf/actor_system.hpp>

namespace troupe::io {

web_port_actor spawn_web_client(caf::actor_system& sys);

} // namespace troupe::io
