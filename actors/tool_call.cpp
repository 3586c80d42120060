#include "actors/tool_call.hpp"

#include "protocol/timestamp.hpp"

#include <caf/all.hpp>

#include <chrono>

namespace troupe {

namespace {

struct tool_call_state {
  std::shared_ptr<cancel_handle> handle;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  bool finished = false;
  static inline const char* name = "tool_call";
};

tool_call_actor::behavior_type tool_call_behavior(tool_call_actor::stateful_pointer<tool_call_state> self,
                                                  caf::actor reply_to, uint64_t key,
                                                  std::shared_ptr<tool_port> port, tool_invocation call,
                                                  double timeout_seconds) {
  auto finish = [=](tool_outcome outcome, bool timed_out) {
    if (self->state.finished)
      return;
    self->state.finished = true;
    auto ms = protocol::elapsed_ms(self->state.started, std::chrono::steady_clock::now());
    caf::anon_send(reply_to, tool_result_atom::value, key, call_result{std::move(outcome), ms, timed_out, false});
    self->quit();
  };
  auto stop = [=] {
    self->state.finished = true;
    if (self->state.handle)
      self->state.handle->cancel();
    self->quit();
  };
  self->monitor(reply_to);
  self->set_down_handler([=](caf::down_msg&) { stop(); }); // the run is gone: so is its call
  tool_call_actor me = self;
  self->state.handle = port->execute(std::move(call), [me](tool_outcome outcome) {
    caf::anon_send(me, tool_done_atom::value, std::move(outcome));
  });
  if (timeout_seconds > 0)
    self->delayed_send(self, std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000)),
                       timeout_atom::value);
  return {
    [=](cancel_atom) { stop(); },
    // A cancel or a timeout of ours has already ended this actor, so a cancelled outcome that still
    // arrives is the port giving the call up on its own (it is shutting down): the run hears its words.
    [=](tool_done_atom, tool_outcome& outcome) { finish(std::move(outcome), false); },
    [=](timeout_atom) {
      if (self->state.handle)
        self->state.handle->cancel();
      finish({}, true);
    },
  };
}

} // namespace

tool_call_actor spawn_tool_call(caf::actor_system& sys, caf::actor reply_to, uint64_t key,
                                std::shared_ptr<tool_port> port, tool_invocation call, double timeout_seconds) {
  return sys.spawn(tool_call_behavior, std::move(reply_to), key, std::move(port), std::move(call),
                   timeout_seconds);
}

} // namespace troupe
