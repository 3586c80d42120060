#include "actors/run_registry.hpp"

#include "actors/errors.hpp"

#include <caf/all.hpp>

#include <unordered_map>
#include <unordered_set>

namespace troupe {

namespace {

struct run_registry_state {
  static inline const char* name = "run_registry";
  std::shared_ptr<const run_environment> env;
  std::unordered_map<std::string, run_actor> live;
  std::unordered_map<caf::actor_addr, std::string> ids;
  std::unordered_set<std::string> reserved; // ids whose stored record is being looked up
};

run_actor start(run_registry_actor::stateful_pointer<run_registry_state> self, run_spec spec,
                caf::actor subscriber) {
  auto& st = self->state;
  auto id = spec.run_id;
  auto run = spawn_run(self->system(), st.env, std::move(spec), std::move(subscriber));
  self->monitor(run);
  st.ids.emplace(run.address(), id);
  st.live.emplace(std::move(id), run);
  self->send(run, start_atom::value);
  return run;
}

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
      if (st.live.count(spec.run_id) != 0 || st.reserved.count(spec.run_id) != 0)
        return make_error(errc::conflict, "Run already exists");
      if (!st.env->store || !spec.caller_named_id) // a fresh UUID names no stored run
        return start(self, std::move(spec), std::move(subscriber));
      // A stored terminal chat run with this id reopens (AS-10); the id is reserved meanwhile so a
      // concurrent request for it is refused.
      st.reserved.insert(spec.run_id);
      auto rp = self->make_response_promise<run_actor>();
      auto id = spec.run_id;
      self->request(st.env->store, std::chrono::seconds(30), get_run_atom::value, id)
        .then(
          [=](run_record& stored) mutable {
            self->state.reserved.erase(id);
            if (stored.run_kind != "chat" || stored.status == "running" || stored.status == "queued") {
              rp.deliver(make_error(errc::conflict, "Run already exists"));
              return;
            }
            spec.attempt = stored.attempts + 1;
            spec.first_sequence = stored.event_count;
            rp.deliver(start(self, std::move(spec), std::move(subscriber)));
          },
          [=](caf::error& err) mutable {
            self->state.reserved.erase(id);
            if (code_of(err) == errc::not_found)
              rp.deliver(start(self, std::move(spec), std::move(subscriber)));
            else
              rp.deliver(err);
          });
      return rp;
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
