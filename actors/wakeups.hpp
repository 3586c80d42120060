// CJ-10: how a node tells the others that work became ready, a workspace log moved or an approval
// was resolved. On PostgreSQL
// the edge's notifier sends pg_notify after the commit that made it so, never inside a data
// transaction, and merges wake-ups of one subject; a lost one costs the others one poll interval at
// most.
#pragma once

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>
#include <caf/send.hpp>
#include <caf/typed_actor.hpp>

#include <string>

namespace troupe {

using notify_atom = caf::atom_constant<caf::atom("notify")>;

// CJ-10's channel for claimable work, and its payload for agent runs.
inline constexpr char work_channel[] = "troupe_work";
inline constexpr char run_work[] = "run";
// CJ-10's channel for workspace logs; its payload is protocol::workspace_wakeup's.
inline constexpr char workspace_channel[] = "troupe_ws";
// CJ-10's channel for jobs that became ready; its payload is the job's type.
inline constexpr char jobs_channel[] = "troupe_jobs";
// CJ-26: an approval was resolved; its payload is the approval's id.
inline constexpr char approval_channel[] = "troupe_approval";

// Sends (channel, payload) to every node listening. Of the wake-ups of one (channel, subject) told
// within the notifier's window only the last payload goes out (a log's newest head, say).
using notifier_actor =
  caf::typed_actor<caf::reacts_to<notify_atom, std::string /*channel*/, std::string /*subject*/, std::string>>;

// Tells the other nodes that runs became claimable (nothing without a notifier: one node).
inline void announce_runs(const notifier_actor& notifier) {
  if (notifier)
    caf::anon_send(notifier, notify_atom::value, std::string(work_channel), std::string(run_work),
                   std::string(run_work));
}

} // namespace troupe
