#include "actors/errors.hpp"

#include <caf/message.hpp>

namespace troupe {

errc code_of(const caf::error& err) {
  if (err.category() != errc_category)
    return errc::internal;
  return static_cast<errc>(err.code());
}

std::string message_of(const caf::error& err) {
  if (err.category() == errc_category && err.context().match_elements<std::string>())
    return err.context().get_as<std::string>(0);
  return "internal error (" + std::to_string(err.code()) + ")";
}

} // namespace troupe
