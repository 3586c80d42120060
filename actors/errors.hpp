// troupe::errc carried in caf::error values, and back.
#pragma once

#include "protocol/errors.hpp"

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/make_message.hpp>

#include <string>

namespace troupe {

inline constexpr caf::atom_value errc_category = caf::atom("troupe");

inline caf::error make_error(errc code, std::string message) {
  return caf::error(static_cast<uint8_t>(code), errc_category, caf::make_message(std::move(message)));
}

// The errc of an error (internal when it did not come from troupe).
errc code_of(const caf::error& err);

// The human-readable message an error carries (its context string when troupe made it).
std::string message_of(const caf::error& err);

} // namespace troupe
