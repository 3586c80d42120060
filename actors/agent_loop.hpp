// The agent loop (DESIGN.md: one agent loop, three dialects). It reads the model in rounds through
// the model port and runs the calls a round asks for, each in its own tool_call actor — at most
// `parallel_calls` at once, each bounded by a timeout — until the dialect ends the run or the round
// cap is reached. It lives inside the actor of an agent-service run or of a Responses response; the
// dialect is that actor's: it says what a round's reply means, gates each call, renders events and
// persists.
#pragma once

#include "actors/atoms.hpp"
#include "actors/messages.hpp"
#include "actors/model_port.hpp"
#include "actors/tool_call.hpp"
#include "protocol/loop_settings.hpp"

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace troupe {

// What an actor that hosts a loop handles, and hands to it: the batches of the round in flight and
// the calls' results.
using loop_actor = caf::typed_actor<
  caf::reacts_to<upstream_atom, uint64_t, std::vector<protocol::responses::upstream_event>>,
  caf::reacts_to<tool_result_atom, uint64_t, call_result>>;

using protocol::loop_settings;

// One call a round asked for.
struct loop_call {
  uint64_t key = 0;              // set by the loop
  std::size_t ref = 0;           // the dialect's own reference: a call index, an output position
  std::shared_ptr<tool_port> port; // where it runs
  tool_invocation invocation;
};

// What follows a round's calls.
enum class after_calls { next_round, end };

class loop_dialect {
public:
  virtual ~loop_dialect() = default;

  // Fills round number `round`'s request. False when no model round follows now: the dialect ended
  // the run, or opened a side round (a compaction summary) and calls next_round() once it is done.
  virtual bool prepare_round(int round, protocol::responses::round_request& r) = 0;

  // What the loop does after a batch of the round in flight.
  enum class batch {
    more,      // read on
    hold,      // the dialect calls resume() when it can take more
    round_end, // the round ended: on_round_end follows
    taken,     // the dialect took over: it ended the run or opened another round
  };
  virtual batch on_batch(std::vector<protocol::responses::upstream_event>& events) = 0;

  // The round ended. Fills the calls to run, in order, and what follows them; false when the dialect
  // ended the run instead.
  virtual bool on_round_end(std::vector<loop_call>& calls, after_calls& then) = 0;

  // Whether a call may run, asked when its turn comes. `wait`: the dialect answers later with
  // admit() or refuse(). `refuse`: the call does not run; `refusal` is its output.
  enum class admission { run, wait, refuse };
  virtual admission admit_call(const loop_call&, std::string& /*refusal*/) { return admission::run; }

  // A call's result: a refusal as the gate gave it, a timed-out call's output worded by
  // timeout_output(), anything the call answered cut to max_tool_output_bytes and followed by
  // truncation_notice().
  virtual void on_call_end(const loop_call& call, call_result result) = 0;
  virtual std::string timeout_output(double seconds) const = 0;
  virtual std::string truncation_notice(std::size_t dropped_bytes) const = 0;

  // The calls are done and the round's reply said the run ends.
  virtual void on_done() = 0;
  // The calls are done, another round would follow, but the round cap is reached.
  virtual void on_rounds_exhausted() = 0;
};

class agent_loop {
public:
  // The loop monitors its call actors; the host's down handler hands every down to on_down().
  agent_loop(caf::scheduled_actor* self, std::shared_ptr<model_port> model, loop_settings settings,
             loop_dialect& dialect);
  ~agent_loop();
  agent_loop(const agent_loop&) = delete;
  agent_loop& operator=(const agent_loop&) = delete;

  // Runs `first_calls` (RS-33: approved calls before round 1), then the first round.
  void start(std::vector<loop_call> first_calls = {});
  // Prepares and opens the next round.
  void next_round();
  // Opens a round outside the count (a compaction summary); its batches reach on_batch too.
  void open_side_round(const protocol::responses::round_request& r);
  // Reading of the round in flight goes on.
  void resume();
  // A waiting call (admit_call said `wait`) runs now, or ends with `output` without running.
  void admit(uint64_t key);
  void refuse(uint64_t key, std::string output);
  // Cancels the round and the calls in flight; nothing more reaches the dialect.
  void stop();

  int round() const { return round_; }
  bool round_open() const { return static_cast<bool>(round_in_flight_); }
  bool calls_pending() const { return !waiting_.empty() || !running_.empty(); }

  // The loop_actor messages, forwarded by the hosting actor.
  void on_upstream(uint64_t tag, std::vector<protocol::responses::upstream_event>& events);
  void on_tool_result(uint64_t key, call_result& result);
  // A down the host received. True when it was one of the loop's call actors: one that dies without
  // answering ends its call with an [ERROR] result and the run goes on (DESIGN.md's supervision).
  bool on_down(const caf::down_msg& down);

private:
  struct running_call {
    loop_call call;
    tool_call_actor actor; // once admitted
  };

  void open(const protocol::responses::round_request& r);
  void pump();
  void launch(running_call& slot);
  // Ends a call: its result goes to the dialect; pump() runs the next.
  void complete(uint64_t key, call_result result);
  caf::actor me() const;

  caf::scheduled_actor* self_;
  std::shared_ptr<model_port> model_;
  loop_settings settings_;
  loop_dialect& dialect_;

  int round_ = 0;
  uint64_t round_tag_ = 0; // stale batches of a cancelled round are dropped
  std::shared_ptr<model_round> round_in_flight_;
  std::deque<loop_call> waiting_;
  std::map<uint64_t, running_call> running_;
  uint64_t next_key_ = 0;
  after_calls then_ = after_calls::next_round;
  bool pumping_ = false;
  bool stopped_ = false;
};

} // namespace troupe
