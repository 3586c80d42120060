#include "actors/run_registry.hpp"

#include "actors/errors.hpp"

#include <caf/all.hpp>

#include <unordered_map>

namespace troupe {

namespace {

struct run_registry_state {
  static inline const char* name = "run_registry";
  std::shared_ptr<const run_environment> env;
  std::unordered_map<std::string, run_actor> live;
  std::unordered_map<caf::actor_addr, std::string> ids;
};

run_registry_actor::behavior_type
run_registry_behavior(run_registry_actor::stateful_pointer<run_registry_state> self,
                      std::shared_ptr<const run_environment> env) {
  self->state.env = std::move(env);
  // A run that ends, normally or not, leaves the registry; its own end event was already sent.
  self->set_down_handler([=](caf::down_msg& msg) {
    auto it = self->state.ids.find(msg.source);
    if (it == self->state.ids.end())
      return;
    self->state.live.erase(it->second);
    self->state.ids.erase(it);
  });
  return {
    [=](spawn_run_atom, run_spec& spec, caf::actor& subscriber) -> caf::result<run_actor> {
      auto& st = self->state;
      if (st.live.count(spec.run_id) != 0)
        return make_error(errc::conflict, "Run already exists");
      auto id = spec.run_id;
      auto run = spawn_run(self->system(), st.env, std::move(spec), std::move(subscriber));
      self->monitor(run);
      st.ids.emplace(run.address(), id);
      st.live.emplace(std::move(id), run);
      self->send(run, start_atom::value);
      return run;
    },
    [=](cancel_atom, const std::string& run_id) -> caf::result<bool> {
      auto it = self->state.live.find(run_id);
      if (it == self->state.live.end())
        return make_error(errc::not_found, "Run not found");
      self->send(it->second, cancel_atom::value);
      return true;
    },
    [=](cancel_all_atom) {
      for (auto& [id, run] : self->state.live)
        self->send(run, cancel_atom::value);
    },
    [=](count_atom) { return static_cast<uint64_t>(self->state.live.size()); },
  };
}

} // namespace

run_registry_actor spawn_run_registry(caf::actor_system& sys, std::shared_ptr<const run_environment> env) {
  return sys.spawn(run_registry_behavior, std::move(env));
}

} // namespace troupe
