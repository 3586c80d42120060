#include "actors/agent_loop.hpp"

#include "protocol/agent_loop.hpp"

#include <caf/all.hpp>

namespace troupe {

namespace rs = protocol::responses;

agent_loop::agent_loop(caf::scheduled_actor* self, std::shared_ptr<model_port> model, loop_settings settings,
                       loop_dialect& dialect)
    : self_(self), model_(std::move(model)), settings_(settings), dialect_(dialect) {
  if (settings_.parallel_calls == 0)
    settings_.parallel_calls = 1;
}

// The hosting actor is gone: so is its work.
agent_loop::~agent_loop() { stop(); }

caf::actor agent_loop::me() const { return caf::actor_cast<caf::actor>(self_); }

void agent_loop::start(std::vector<loop_call> first_calls) {
  then_ = after_calls::next_round;
  for (auto& c : first_calls) {
    c.key = ++next_key_;
    waiting_.push_back(std::move(c));
  }
  pump();
}

void agent_loop::next_round() {
  if (stopped_)
    return;
  rs::round_request r;
  if (!dialect_.prepare_round(round_ + 1, r) || stopped_)
    return;
  ++round_;
  open(r);
}

void agent_loop::open_side_round(const rs::round_request& r) {
  if (!stopped_)
    open(r);
}

void agent_loop::open(const rs::round_request& r) {
  if (round_in_flight_)
    round_in_flight_->cancel();
  auto tag = ++round_tag_;
  auto actor = me();
  round_in_flight_ = model_->open(r, [actor, tag](std::vector<rs::upstream_event> events) {
    caf::anon_send(actor, upstream_atom::value, tag, std::move(events));
  });
}

void agent_loop::resume() {
  if (round_in_flight_)
    round_in_flight_->resume();
}

void agent_loop::on_upstream(uint64_t tag, std::vector<rs::upstream_event>& events) {
  if (stopped_ || tag != round_tag_ || !round_in_flight_)
    return;
  switch (dialect_.on_batch(events)) {
  case loop_dialect::batch::more:
    return resume();
  case loop_dialect::batch::hold:
  case loop_dialect::batch::taken:
    return;
  case loop_dialect::batch::round_end:
    break;
  }
  if (stopped_)
    return;
  round_in_flight_.reset();
  std::vector<loop_call> calls;
  if (!dialect_.on_round_end(calls, then_) || stopped_)
    return;
  for (auto& c : calls) {
    c.key = ++next_key_;
    waiting_.push_back(std::move(c));
  }
  pump();
}

void agent_loop::pump() {
  if (pumping_) // re-entered from a dialect hook: the loop below goes on
    return;
  pumping_ = true;
  while (!stopped_ && !waiting_.empty() && running_.size() < settings_.parallel_calls) {
    auto key = waiting_.front().key;
    auto& slot = running_[key];
    slot.call = std::move(waiting_.front());
    waiting_.pop_front();
    std::string refusal;
    switch (dialect_.admit_call(slot.call, refusal)) {
    case loop_dialect::admission::run:
      launch(slot);
      break;
    case loop_dialect::admission::wait:
      break;
    case loop_dialect::admission::refuse:
      complete(key, {{std::move(refusal), false}, 0, false, true});
      break;
    }
  }
  pumping_ = false;
  if (stopped_ || calls_pending())
    return;
  if (then_ == after_calls::end)
    return dialect_.on_done();
  if (round_ >= settings_.max_rounds)
    return dialect_.on_rounds_exhausted();
  next_round();
}

void agent_loop::launch(running_call& slot) {
  slot.actor = spawn_tool_call(self_->system(), me(), slot.call.key, slot.call.port, slot.call.invocation,
                               settings_.call_timeout_seconds);
  self_->monitor(slot.actor);
}

void agent_loop::admit(uint64_t key) {
  auto it = running_.find(key);
  if (stopped_ || it == running_.end() || it->second.actor)
    return;
  launch(it->second);
}

void agent_loop::refuse(uint64_t key, std::string output) {
  auto it = running_.find(key);
  if (stopped_ || it == running_.end() || it->second.actor)
    return;
  complete(key, {{std::move(output), false}, 0, false, true});
  pump();
}

void agent_loop::on_tool_result(uint64_t key, call_result& result) {
  auto it = running_.find(key);
  if (stopped_ || it == running_.end() || !it->second.actor)
    return;
  complete(key, std::move(result));
  pump();
}

// A call actor answers before it quits, so one still running when it goes down died without answering.
bool agent_loop::on_down(const caf::down_msg& down) {
  for (auto& [key, slot] : running_)
    if (slot.actor && slot.actor.address() == down.source) {
      auto k = key;
      complete(k, {{"[ERROR] Tool call failed: " + self_->system().render(down.reason), false}, 0, false, false});
      pump();
      return true;
    }
  return false;
}

void agent_loop::complete(uint64_t key, call_result result) {
  auto& output = result.outcome.output;
  if (result.timed_out)
    output = dialect_.timeout_output(settings_.call_timeout_seconds);
  else if (!result.refused)
    if (auto dropped = protocol::cut_tool_output(output, settings_.max_tool_output_bytes))
      output += dialect_.truncation_notice(dropped);
  auto it = running_.find(key);
  auto call = std::move(it->second.call);
  running_.erase(it);
  dialect_.on_call_end(call, std::move(result));
}

void agent_loop::stop() {
  stopped_ = true;
  if (round_in_flight_)
    round_in_flight_->cancel();
  round_in_flight_.reset();
  for (auto& [key, slot] : running_)
    if (slot.actor)
      caf::anon_send(slot.actor, cancel_atom::value);
  running_.clear();
  waiting_.clear();
}

} // namespace troupe
