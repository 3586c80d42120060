// The approval registry (AS-42, AS-81): one per node. It holds the pending approvals, persists every
// one on creation and on each transition before answering, runs their timers, and wakes the run
// waiting on each. Pending approvals survive a restart: they are loaded and re-armed at start.
//
// In a cluster (CJ-26) an approval may be resolved on any node: a resolution lands in the store only
// while the approval is pending there, so one of concurrent resolutions wins and the rest are told
// it is not found. The resolving node then tells the node whose run waits (through cluster_peers),
// and that node also reads its waited approvals again every `poll_seconds`, in case the message is
// lost.
#pragma once

#include "actors/atoms.hpp"
#include "actors/cluster_messages.hpp"
#include "actors/messages.hpp"
#include "actors/store.hpp"
#include "actors/wakeups.hpp"

#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

namespace troupe {

using approval_registry_actor = caf::typed_actor<
  // Opens the approval of a gated call, or finds the one an earlier attempt of the same run opened for
  // the same tool with canonically equal arguments (AS-81); answers the record, pending or resolved.
  caf::replies_to<open_approval_atom, protocol::approval_record>::with<protocol::approval_record>,
  // Answered once the approval is resolved: approved, denied or expired.
  caf::replies_to<await_atom, std::string>::with<protocol::approval_record>,
  // Approves (true) or denies (false) with a reason ("" = the default); errc::not_found when the
  // request is unknown or already resolved. Exactly one resolution wins.
  caf::replies_to<resolve_atom, std::string, bool, std::string>::with<protocol::approval_record>,
  // A run ended: its pending approvals become denied with this reason (run_cancelled, run_terminated).
  caf::reacts_to<run_ended_atom, std::string, std::string>,
  caf::reacts_to<expire_atom, std::string>,
  // Another node resolved the approval (CJ-26): read it again and wake whoever waits on it here.
  caf::reacts_to<wake_atom, std::string>,
  // The poll of the waited approvals (every poll_seconds).
  caf::reacts_to<tick_atom>>;

struct approval_options {
  cluster_peers_actor peers; // the other nodes; invalid outside a cluster or without remoting
  notifier_actor notifier;   // tells every node of a resolution (troupe_approval); invalid on one node
  double poll_seconds = 0;   // 0: no poll (one process owns the store)
};

approval_registry_actor spawn_approval_registry(caf::actor_system& sys, store_actor store,
                                                approval_options options = {});

} // namespace troupe
