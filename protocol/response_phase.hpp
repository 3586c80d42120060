// A response run's life as named phases and one pure transition function (responses.md §4): the
// Responses executor (actors/response_run.cpp) asks it before every change of phase, and
// tests/protocol/test_response_phase.cpp checks it from a table.
#pragma once

#include <optional>

namespace troupe::protocol::responses {

enum class run_phase {
  waiting,     // spawned, not started: a background response waits for a slot (RS-55)
  running,     // its rounds and gateway calls
  summarizing, // a compaction summary round replaces the window (RS-51)
  ending,      // its terminal status is chosen; its commit is in flight (RS-53)
  over,        // its subscribers were told the end, or its foreground client left (RS-42)
};

enum class run_input {
  start,          // its turn came
  summary_opened, // a compaction is due before the next round
  summary_done,   // the summary arrived
  finish,         // completed, incomplete, failed or cancelled (RS-9)
  told,           // the end is stored (or nothing is stored) and every subscriber was told
  client_left,    // the client went away: only a foreground response stops, storing nothing (RS-42)
};

// The phase `input` leads to from `phase`; nullopt when it does not apply there and is ignored.
std::optional<run_phase> next_phase(run_phase phase, run_input input, bool background);

inline bool ended(run_phase p) { return p == run_phase::ending || p == run_phase::over; }

} // namespace troupe::protocol::responses
