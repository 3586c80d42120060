// Identifiers: UUIDv4 strings and random lowercase hex.
#pragma once

#include <cstddef>
#include <string>

namespace troupe::protocol {

std::string uuid4();
std::string random_hex(std::size_t chars);

} // namespace troupe::protocol
