// How a route handler asks an actor and answers with the reply, without blocking an I/O thread: a
// short-lived actor sends the request and answers the exchange. Included by route files only.
#pragma once

#include "actors/errors.hpp"
#include "io/agent_http.hpp"
#include "io/http_types.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <memory>
#include <utility>

namespace troupe::io {

inline constexpr auto ask_timeout = std::chrono::seconds(60);

// Runs `fn(self)` in a short-lived actor, for a route that asks more than one question or answers in
// its own way. `fn` travels as the spawn argument: CAF 0.17 binds a null empty tuple to a function
// spawned without arguments (UBSan reports it).
template <class F>
void spawn_task(caf::actor_system& sys, F fn) {
  sys.spawn([](caf::event_based_actor* self, F f) { f(self); }, std::move(fn));
}

inline http_response error_response(const caf::error& err) {
  return agent_error(code_of(err), message_of(err));
}

// Answers the exchange with `on_value(reply)`, or with the error's status and detail (`not_found`,
// when given, replaces a 404's detail).
template <class T, class Dest, class OnValue, class... Ts>
void ask_as(caf::actor_system& sys, std::shared_ptr<http_exchange> ex, const char* not_found, Dest dest,
            OnValue on_value, Ts... xs) {
  sys.spawn(
    [](caf::event_based_actor* self, std::shared_ptr<http_exchange> ex, const char* not_found, Dest dest,
       OnValue on_value, Ts... xs) {
      self->request(dest, ask_timeout, xs...)
        .then([=](T& value) { ex->respond(on_value(value)); },
              [=](caf::error& err) {
                ex->respond(not_found && code_of(err) == errc::not_found ? agent_error(errc::not_found, not_found)
                                                                         : error_response(err));
              });
    },
    std::move(ex), not_found, std::move(dest), std::move(on_value), std::move(xs)...);
}

template <class T, class Dest, class OnValue, class... Ts>
void ask(caf::actor_system& sys, std::shared_ptr<http_exchange> ex, Dest dest, OnValue on_value, Ts... xs) {
  ask_as<T>(sys, std::move(ex), nullptr, std::move(dest), std::move(on_value), std::move(xs)...);
}

} // namespace troupe::io
