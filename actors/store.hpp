// The store port as an actor: what the loop persists. Adapters live in io/ (SQLite).
#pragma once

#include "actors/atoms.hpp"
#include "actors/messages.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

namespace troupe {

using store_actor = caf::typed_actor<
  // Upserts the session, adding one run to its count.
  caf::reacts_to<save_session_atom, session_record>,
  // The stored record of (tenant_key, user_key, session_id); not_found when there is none.
  caf::replies_to<get_session_atom, std::string, std::string, std::string>::with<session_record>,
  // Upserts a run's record (created_at is kept from the first save).
  caf::reacts_to<save_run_atom, run_record>,
  // The stored record of a run; not_found when there is none.
  caf::replies_to<get_run_atom, std::string>::with<run_record>,
  // Commits the writes received so far in one transaction (sent by the store to itself).
  caf::reacts_to<flush_atom>>;

} // namespace troupe
