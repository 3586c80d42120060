#include "actors/errors.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>

namespace troupe {

caf::error make_error(problem p) {
  auto code = static_cast<uint8_t>(p.code);
  return caf::error(code, errc_category, caf::make_message(std::move(p)));
}

problem problem_of(const caf::error& err) {
  if (err.category() == errc_category && err.context().match_elements<problem>())
    return err.context().get_as<problem>(0);
  if (err.category() == errc_category)
    return {static_cast<errc>(err.code()), to_string(static_cast<errc>(err.code())), {}, {}};
  return {errc::internal, "internal error (" + std::to_string(err.code()) + ")", {}, {}};
}

errc code_of(const caf::error& err) {
  if (err.category() != errc_category)
    return errc::internal;
  return static_cast<errc>(err.code());
}

std::string message_of(const caf::error& err) {
  return problem_of(err).message;
}

void add_error_category(caf::actor_system_config& cfg) {
  cfg.add_error_category(errc_category, [](uint8_t code, caf::atom_value, const caf::message& context) {
    std::string text = "troupe: ";
    text += to_string(static_cast<errc>(code));
    if (context.match_elements<problem>()) {
      text += " (";
      text += context.get_as<problem>(0).message;
      text += ")";
    }
    return text;
  });
}

} // namespace troupe
