#include "protocol/response_phase.hpp"

namespace troupe::protocol::responses {

std::optional<run_phase> next_phase(run_phase phase, run_input input, bool background) {
  using p = run_phase;
  using in = run_input;
  if (ended(phase)) // only the end's delivery follows an end
    return phase == p::ending && input == in::told ? std::optional<run_phase>(p::over) : std::nullopt;
  switch (input) {
  case in::start:
    return phase == p::waiting ? std::optional<run_phase>(p::running) : std::nullopt;
  case in::summary_opened:
    return phase == p::running ? std::optional<run_phase>(p::summarizing) : std::nullopt;
  case in::summary_done:
    return phase == p::summarizing ? std::optional<run_phase>(p::running) : std::nullopt;
  case in::finish:
    return p::ending;
  case in::client_left:
    return background ? std::nullopt : std::optional<run_phase>(p::over);
  case in::told:
    return std::nullopt;
  }
  return std::nullopt;
}

} // namespace troupe::protocol::responses
