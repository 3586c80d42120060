// troupe's problems carried in caf::error values, and back: the one error model of every layer
// below the edge (protocol/errors.hpp).
#pragma once

#include "protocol/errors.hpp"

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/fwd.hpp>
#include <caf/meta/type_name.hpp>

#include <string>

namespace troupe {

inline constexpr caf::atom_value errc_category = caf::atom("troupe");

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, validation_issue& x) {
  return f(caf::meta::type_name("troupe.validation_issue"), x.loc, x.msg, x.type);
}

// A problem travels whole (code, message, param, kind, issues), also to another node.
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, problem& x) {
  return f(caf::meta::type_name("troupe.problem"), x.code, x.message, x.param, x.kind, x.issues,
           x.retry_after_seconds);
}

// The problem as a caf::error of troupe's category.
caf::error make_error(problem p);

inline caf::error make_error(errc code, std::string message) {
  return make_error(problem{code, std::move(message), {}, {}});
}

// The problem an error carries; an error that did not come from troupe is an internal one.
problem problem_of(const caf::error& err);

// The errc of an error (internal when it did not come from troupe).
errc code_of(const caf::error& err);

// The human-readable message an error carries.
std::string message_of(const caf::error& err);

// Registers troupe's category, so that `system().render(err)` reads "troupe: not_found (message)".
void add_error_category(caf::actor_system_config& cfg);

} // namespace troupe
