// The Responses executor's phases (responses.md §4): every input in every phase, from one table.
#include "protocol/response_phase.hpp"

#include <catch2/catch.hpp>

#include <vector>

using namespace troupe::protocol::responses;

namespace {

struct row {
  run_phase from;
  run_input input;
  bool background;
  std::optional<run_phase> to;
};

constexpr auto waiting = run_phase::waiting;
constexpr auto running = run_phase::running;
constexpr auto summarizing = run_phase::summarizing;
constexpr auto ending = run_phase::ending;
constexpr auto over = run_phase::over;
constexpr std::nullopt_t ignored = std::nullopt;

} // namespace

TEST_CASE("a response run's phases follow one transition table", "[responses]") { // RS-9, RS-42, RS-51, RS-55
  const std::vector<row> table = {
    // Waiting for its turn: it starts, is cancelled (RS-55), or its foreground client leaves.
    {waiting, run_input::start, true, running},
    {waiting, run_input::finish, true, ending},
    {waiting, run_input::client_left, false, over},
    {waiting, run_input::client_left, true, ignored},
    {waiting, run_input::summary_opened, false, ignored},
    {waiting, run_input::summary_done, false, ignored},
    {waiting, run_input::told, false, ignored},
    // Running: a summary round, an end, or a foreground client that leaves (RS-42).
    {running, run_input::start, false, ignored},
    {running, run_input::summary_opened, false, summarizing},
    {running, run_input::summary_done, false, ignored},
    {running, run_input::finish, false, ending},
    {running, run_input::client_left, false, over},
    {running, run_input::client_left, true, ignored},
    {running, run_input::told, false, ignored},
    // Summarizing (RS-51): back to running once the summary is in, or ended meanwhile.
    {summarizing, run_input::summary_done, false, running},
    {summarizing, run_input::summary_opened, false, ignored},
    {summarizing, run_input::start, false, ignored},
    {summarizing, run_input::finish, true, ending},
    {summarizing, run_input::client_left, false, over},
    {summarizing, run_input::client_left, true, ignored},
    // Ending (RS-53): only the delivery of the end follows; a second end or a leaving client is moot.
    {ending, run_input::told, false, over},
    {ending, run_input::finish, false, ignored},
    {ending, run_input::client_left, false, ignored},
    {ending, run_input::start, true, ignored},
    {ending, run_input::summary_done, false, ignored},
    // Over: nothing applies.
    {over, run_input::start, false, ignored},
    {over, run_input::finish, false, ignored},
    {over, run_input::told, false, ignored},
    {over, run_input::client_left, false, ignored},
  };
  for (auto& r : table) {
    CAPTURE(static_cast<int>(r.from), static_cast<int>(r.input), r.background);
    CHECK(next_phase(r.from, r.input, r.background) == r.to);
  }
  CHECK_FALSE(ended(running));
  CHECK(ended(ending));
  CHECK(ended(over));
}
